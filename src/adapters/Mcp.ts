// The MCP adapter: every tool MCP offers (seed 001's table: not node, hook or unhook, since a
// sandbox has no served repository) as ocx_TOOL, its arguments the tool's input plus dry_run, its
// result the answer of runTool as JSON text and as structuredContent, isError when the tool
// refused or failed. It decides nothing. Names match ^[a-zA-Z0-9_-]+$, which function-calling
// clients require (they reject a list holding one name that does not); the names of the release
// before (ocx.TOOL) are still taken for a call, for one release, but not listed, since a listed
// ocx.TOOL is what those clients reject.
// The stdio transport owns stdout: nothing here prints.
//
// Who calls: the program that started the server acts as its user, within its Fossil
// capabilities. The user is the one named (OCX_USER, or `ocx2 --user`), else the user the
// repository's clone remembers, else the account's; the capabilities are that user's in the
// repository (OCX_REPOSITORY, or `ocx2 --repository`), read from the repository itself, never
// from the environment, which the program controls. Without a repository it holds none.

import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import * as Effect from "effect/Effect"
import { resolveCaller, resolveCallerOrProblem } from "./cli/Caller.js"
import { tools as registryTools } from "../tools/Registry.js"
import { runTool } from "../tools/RunTool.js"
import { type Answer, type Caller, notOfferedMessage, offeredBy, type Tool } from "../tools/Tool.js"
import { fromObject } from "./Input.js"
import { answerJsonSchema, inputJsonSchema } from "./JsonSchema.js"

export const MCP_PREFIX = "ocx_"
/** The prefix of the release before: taken as an alias of MCP_PREFIX for a call, never listed. */
export const OLD_MCP_PREFIX = "ocx."

/**
 * What a client may do without asking its user first: read-only tools change nothing; a tool
 * marked destructive (stop, accept, rollback) ends or replaces what is there; the other tools only
 * add to the record (MCP takes a tool that is not read-only as destructive unless told).
 */
const annotationsOf = (tool: Tool) =>
  tool.readOnly === true
    ? { readOnlyHint: true, openWorldHint: false }
    : { readOnlyHint: false, destructiveHint: tool.destructive === true, openWorldHint: false }

export interface McpOptions {
  /** The tools offered (those MCP offers among them); the registry's when not given. */
  readonly tools?: ReadonlyArray<Tool>
  /** Who is calling, for a caller built in code; otherwise resolved from the repository by `mcpCaller`. */
  readonly caller?: Caller
  /** The repository file the calls act on; OCX_REPOSITORY when not given. */
  readonly repository?: string | undefined
  /** The user to act as; OCX_USER when not given, else the clone's remembered user, else USER. */
  readonly user?: string | undefined
}

const nonEmpty = (value: string | undefined): string | undefined => (value !== undefined && value !== "" ? value : undefined)

/** The repository and user an MCP server started by a program acts with, from its options and environment. */
export const mcpIdentity = (options: McpOptions, env: NodeJS.ProcessEnv = process.env) => ({
  repository: nonEmpty(options.repository) ?? nonEmpty(env.OCX_REPOSITORY),
  user: nonEmpty(options.user) ?? nonEmpty(env.OCX_USER)
})

/** The caller of an MCP server: its user, with the capabilities the repository gives that user. */
export const mcpCaller = (options: McpOptions, env: NodeJS.ProcessEnv = process.env): Promise<Caller> =>
  Effect.runPromise(resolveCaller(mcpIdentity(options, env), env))

/**
 * The caller, or why none can act: a user named (OCX_USER, --user) that the served repository does
 * not have, which would otherwise act as nobody and find nothing, without a word.
 */
const mcpCallerOrProblem = (options: McpOptions, env: NodeJS.ProcessEnv = process.env): Promise<CallerOrProblem> =>
  Effect.runPromise(resolveCallerOrProblem(mcpIdentity(options, env), env, { strict: false, unknownUser: true }))

type CallerOrProblem = { readonly caller: Caller; readonly problem?: string }

const result = (answer: Answer<unknown>) => ({
  content: [{ type: "text" as const, text: JSON.stringify(answer) }],
  structuredContent: answer as unknown as Record<string, unknown>,
  isError: answer.stopped.reason === "refused" || answer.stopped.reason === "failed"
})

/**
 * An MCP server offering the tools MCP offers, acting as the caller; connect it to any transport.
 * A caller given as a function is asked at each call, so capabilities changed in the repository
 * take effect without restarting the server.
 */
export const makeMcpServer = (tools: ReadonlyArray<Tool>, caller: Caller | (() => Promise<Caller | CallerOrProblem>), repository?: string): Server => {
  const server = new Server({ name: "ocx2", version: "0.1.0" }, { capabilities: { tools: {} } })
  const mine = offeredBy("mcp", tools)
  const offered = mine.map((tool) => ({
    name: `${MCP_PREFIX}${tool.name}`,
    title: tool.summary,
    description: `${tool.summary}. ${tool.description}`,
    inputSchema: inputJsonSchema(tool),
    outputSchema: answerJsonSchema(tool),
    annotations: annotationsOf(tool)
  }))

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: offered }))

  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const requested = request.params.name
    const prefix = [MCP_PREFIX, OLD_MCP_PREFIX].find((p) => requested.startsWith(p))
    const name = prefix !== undefined ? requested.slice(prefix.length) : requested
    const tool = prefix !== undefined ? tools.find((t) => t.name === name) : undefined
    if (tool === undefined) {
      return result({
        tool: name,
        operations: [],
        stopped: {
          reason: "refused",
          message: `no tool named "${requested}"; the tools are ${mine.map((t) => `${MCP_PREFIX}${t.name}`).join(", ")}`
        }
      })
    }
    if (!mine.includes(tool)) {
      return result({ tool: tool.name, operations: [], stopped: { reason: "refused", message: notOfferedMessage("mcp", tool) } })
    }
    const decoded = fromObject(request.params.arguments)
    if (decoded._tag === "Problem") {
      return result({ tool: tool.name, operations: [], stopped: { reason: "refused", message: `bad argument: ${decoded.message}` } })
    }
    const found = typeof caller === "function" ? await caller() : caller
    const who = "caller" in found ? found : { caller: found }
    if (who.problem !== undefined) return result({ tool: tool.name, operations: [], stopped: { reason: "refused", message: who.problem } })
    return result(await Effect.runPromise(runTool(tool, decoded.raw, { caller: who.caller, dryRun: decoded.dryRun, repository, entryPoint: "mcp" })))
  })
  return server
}

/** `ocx2-mcp` and `ocx2 --mcp`: serve MCP on stdin/stdout until the client closes it. */
export const runMcpServer = async (options: McpOptions = {}): Promise<void> => {
  // A tool that logs (console, or Effect's Console, which uses it) must not corrupt the protocol.
  for (const method of ["log", "info", "debug", "warn", "trace", "dir", "table"] as const) {
    console[method] = (...args: Array<unknown>) => console.error(...args)
  }
  const { repository } = mcpIdentity(options)
  const caller = options.caller ?? (() => mcpCallerOrProblem(options))
  const server = makeMcpServer(options.tools ?? registryTools, caller, repository)
  const transport = new StdioServerTransport()
  const closed = new Promise<void>((done) => {
    server.onclose = () => done()
    process.stdin.once("end", () => done())
  })
  await server.connect(transport)
  await closed
  await server.close()
}
