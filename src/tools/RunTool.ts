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

/** "key: message; key: message", naming every key that is wrong. */
export const describeParseError = (error: ParseResult.ParseError): string =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .map((issue) => `${issue.path.length > 0 ? issue.path.join(".") : "(input)"}: ${issue.message}`)
    .join("; ")
