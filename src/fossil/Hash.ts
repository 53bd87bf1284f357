import * as Crypto from "node:crypto"

/** Fossil names an artifact by SHA3-256 of its bytes (hash-policy 2); SHA1 names are older. */
export const sha3 = (bytes: Uint8Array | string): string =>
  Crypto.createHash("sha3-256").update(bytes).digest("hex")

export const sha1 = (bytes: Uint8Array | string): string => Crypto.createHash("sha1").update(bytes).digest("hex")

export const md5 = (bytes: Uint8Array | string): string => Crypto.createHash("md5").update(bytes).digest("hex")

/** A full artifact hash: 40 (SHA1) or 64 (SHA3-256) lower-case hex digits. */
export const isFullHash = (value: string): boolean => /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/.test(value)

/** A hash prefix a person may type: 4 to 64 hex digits. */
export const isHashPrefix = (value: string): boolean => /^[0-9a-f]{4,64}$/.test(value)

/** Fossil's hname check: the name of these bytes, computed with the hash the name's length implies. */
export const nameMatches = (name: string, bytes: Uint8Array): boolean =>
  name.length === 40 ? sha1(bytes) === name : sha3(bytes) === name
