import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as LiveHosts from "../../layers/LiveHosts.js"
import type { Answer, Tool, ToolContext, ToolServices } from "./Tool.js"

/**
 * The one place a call is decoded, authorized and run; every entry point goes through it. It is
 * also where a tool call's services are provided (a composition point, docs/architecture.md,
 * "Layout"): a handler names what it needs in its type (ToolServices), and gets this host's live layers.
 */
export const runTool = <I, IE, O, OE, R>(
  tool: Tool<I, IE, O, OE, R>,
  rawInput: unknown,
  context: ToolContext
): Effect.Effect<Answer<O>, never, Exclude<R, ToolServices>> => {
  const refused = (message: string): Answer<O> => ({ tool: tool.name, operations: [], stopped: { reason: "refused", message } })
  const decoded = decodeInput(tool, rawInput)
  if (Either.isLeft(decoded)) return Effect.succeed(refused(decoded.left))
  const notAllowed = tool.allow(context.caller)
  if (notAllowed !== undefined) return Effect.succeed(refused(notAllowed))
  return tool.handle(decoded.right, context).pipe(
    Effect.provide(LiveHosts.layer),
    Effect.map((handled): Answer<O> => ({
      tool: tool.name,
      operations: handled.operations,
      ...(handled.output !== undefined ? { output: handled.output } : {}),
      stopped: handled.stopped ?? { reason: context.dryRun ? "dry_run" : "completed" }
    })),
    Effect.catchAllCause((cause) =>
      Effect.succeed<Answer<O>>({
        tool: tool.name,
        operations: [],
        stopped: { reason: "failed", message: Cause.pretty(cause).split("\n")[0] ?? "failed" }
      }))
  )
}

/**
 * The tool's input, or why its arguments are not ones it takes ("bad argument: ..."): the same
 * decoding runTool does, for an entry point that answers bad arguments as bad usage (the command
 * line's exit status 2).
 */
export const decodeInput = <I, IE, O, OE, R>(tool: Tool<I, IE, O, OE, R>, rawInput: unknown): Either.Either<I, string> =>
  Either.mapLeft(
    Schema.decodeUnknownEither(tool.input, { onExcessProperty: "error", errors: "all" })(rawInput),
    (error) => `bad argument: ${describeParseError(error)}`
  )

type Issue = ReturnType<typeof ParseResult.ArrayFormatter.formatErrorSync>[number]

const literalExpected = /^Expected ("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|true|false|null), actual ([\s\S]*)$/
const typeExpected = /^Expected (string|number|boolean|bigint|symbol|object|array|Int|integer), actual ([\s\S]*)$/
const expected = /^Expected ([\s\S]*), actual ([\s\S]*)$/
const unexpected = /^is unexpected, expected: ([\s\S]*)$/

/** "a, b or c" (or "a, b and c") */
const listed = (words: ReadonlyArray<string>, conjunction = "or"): string =>
  words.length <= 1 ? (words[0] ?? "") : `${words.slice(0, -1).join(", ")} ${conjunction} ${words.at(-1)}`

/** A literal as a person writes it on a command line or in a form: a string unquoted. */
const bare = (literal: string): string => (literal.startsWith("\"") ? JSON.parse(literal) as string : literal)

const articled = (type: string): string =>
  type === "Int" || type === "integer" ? "an integer" : /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`

/** One sentence for what is wrong at one key, however many of a union's members Effect tried. */
const sentenceAt = (name: string, issues: ReadonlyArray<Issue>): string => {
  const literals = issues.map((i) => literalExpected.exec(i.message))
  if (literals.every((m) => m !== null)) {
    const choices = [...new Set(literals.map((m) => bare(m![1]!)))]
    const actual = literals[0]![2]!
    return choices.length === 1 ? `${name} must be ${choices[0]}, not ${actual}` : `${name} must be one of ${listed(choices)}, not ${actual}`
  }
  return issues.map((issue) => {
    const type = typeExpected.exec(issue.message)
    if (type !== null) return `${name} must be ${articled(type[1]!)}, not ${type[2]}`
    const other = expected.exec(issue.message)
    if (other !== null) return `${name}: expected ${other[1]}, not ${other[2]}`
    return `${name} ${issue.message}`
  }).join("; ")
}

/**
 * What is wrong with the arguments, one sentence a key ("state must be one of waiting, started,
 * ended, refused, lost, open or over, not "done""), not one clause for each member of a union
 * Effect tried; keys a tool does not take are named together with those it does.
 */
export const describeParseError = (error: ParseResult.ParseError): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const byKey = new Map<string, Array<Issue>>()
  const extra: Array<string> = []
  let takes: string | undefined
  for (const issue of issues) {
    const name = issue.path.length > 0 ? issue.path.join(".") : "the input"
    const other = unexpected.exec(issue.message)
    if (other !== null && issue.path.length > 0) {
      extra.push(name)
      takes = other[1]!.split(" | ").map(bare).join(", ")
      continue
    }
    byKey.set(name, [...(byKey.get(name) ?? []), issue])
  }
  const sentences = [...byKey].map(([name, at]) => sentenceAt(name, at))
  if (extra.length > 0) {
    sentences.push(`${listed(extra, "and")} ${extra.length === 1 ? "is not an argument it takes" : "are not arguments it takes"}${takes !== undefined ? ` (it takes ${takes})` : ""}`)
  }
  return sentences.join("; ")
}
