// Sizes and durations of 2.9 (and `keep` of 2.10): one spelling each, so a run reads the
// same to every node. No lower case, no decimals, no spaces, no sign, no leading zeros.
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"

const SIZE = /^(0|[1-9][0-9]*)([KMG]?)$/
const DURATION = /^(0|[1-9][0-9]*)([smhd])$/

const sizeUnits: Readonly<Record<string, number>> = { "": 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3 }
const durationUnits: Readonly<Record<string, number>> = { s: 1, m: 60, h: 3600, d: 86400 }

export const sizeForm = "a whole number of bytes, or a whole number and K, M or G"
export const durationForm = "a whole number and s, m, h or d"

const scaled = (text: string, pattern: RegExp, units: Readonly<Record<string, number>>, form: string) => {
  const match = pattern.exec(text)
  if (match === null) return Either.left(`${JSON.stringify(text)} is not ${form}`)
  const value = Number(match[1]) * units[match[2] ?? ""]!
  return Number.isSafeInteger(value) ? Either.right(value) : Either.left(`${JSON.stringify(text)} is too large`)
}

/** "64K" -> 65536 bytes */
export const parseSize = (text: string): Either.Either<number, string> => scaled(text, SIZE, sizeUnits, sizeForm)

/** "2h" -> 7200 seconds */
export const parseDuration = (text: string): Either.Either<number, string> =>
  scaled(text, DURATION, durationUnits, durationForm)

/** the size in its shortest spelling: 65536 -> "64K" */
export const formatSize = (bytes: number): string => {
  for (const unit of ["G", "M", "K"] as const) {
    const factor = sizeUnits[unit]!
    if (bytes >= factor && bytes % factor === 0) return `${bytes / factor}${unit}`
  }
  return `${bytes}`
}

/** the duration in its shortest spelling: 7200 -> "2h" */
export const formatDuration = (seconds: number): string => {
  for (const unit of ["d", "h", "m"] as const) {
    const factor = durationUnits[unit]!
    if (seconds >= factor && seconds % factor === 0) return `${seconds / factor}${unit}`
  }
  return `${seconds}s`
}

const checked = (parse: (text: string) => Either.Either<number, string>) => (text: string) =>
  Either.match(parse(text), { onLeft: (message) => message, onRight: () => true as const })

/** a size as the run writes it (kept as text, so a run round-trips unchanged) */
export const SizeText = Schema.String.pipe(Schema.filter(checked(parseSize), { identifier: "Size" }))
/** a duration as the run writes it */
export const DurationText = Schema.String.pipe(Schema.filter(checked(parseDuration), { identifier: "Duration" }))

/** whole seconds of CPU, or a process count: a JSON integer >= 0 */
export const WholeNumber = Schema.Number.pipe(
  Schema.filter((n) => (Number.isSafeInteger(n) && n >= 0) || `${n} is not a whole number (0 or more)`, {
    identifier: "WholeNumber"
  })
)

const transformWith = (parse: (text: string) => Either.Either<number, string>, format: (n: number) => string) =>
  Schema.transformOrFail(Schema.String, Schema.Number, {
    strict: true,
    decode: (text, _, ast) =>
      Either.match(parse(text), {
        onLeft: (message) => ParseResult.fail(new ParseResult.Type(ast, text, message)),
        onRight: (n) => ParseResult.succeed(n)
      }),
    encode: (n, _, ast) =>
      Number.isSafeInteger(n) && n >= 0
        ? ParseResult.succeed(format(n))
        : ParseResult.fail(new ParseResult.Type(ast, n, `${n} is not a whole number (0 or more)`))
  })

/** "2G" <-> 2147483648 (bytes) */
export const Size = transformWith(parseSize, formatSize)
/** "2h" <-> 7200 (seconds) */
export const Duration = transformWith(parseDuration, formatDuration)
