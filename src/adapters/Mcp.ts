import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import * as Effect from "effect/Effect"
import { tools as registryTools } from "../tools/registry.js"
import { runTool } from "../tools/runTool.js"
import type { Answer, Caller, Tool } from "../tools/Tool.js"
import { fromObject } from "./input.js"
import { answerJsonSchema, inputJsonSchema } from "./jsonSchema.js"

// The MCP adapter: every tool offered as ocx.TOOL (seed 001's names; the SDK takes dots in tool
// names), its arguments the tool's input plus dry_run, its result the answer of runTool as JSON
// text and as structuredContent, isError when the tool refused or failed. It decides nothing.
// The stdio transport owns stdout: nothing here prints.

export const MCP_PREFIX = "ocx."

export interface McpOptions {
  /** The tools offered; the registry's when not given (tests add a tool of their own). */
  readonly tools?: ReadonlyArray<Tool>
  /** Who is calling; when not given, read from the environment by `callerFromEnv`. */
  readonly caller?: Caller
  /** The repository file the calls act on, when one is named. */
  readonly repository?: string | undefined
}

/**
 * The caller of an MCP server started by a program: OCX_USER (else USER) with OCX_CAPABILITIES,
 * sandboxed when OCX_SANDBOX=1, as the CLI reads it. (Capabilities are to come from the
 * repository itself later.)
 */
export const callerFromEnv = (env: NodeJS.ProcessEnv = process.env): Caller => ({
  user: env.OCX_USER !== undefined && env.OCX_USER !== "" ? env.OCX_USER : env.USER,
  capabilities: env.OCX_CAPABILITIES ?? "",
  sandboxed: env.OCX_SANDBOX === "1"
})

const result = (answer: Answer<unknown>) => ({
  content: [{ type: "text" as const, text: JSON.stringify(answer) }],
  structuredContent: answer as unknown as Record<string, unknown>,
  isError: answer.stopped.reason === "refused" || answer.stopped.reason === "failed"
})

/** An MCP server offering the tools, acting as the caller; connect it to any transport. */
export const makeMcpServer = (tools: ReadonlyArray<Tool>, caller: Caller, repository?: string): Server => {
  const server = new Server({ name: "ocx2", version: "0.1.0" }, { capabilities: { tools: {} } })
  const offered = tools.map((tool) => ({
    name: `${MCP_PREFIX}${tool.name}`,
    title: tool.summary,
    description: `${tool.summary}. ${tool.description}`,
    inputSchema: inputJsonSchema(tool),
    outputSchema: answerJsonSchema(tool)
  }))

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: offered }))

  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const requested = request.params.name
    const name = requested.startsWith(MCP_PREFIX) ? requested.slice(MCP_PREFIX.length) : requested
    const tool = tools.find((t) => `${MCP_PREFIX}${t.name}` === requested)
    if (tool === undefined) {
      return result({
        tool: name,
        operations: [],
        stopped: {
          reason: "refused",
          message: `no tool named "${requested}"; the tools are ${tools.map((t) => `${MCP_PREFIX}${t.name}`).join(", ")}`
        }
      })
    }
    const decoded = fromObject(request.params.arguments)
    if (decoded._tag === "Problem") {
      return result({ tool: tool.name, operations: [], stopped: { reason: "refused", message: `bad argument: ${decoded.message}` } })
    }
    return result(await Effect.runPromise(runTool(tool, decoded.raw, { caller, dryRun: decoded.dryRun, repository })))
  })
  return server
}

/** `ocx2-mcp` and `ocx2 --mcp`: serve MCP on stdin/stdout until the client closes it. */
export const runMcpServer = async (options: McpOptions = {}): Promise<void> => {
  // A tool that logs (console, or Effect's Console, which uses it) must not corrupt the protocol.
  for (const method of ["log", "info", "debug", "warn", "trace", "dir", "table"] as const) {
    console[method] = (...args: Array<unknown>) => console.error(...args)
  }
  const server = makeMcpServer(options.tools ?? registryTools, options.caller ?? callerFromEnv(), options.repository)
  const transport = new StdioServerTransport()
  const closed = new Promise<void>((done) => {
    server.onclose = () => done()
    process.stdin.once("end", () => done())
  })
  await server.connect(transport)
  await closed
  await server.close()
}
