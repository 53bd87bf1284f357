// 2.1 and 2.17: the replies ocx2 reads and writes. Readers ignore keys they do not know
// in these kinds (2.17); writers write exactly the keys 2.1 gives.
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { VERSION } from "./Envelope.js"
import { WholeNumber } from "./Sizes.js"
import { Limits, type Limits as LimitsType, type RunEncoded } from "./Run.js"
import type { EndedContent } from "./Outcomes.js"

export const StartedContent = Schema.Struct({
  /** what the steps set (2.6), `$$password$$` standing for the password */
  values: Schema.Record({ key: Schema.String, value: Schema.String }),
  /** the limits applied */
  limits: Limits
})
export type StartedContent = typeof StartedContent.Type

export const EndedContentSchema = Schema.Struct({
  outcome: Schema.String,
  exit: Schema.optionalWith(WholeNumber, { exact: true }),
  note: Schema.optionalWith(Schema.String, { exact: true })
})

const reason = (error: ParseResult.ParseError): string => {
  const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
  if (issue === undefined) return "not as 2.1 gives it"
  const key = issue.path.map(String).join(".")
  return `${key === "" ? "content" : key}: ${issue._tag === "Missing" ? "missing" : issue.message}`
}

const lenient = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknownEither(schema, { onExcessProperty: "ignore", errors: "first" })
  return (content: unknown): Either.Either<A, string> => Either.mapLeft(decode(content), reason)
}

export const decodeStarted: (content: unknown) => Either.Either<StartedContent, string> = lenient(StartedContent)
/**
 * Any object whose outcome is text is an ended: a reader that does not know the outcome,
 * or finds a known one without its exit or note, still takes the run as ended (2.12).
 */
export const decodeEnded: (content: unknown) => Either.Either<EndedContent, string> = lenient(EndedContentSchema)
/** `{}`, and any keys a later version adds, which are ignored */
const decodeEmpty = (content: unknown): Either.Either<{}, string> =>
  typeof content === "object" && content !== null && !Array.isArray(content)
    ? Either.right({})
    : Either.left("content: expected an object")
export const decodeStop = decodeEmpty
export const decodePublish = decodeEmpty

export const runMessage = (to: string, run: RunEncoded) => ({ ocx: VERSION, to, run })
export const startedMessage = (re: string, content: { readonly values: Readonly<Record<string, string>>; readonly limits: LimitsType }) => ({
  ocx: VERSION,
  re,
  started: { values: content.values, limits: content.limits }
})
export const stopMessage = (re: string) => ({ ocx: VERSION, re, stop: {} })
export const endedMessage = (re: string, ended: EndedContent) => ({
  ocx: VERSION,
  re,
  ended: {
    outcome: ended.outcome,
    ...(ended.exit === undefined ? {} : { exit: ended.exit }),
    ...(ended.note === undefined ? {} : { note: ended.note })
  }
})
export const publishMessage = (re: string) => ({ ocx: VERSION, re, publish: {} })

/** `started`'s values (2.6): what the steps set, never the password itself. */
export const startedValues = (set: Readonly<Partial<Record<string, string>>>): Readonly<Record<string, string>> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(set)) {
    if (value === undefined) continue
    out[name] = name === "password" ? "$$password$$" : value
  }
  return out
}
