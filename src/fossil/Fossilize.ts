/** Fossil's escaping of card values ("fossilize"): space, backslash and control characters. */
const escapes: Record<string, string> = {
  "\\": "\\\\", " ": "\\s", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v", "\f": "\\f", "\0": "\\0"
}
const unescapes: Record<string, string> = {
  "\\": "\\", s: " ", n: "\n", r: "\r", t: "\t", v: "\v", f: "\f", "0": "\0"
}

export const fossilize = (value: string): string => value.replace(/[\\ \n\r\t\v\f\0]/g, (c) => escapes[c]!)

export const defossilize = (value: string): string =>
  value.replace(/\\(.)/g, (_, c: string) => unescapes[c] ?? c)
