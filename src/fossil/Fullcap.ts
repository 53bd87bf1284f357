/**
 * Fossil's effective capabilities, computed as its SQL function fullcap()
 * (capabilities.c, capability_expand): the user's own letters, plus `anonymous`'s and
 * `nobody`'s, plus every admin letter if they then hold a or s, plus `developer`'s if
 * they hold v, plus `reader`'s if they hold u (and `developer`'s if reader gave v);
 * rendered a-z, then 0-9, then A-Z. Checked against `fossil sql` fullcap() in tests.
 */
export interface SpecialUsers {
  readonly nobody: string
  readonly anonymous: string
  readonly reader: string
  readonly developer: string
}

const adminLetters = "bcdefghijklmnopqrtwz234567AD"

const letters = (s: string, into: Set<string>) => {
  for (const c of s) if (c >= "0" && c <= "z") into.add(c)
}

const render = (set: Set<string>): string => {
  let out = ""
  for (let c = 97; c <= 122; c++) if (set.has(String.fromCharCode(c))) out += String.fromCharCode(c)
  for (let c = 48; c <= 57; c++) if (set.has(String.fromCharCode(c))) out += String.fromCharCode(c)
  for (let c = 65; c <= 90; c++) if (set.has(String.fromCharCode(c))) out += String.fromCharCode(c)
  return out
}

export const fullcap = (own: string, special: SpecialUsers): string => {
  const set = new Set<string>()
  letters(own, set)
  letters(special.anonymous, set)
  letters(special.nobody, set)
  if (set.has("a") || set.has("s")) letters(adminLetters, set)
  let developer = false
  if (set.has("v")) {
    letters(special.developer, set)
    developer = true
  }
  if (set.has("u")) {
    letters(special.reader, set)
    if (set.has("v") && !developer) letters(special.developer, set)
  }
  return render(set)
}

/**
 * Whether effective capabilities grant one letter, as Fossil's permission checks do
 * (login.c): setup (s) grants every letter, admin (a) every letter but s.
 */
export const grants = (capabilities: string, letter: string): boolean =>
  capabilities.includes(letter) || capabilities.includes("s") || (letter !== "s" && capabilities.includes("a"))
