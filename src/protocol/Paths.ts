// Path arithmetic for refusals 1 and 7: lexical, on absolute paths, after the caller's
// resolver has followed links. Pure: the resolver is given, never the file system.

/** `/a//b/./c/` -> `/a/b/c`; `..` pops (the resolver has already followed links) */
export const normalizePath = (path: string): string => {
  const parts: Array<string> = []
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue
    if (part === "..") parts.pop()
    else parts.push(part)
  }
  return "/" + parts.join("/")
}

/** whether `path` is `dir` or lies within it (both normalized) */
export const isWithin = (path: string, dir: string): boolean =>
  path === dir || path.startsWith(dir === "/" ? "/" : `${dir}/`)

export const hasDotDot = (path: string): boolean => path.split("/").includes("..")

/**
 * The directory a partly known path certainly lies within: the text before the first
 * placeholder still standing, cut back to its last `/`.
 */
export const knownPrefix = (text: string): string => {
  const at = text.indexOf("$$")
  if (at < 0) return text
  const slash = text.lastIndexOf("/", at)
  return slash <= 0 ? "/" : text.slice(0, slash)
}

/** How a path meets another: it is it, holds it, or lies within it. */
export type Meeting = "is" | "holds" | "lies within"

export const meeting = (path: string, other: string): Meeting | undefined =>
  path === other ? "is" : isWithin(other, path) ? "holds" : isWithin(path, other) ? "lies within" : undefined
