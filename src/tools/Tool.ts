// One definition per tool (seed 001): the adapters (CLI, CGI, MCP) derive everything from
// this and decide nothing, so a call is allowed or refused the same way from every entry point.

import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { Hosts } from "../../services/Hosts.js"
import type { ReleaseRoot } from "../../services/ReleaseRoot.js"
import { type Handled, Operation, StopReason } from "../operations/Operations.js"

/** Every answer has one shape: the operations log, the output when it ran to the end, and why it stopped. */
export interface Answer<O> {
  readonly tool: string
  readonly operations: ReadonlyArray<Operation>
  readonly output?: O
  readonly stopped: { readonly reason: StopReason; readonly message?: string }
}

export const answerSchema = <O, OE>(output: Schema.Schema<O, OE>) =>
  Schema.Struct({
    tool: Schema.String,
    operations: Schema.Array(Operation),
    output: Schema.optionalWith(output, { exact: true }),
    stopped: Schema.Struct({
      reason: StopReason,
      message: Schema.optionalWith(Schema.String, { exact: true })
    })
  })

/** The three entry points (seed 001): the command line, the web pages served beside Fossil, and MCP. */
export type EntryPoint = "cli" | "cgi" | "mcp"
export const entryPoints: ReadonlyArray<EntryPoint> = ["cli", "cgi", "mcp"]

/** Who is calling, as the entry point authenticated them. */
export interface Caller {
  readonly user: string | undefined
  /** Fossil's effective capabilities of the user on the served repository ("" when unknown). */
  readonly capabilities: string
  /** Whether the call comes from inside a run's sandbox. */
  readonly sandboxed: boolean
  /**
   * A token the request carried for a tool that takes one (the metrics page's scrapers:
   * `Authorization: Bearer TOKEN`, or the cookie `ocx2-metrics-token`), as the entry point received
   * it: no capability by itself; the tool compares it.
   */
  readonly token?: string
}

export interface ToolContext {
  readonly caller: Caller
  readonly dryRun: boolean
  /** The repository file the call acts on, when one was named. */
  readonly repository: string | undefined
  /** The entry point the call came through; list and help show what it offers (all when not given). */
  readonly entryPoint?: EntryPoint
  /** Through the web pages: the server's origin as the browser reached it (the one the run page's live stream answers to). */
  readonly origin?: string
  /**
   * Where a tool that follows something as it happens (watch) prints it as it happens, for a person
   * at a terminal; absent, it only answers at the end.
   */
  readonly progress?: (stream: "stdout" | "stderr", text: string) => void
  /**
   * Where a tool that takes long (stage) says each step as it starts and ends, and what the
   * programs it runs print, as it happens, for a person at a terminal; absent, it only answers at
   * the end. The command line gives it standard error, with --json too (the answer is on stdout).
   */
  readonly steps?: (text: string) => void
}

/**
 * What a tool's handler may require: the layers of the host it acts on (Hosts) and the release
 * roots. runTool provides them, so an entry point runs any tool with nothing more to give.
 */
export type ToolServices = Hosts | ReleaseRoot

export interface Tool<I = any, IE = any, O = any, OE = any, R = ToolServices> {
  readonly name: string
  /** One line for lists. */
  readonly summary: string
  /** What it does, who may use it, what it leaves in Fossil. */
  readonly description: string
  readonly input: Schema.Schema<I, IE, never>
  /** Input fields taken by position on the command line, in order. */
  readonly positional: ReadonlyArray<string>
  readonly output: Schema.Schema<O, OE>
  /** undefined when the caller may use the tool; otherwise the refusal, in the same words everywhere. */
  readonly allow: (caller: Caller) => string | undefined
  /** The entry points that offer the tool (seed 001's table); every one when not given. */
  readonly offeredBy?: ReadonlyArray<EntryPoint>
  /** Why an entry point that does not offer it does not, in words that say where to go instead. */
  readonly notOfferedBecause?: string
  /**
   * true: the tool only reads, so a web page's GET runs it (a GET never changes anything) and MCP
   * marks it read-only; its dry run reads too.
   */
  readonly readOnly?: boolean
  /** true: the tool ends or replaces what is there (stop, accept, rollback), and MCP marks it destructive. */
  readonly destructive?: boolean
  /**
   * The command line's exit status for an answer that completed, when the tool gives one of its own
   * (watch --exit-status: the run's success); 0 when not given.
   */
  readonly exitStatus?: (output: O) => number | undefined
  /**
   * A tool whose answer is a document of its own kind (metrics: Prometheus' text format): the
   * command line prints the document as its text, and the web page answers a GET with it as it is,
   * in this content type, not an HTML page (JSON with format=json, as every page).
   */
  readonly document?: { readonly contentType: string; readonly body: (output: O) => string }
  readonly handle: (input: I, context: ToolContext) => Effect.Effect<Handled<O>, never, R>
}

export const defineTool = <I, IE, O, OE, R>(tool: Tool<I, IE, O, OE, R>): Tool<I, IE, O, OE, R> => tool

const entryPointNames: Record<EntryPoint, string> = { cli: "the command line (ocx2)", cgi: "the OCX web page", mcp: "MCP" }

export const offers = (entryPoint: EntryPoint, tool: Tool): boolean => (tool.offeredBy ?? entryPoints).includes(entryPoint)

/** The tools an entry point offers, in the order given. */
export const offeredBy = (entryPoint: EntryPoint, tools: ReadonlyArray<Tool>): ReadonlyArray<Tool> =>
  tools.filter((tool) => offers(entryPoint, tool))

/** The refusal of a tool an entry point does not offer, naming where it is offered. */
export const notOfferedMessage = (entryPoint: EntryPoint, tool: Tool): string => {
  const where = (tool.offeredBy ?? entryPoints).map((e) => entryPointNames[e])
  const offered = where.length === 0 ? "it is offered nowhere" : `it is offered by ${where.join(" and ")}`
  const because = tool.notOfferedBecause !== undefined ? `: ${tool.notOfferedBecause}` : ""
  return `${tool.name} is not offered by ${entryPointNames[entryPoint]}${because}; ${offered}`
}
