/**
 * The exact text of a top-level member of a JSON object, for what the server must pass on
 * verbatim (a request's `arguments`, a Begun's secrets declaration): parsing and printing again
 * would change numbers past double precision, escapes and spacing. The text must already be
 * valid JSON (JSON.parse said so); like JSON.parse, the last of duplicate keys wins.
 */
export const memberText = (text: string, key: string): string | undefined => {
  let at = skipSpace(text, 0)
  if (text[at] !== "{") return undefined
  at = skipSpace(text, at + 1)
  let found: string | undefined
  while (text[at] !== "}") {
    const keyEnd = skipString(text, at)
    const name = JSON.parse(text.slice(at, keyEnd)) as string
    at = skipSpace(text, keyEnd)
    at = skipSpace(text, at + 1) // the colon
    const valueEnd = skipValue(text, at)
    if (name === key) found = text.slice(at, valueEnd)
    at = skipSpace(text, valueEnd)
    if (text[at] === ",") at = skipSpace(text, at + 1)
  }
  return found
}

const skipSpace = (text: string, at: number): number => {
  while (at < text.length && (text[at] === " " || text[at] === "\n" || text[at] === "\r" || text[at] === "\t")) at++
  return at
}

const skipString = (text: string, at: number): number => {
  at++
  while (text[at] !== '"') at += text[at] === "\\" ? 2 : 1
  return at + 1
}

const skipValue = (text: string, at: number): number => {
  const first = text[at]
  if (first === '"') return skipString(text, at)
  if (first === "{" || first === "[") {
    let depth = 0
    while (at < text.length) {
      const c = text[at]
      if (c === '"') {
        at = skipString(text, at)
        continue
      }
      if (c === "{" || c === "[") depth++
      else if (c === "}" || c === "]") {
        depth--
        if (depth === 0) return at + 1
      }
      at++
    }
    return at
  }
  while (at < text.length && !",}] \n\r\t".includes(text[at]!)) at++
  return at
}
