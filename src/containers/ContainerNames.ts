/** Names and paths of docs/containers.md sections 2, 3 and 6. */

export const isIdentity = (s: string): boolean => /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$/.test(s)

export const isVolumeName = (s: string): boolean => /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/.test(s)

export const volumeModes = ["ephemeral", "read_only", "persistent"] as const
export type VolumeMode = (typeof volumeModes)[number]
export const isVolumeMode = (s: unknown): s is VolumeMode => typeof s === "string" && (volumeModes as ReadonlyArray<string>).includes(s)

const badComponent = (c: string) => c === "" || c === "." || c === ".."

/** a path inside a volume: "" (the root) or components none of which is empty, . or .. */
export const isVolumePath = (s: string): boolean => s === "" || (!s.includes("\0") && !s.split("/").some(badComponent))

/** a container path's components (it starts with "/"); undefined when one is empty, . or .. */
export const containerComponents = (path: string): ReadonlyArray<string> | undefined => {
  if (path === "/") return []
  const parts = path.slice(1).split("/")
  return parts.some(badComponent) || path.includes("\0") ? undefined : parts
}

/** whether `inner` lies inside `outer` (both well-formed, distinct) */
export const isInside = (inner: ReadonlyArray<string>, outer: ReadonlyArray<string>): boolean =>
  inner.length > outer.length && outer.every((c, i) => inner[i] === c)
