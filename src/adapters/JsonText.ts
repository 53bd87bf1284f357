// JSON written by a person (a --fields argument, a web form's field) that does not parse: where it
// goes wrong, as line, column and position, since V8's own words name the position for some
// mistakes and not for others ("Unexpected token 'o', "not json" is not valid JSON").

/** The offset of the first character at which `text` stops being JSON (text.length: it ends too soon). */
export const firstBadOffset = (text: string): number => {
  let i = 0
  const space = () => {
    while (i < text.length && " \t\n\r".includes(text[i]!)) i++
  }
  const fail = (): never => {
    throw i
  }
  const word = (w: string) => {
    for (const c of w) {
      if (text[i] !== c) fail()
      i++
    }
  }
  const string = () => {
    i++ // the opening quote
    while (i < text.length && text[i] !== "\"") {
      if (text.charCodeAt(i) < 0x20) fail()
      if (text[i] === "\\") {
        i++
        if (text[i] === "u") {
          for (let k = 1; k <= 4; k++) if (!/[0-9a-fA-F]/.test(text[i + k] ?? "")) (i += k, fail())
          i += 4
        } else if (!"\"\\/bfnrt".includes(text[i] ?? "x")) fail()
      }
      i++
    }
    if (i >= text.length) fail()
    i++
  }
  const number = () => {
    const match = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i))
    if (match === null || match[0] === "" || match[0] === "-") fail()
    i += match![0].length
  }
  const value = (): void => {
    space()
    const c = text[i]
    if (c === "{") {
      i++
      space()
      if (text[i] === "}") return void i++
      for (;;) {
        space()
        if (text[i] !== "\"") fail()
        string()
        space()
        if (text[i] !== ":") fail()
        i++
        value()
        space()
        if (text[i] === ",") (i++)
        else if (text[i] === "}") return void i++
        else fail()
      }
    }
    if (c === "[") {
      i++
      space()
      if (text[i] === "]") return void i++
      for (;;) {
        value()
        space()
        if (text[i] === ",") (i++)
        else if (text[i] === "]") return void i++
        else fail()
      }
    }
    if (c === "\"") return string()
    if (c === "t") return word("true")
    if (c === "f") return word("false")
    if (c === "n") return word("null")
    return number()
  }
  try {
    value()
    space()
    return i < text.length ? i : -1
  } catch (at) {
    return Math.min(at as number, text.length)
  }
}

/** Where in `text` the offset is, as a person counts: line and column from 1. */
const lineAndColumn = (text: string, offset: number): { readonly line: number; readonly column: number } => {
  const before = text.slice(0, offset).split("\n")
  return { line: before.length, column: before.at(-1)!.length + 1 }
}

/** V8's reason without the position it sometimes adds, which the words before it give in full. */
const reasonOf = (error: unknown): string =>
  (error instanceof Error ? error.message : String(error)).replace(/ at position \d+.*$/s, "").replace(/ in JSON$/, "").replace(/ \(line \d+ column \d+\)$/, "")

/** JSON's value, or the sentence that says where and why it does not parse: "not JSON at line 1, column 2 (position 1): ...". */
export const parseJsonText = (text: string): { readonly value: unknown } | { readonly problem: string } => {
  try {
    return { value: JSON.parse(text) }
  } catch (e) {
    const offset = firstBadOffset(text)
    const at = offset < 0 ? text.length : offset
    const { line, column } = lineAndColumn(text, at)
    return { problem: `not JSON at line ${line}, column ${column} (position ${at}${at >= text.length ? ", its end" : ""}): ${reasonOf(e)}` }
  }
}
