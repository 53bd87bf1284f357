import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv"
import * as Effect from "effect/Effect"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { tools } from "../../src/tools/registry.js"
import { runTool } from "../../src/tools/runTool.js"
import type { Caller, Tool } from "../../src/tools/Tool.js"
import { bundle } from "./extServer.js"
import { makeGuarded } from "./fixtures/guarded.js"

// MCP as a program meets it: the bundled server over stdio, driven by the SDK's own client.

let build: string
let real: string
let withGuarded: string
let marks: string
const clients: Array<Client> = []
const stderrOf = new Map<Client, () => string>()
const protocolErrors: Array<Error> = []

beforeAll(async () => {
  build = mkdtempSync(join(tmpdir(), "ocx2-mcp-build-"))
  marks = join(build, "marks.log")
  real = await bundle(join(import.meta.dirname, "../../bin/ocx2-mcp.ts"), build, "ocx2-mcp")
  withGuarded = await bundle(join(import.meta.dirname, "fixtures/ocx2-mcp-test.ts"), build, "ocx2-mcp-test")
}, 60_000)

afterAll(async () => {
  for (const client of clients) await client.close()
  rmSync(build, { recursive: true, force: true })
})

const connect = async (program: string, user: string, capabilities: string): Promise<Client> => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [program],
    env: { OCX_USER: user, OCX_CAPABILITIES: capabilities },
    stderr: "pipe"
  })
  let stderr = ""
  transport.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
  const client = new Client({ name: "ocx2-test", version: "0.0.0" })
  client.onerror = (error) => protocolErrors.push(error)
  await client.connect(transport)
  stderrOf.set(client, () => stderr)
  clients.push(client)
  return client
}

const expected = (tool: Tool, raw: unknown, caller: Caller, dryRun = false) =>
  Effect.runPromise(runTool(tool, raw, { caller, dryRun, repository: undefined }))
const echo = tools.find((t) => t.name === "echo")!
const textOf = (result: any) => JSON.parse(result.content[0].text)

describe("ocx2-mcp", () => {
  it("offers every tool as ocx.TOOL with a JSON Schema of its input plus dry_run", async () => {
    const started = Date.now()
    const client = await connect(real, "alice", "")
    const { tools: offered } = await client.listTools()
    const ready = Date.now() - started
    expect(offered.map((t) => t.name)).toEqual(tools.map((t) => `ocx.${t.name}`))
    const validator = new AjvJsonSchemaValidator()
    for (const tool of offered) {
      expect(tool.inputSchema.type).toBe("object")
      expect(tool.inputSchema.properties?.dry_run).toEqual({ type: "boolean", description: "say what would be done, and do nothing" })
      expect(tool.outputSchema?.type).toBe("object")
      // dry_run is taken wherever the tool's own input is, and only as a boolean
      const validate = validator.getValidator(tool.inputSchema as any)
      expect(validate({ dry_run: true }).valid).toBe(validate({}).valid)
      expect(validate({ dry_run: "yes" }).valid).toBe(false)
    }
    const echoSchema = validator.getValidator(offered.find((t) => t.name === "ocx.echo")!.inputSchema as any)
    expect(echoSchema({ word: "x", flag: true, dry_run: true }).valid).toBe(true)
    expect(echoSchema({ word: 1 }).valid).toBe(false)
    expect(echoSchema({ word: "x", other: 1 }).valid).toBe(false)
    console.log(`ocx2-mcp: started and listed its tools in ${ready} ms`)
  })

  it("a call answers runTool's answer, as JSON text and as structuredContent", async () => {
    const client = await connect(real, "alice", "")
    const result = await client.callTool({ name: "ocx.echo", arguments: { word: "hello", option: "x", flag: true } })
    const answer = await expected(echo, { word: "hello", option: "x", flag: true }, { user: "alice", capabilities: "", sandboxed: false })
    expect(result.isError).toBe(false)
    expect(result.structuredContent).toEqual(answer)
    expect(textOf(result)).toEqual(answer)
  })

  it("dry_run is an argument of every tool", async () => {
    const client = await connect(real, "alice", "")
    const result = await client.callTool({ name: "ocx.echo", arguments: { word: "hello", dry_run: true } })
    expect(result.structuredContent).toEqual(await expected(echo, { word: "hello" }, { user: "alice", capabilities: "", sandboxed: false }, true))
    const bad = await client.callTool({ name: "ocx.echo", arguments: { word: "hello", dry_run: "yes" } })
    expect(bad.isError).toBe(true)
    expect((bad.structuredContent as any).stopped).toEqual({ reason: "refused", message: `bad argument: dry_run: expected a boolean, not "yes"` })
  })

  it("a bad argument and an unknown tool are refused, isError, in runTool's words", async () => {
    const client = await connect(real, "alice", "")
    const bad = await client.callTool({ name: "ocx.echo", arguments: { word: 3 } })
    expect(bad.isError).toBe(true)
    expect(bad.structuredContent).toEqual(await expected(echo, { word: 3 }, { user: "alice", capabilities: "", sandboxed: false }))
    const unknown = await client.callTool({ name: "ocx.frobnicate", arguments: {} })
    expect(unknown.isError).toBe(true)
    expect(textOf(unknown).stopped.message).toBe(`no tool named "ocx.frobnicate"; the tools are ${tools.map((t) => `ocx.${t.name}`).join(", ")}`)
  })
})

describe("an MCP server acting as its user, within its capabilities", () => {
  it("refuses a tool its user may not use, and nothing is done", async () => {
    const client = await connect(withGuarded, "bob", "hio")
    const result = await client.callTool({ name: "ocx.guarded", arguments: { word: "bob" } })
    expect(result.isError).toBe(true)
    expect(result.structuredContent).toEqual(await expected(makeGuarded(marks), { word: "bob" }, { user: "bob", capabilities: "hio", sandboxed: false }))
    expect(textOf(result).stopped).toEqual({ reason: "refused", message: "guarded is for a user with Setup (s)" })
    expect(existsSync(marks)).toBe(false)
  })

  it("lets a user with Setup use it: a dry run says what it would do, a call does it", async () => {
    const client = await connect(withGuarded, "alice", "s")
    const dry = await client.callTool({ name: "ocx.guarded", arguments: { word: "first", dry_run: true } })
    expect(dry.structuredContent).toEqual(await expected(makeGuarded(marks), { word: "first" }, { user: "alice", capabilities: "s", sandboxed: false }, true))
    expect(existsSync(marks)).toBe(false)
    const done = await client.callTool({ name: "ocx.guarded", arguments: { word: "first", times: 2, extra: { a: 1 } } })
    expect(done.isError).toBe(false)
    expect(done.structuredContent).toEqual({
      tool: "guarded",
      operations: [{ op: "mark", detail: `first in ${marks}`, done: true }],
      output: { marked: "first" },
      stopped: { reason: "completed" }
    })
    expect(readFileSync(marks, "utf8")).toBe("first\n")
    // what the tool logged went to stderr, and stdout carried only the protocol
    await new Promise((r) => setTimeout(r, 50))
    expect(stderrOf.get(client)!()).toContain("guarded called with first")
    expect(protocolErrors).toEqual([])
  })
})
