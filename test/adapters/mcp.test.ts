import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv"
import * as Effect from "effect/Effect"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Read from "../../src/fossil/Read.js"
import { openDatabase } from "../../src/fossil/Sqlite.js"
import { tools } from "../../src/tools/Registry.js"
import { runTool } from "../../src/tools/RunTool.js"
import { type Caller, notOfferedMessage, offeredBy, type Tool } from "../../src/tools/Tool.js"
import { cloneAs, fossil, type TestUser } from "../support/fossilServer.js"
import { makeWorld, type World } from "../support/world.js"
import { builtProgram, bundle } from "./extServer.js"
import { makeGuarded } from "./fixtures/guarded.js"

// MCP as a program meets it: the bundled server (ocx2-mcp, and ocx2 --mcp) over stdio, driven by
// the SDK's own client, acting as its user within the capabilities the repository gives that user.

const users = {
  alice: { login: "alice", capabilities: "s", password: "alice-pw" },
  lab: { login: "lab", capabilities: "", password: "lab-pw" },
  builder: { login: "builder", capabilities: "oi", password: "builder-pw" },
  carol: { login: "carol", capabilities: "oi", password: "carol-pw" }
} satisfies Record<string, TestUser>

let world: World | undefined
let dir: string
let repository: string
let clone: string
let serverCode: string
let real: string
let withGuarded: string
let ocx2: string
let marks: string
const clients: Array<Client> = []
const stderrOf = new Map<Client, () => string>()
const protocolErrors: Array<Error> = []

let cacheHomeBefore: string | undefined
beforeAll(async () => {
  world = await makeWorld({ prefix: "ocx2-mcp-", users: Object.values(users), checkin: {} })
  ;({ dir, repository, serverCode } = world)
  // the runs list's cache of what it read, in this test's own directory
  cacheHomeBefore = process.env.XDG_CACHE_HOME
  process.env.XDG_CACHE_HOME = join(dir, "cache")
  const build = join(dir, "build")
  marks = join(build, "marks.log")
  // the programs as the build ships them (dist, with their code caches); the test's own server bundled here
  const bundled = Promise.all([
    builtProgram("ocx2-mcp", build),
    bundle(join(import.meta.dirname, "fixtures/ocx2-mcp-test.ts"), build, "ocx2-mcp-test"),
    builtProgram("ocx2", build),
    // ocx2 --mcp loads the MCP server's bundle beside it
    builtProgram("ocx2-mcp-server", build)
  ])
  // a real clone, which remembers builder as the user it syncs as
  const server = world.server
  try {
    clone = await cloneAs(server.url, "builder", users.builder.password, join(dir, "builder.fossil"))
  } finally {
    await server.stop()
  }
  ;[real, withGuarded, ocx2] = await bundled
}, 90_000)

afterAll(async () => {
  // a worker runs other files after this one (vitest.config.ts: isolate false)
  if (cacheHomeBefore === undefined) delete process.env.XDG_CACHE_HOME
  else process.env.XDG_CACHE_HOME = cacheHomeBefore
  for (const client of clients) await client.close()
  await world?.close()
})

const connect = async (program: string, env: Record<string, string>, args: ReadonlyArray<string> = []): Promise<Client> => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [program, ...args],
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", USER: "root", ...env },
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

/** ocx2-mcp acting as `login` on the served repository. */
const as = (login: string, program = real) => connect(program, { OCX_USER: login, OCX_REPOSITORY: repository })

const fullcap = (file: string, login: string): string => {
  const db = openDatabase(file, { readonly: true, fileMustExist: true })
  try {
    return Read.user(db, login)?.fullcap ?? ""
  } finally {
    db.close()
  }
}
/** anything the repository receives changes this */
const state = () => {
  const db = openDatabase(repository, { readonly: true, fileMustExist: true })
  try {
    return JSON.stringify(db.prepare("SELECT (SELECT count(*) FROM blob) AS blobs, (SELECT coalesce(max(rcvid), 0) FROM rcvfrom) AS rcvid").get())
  } finally {
    db.close()
  }
}

const callerOf = (login: string): Caller => ({ user: login, capabilities: fullcap(repository, login), sandboxed: false })
const expected = (tool: Tool, raw: unknown, caller: Caller, dryRun = false, repo: string | undefined = repository) =>
  runTool(tool, raw, { caller, dryRun, repository: repo, entryPoint: "mcp" })
const named = (name: string) => tools.find((t) => t.name === name)!
const textOf = (result: any) => JSON.parse(result.content[0].text)
const mcpNames = offeredBy("mcp", tools).map((t) => `ocx_${t.name}`)

/** a complete run, as a node would take it (test/support/nodeWorld.ts shellRun's shape) */
const runFields = () => ({
  workspace: [{ step: "directory", at: "$$root$$/work/$$run$$" }],
  limits: { wall: "1m" },
  process: { command: ["sh", "-c", "echo hello"], env: { PATH: "/usr/bin:/bin" } }
})

describe("ocx2-mcp", () => {
  it("offers every tool MCP offers as ocx_TOOL, with JSON Schemas a validator compiles; not hook or unhook", async () => {
    const started = Date.now()
    const client = await as("alice")
    const { tools: offered } = await client.listTools()
    const ready = Date.now() - started
    expect(offered.map((t) => t.name)).toEqual(mcpNames)
    expect(mcpNames).toContain("ocx_stage")
    expect(mcpNames).toContain("ocx_post")
    expect(mcpNames).not.toContain("ocx_hook")
    expect(mcpNames).not.toContain("ocx_unhook")
    expect(mcpNames).not.toContain("ocx_node")
    const validator = new AjvJsonSchemaValidator()
    for (const tool of offered) {
      expect(tool.inputSchema.type).toBe("object")
      expect(tool.inputSchema.properties?.dry_run).toEqual({ type: "boolean", description: "say what would be done, and do nothing" })
      expect(tool.outputSchema?.type).toBe("object")
      // dry_run is taken wherever the tool's own input is, and only as a boolean
      const validate = validator.getValidator(tool.inputSchema as any)
      expect(validate({ dry_run: true }).valid).toBe(validate({}).valid)
      expect(validate({ dry_run: "yes" }).valid).toBe(false)
      // the answer's schema compiles too, and takes a refusal
      const answer = validator.getValidator(tool.outputSchema as any)
      expect(answer({ tool: tool.name.slice(4), operations: [], stopped: { reason: "refused", message: "x" } }).valid).toBe(true)
      expect(answer({ tool: tool.name.slice(4), operations: [], stopped: { reason: "maybe" } }).valid).toBe(false)
    }
    const echoSchema = validator.getValidator(offered.find((t) => t.name === "ocx_echo")!.inputSchema as any)
    expect(echoSchema({ word: "x", flag: true, dry_run: true }).valid).toBe(true)
    expect(echoSchema({ word: 1 }).valid).toBe(false)
    expect(echoSchema({ word: "x", other: 1 }).valid).toBe(false)
    const createSchema = validator.getValidator(offered.find((t) => t.name === "ocx_create")!.inputSchema as any)
    expect(createSchema({ title: "t", node: "lab", fields: runFields(), dry_run: true }).valid).toBe(true)
    expect(createSchema({ title: "t", fields: "not an object" }).valid).toBe(false)
    console.log(`ocx2-mcp: started and listed its tools in ${ready} ms`)
  })

  it.live("marks the tools that only read as read-only, and no other; no description names a section of the protocol", () =>
    Effect.gen(function*() {
      const client = yield* Effect.promise(() => as("alice"))
      const { tools: offered } = yield* Effect.promise(() => client.listTools())
      const readOnly = offered.filter((t) => t.annotations?.readOnlyHint === true).map((t) => t.name)
      expect(readOnly).toEqual(offeredBy("mcp", tools).filter((t) => t.readOnly === true).map((t) => `ocx_${t.name}`))
      expect(readOnly).toEqual(expect.arrayContaining(["ocx_runs"]))
      expect(readOnly).not.toContain("ocx_create")
      for (const tool of offered) expect(tool.description, tool.name).not.toMatch(/\b2\.\d{1,2}\b|section \d/)
      const listed = yield* Effect.promise(() => client.callTool({ name: "ocx_runs", arguments: {} }))
      expect(listed.isError).toBe(false)
      expect(listed.structuredContent).toEqual(yield* expected(named("runs"), {}, callerOf("alice")))
    }))

  it.live("names every tool as function-calling clients take it, marks stop, accept and rollback destructive, and still takes the old names (issue 40)", () =>
    Effect.gen(function*() {
      const client = yield* Effect.promise(() => as("alice"))
      const { tools: offered } = yield* Effect.promise(() => client.listTools())
      for (const tool of offered) expect(tool.name).toMatch(/^[a-zA-Z0-9_-]+$/)
      const destructive = offered.filter((t) => t.annotations?.destructiveHint === true).map((t) => t.name)
      expect(destructive.sort()).toEqual(["ocx_accept", "ocx_rollback", "ocx_stop"])
      // a tool that only adds to the record is not destructive, and says so (MCP's default is destructive)
      expect(offered.find((t) => t.name === "ocx_create")!.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: false })
      // the release before's ocx.TOOL: taken for a call, not listed
      expect(offered.map((t) => t.name).filter((n) => n.startsWith("ocx."))).toEqual([])
      const old = yield* Effect.promise(() => client.callTool({ name: "ocx.echo", arguments: { word: "hello" } }))
      expect(old.isError).toBe(false)
      expect(old.structuredContent).toEqual(yield* expected(named("echo"), { word: "hello" }, callerOf("alice")))
    }))

  it.live("a call answers runTool's answer, as JSON text and as structuredContent", () =>
    Effect.gen(function*() {
      const client = yield* Effect.promise(() => as("alice"))
      const result = yield* Effect.promise(() => client.callTool({ name: "ocx_echo", arguments: { word: "hello", option: "x", flag: true } }))
      const answer = yield* expected(named("echo"), { word: "hello", option: "x", flag: true }, callerOf("alice"))
      expect(result.isError).toBe(false)
      expect(result.structuredContent).toEqual(answer)
      expect(textOf(result)).toEqual(answer)
    }))

  it.live("dry_run is an argument of every tool", () =>
    Effect.gen(function*() {
      const client = yield* Effect.promise(() => as("alice"))
      const result = yield* Effect.promise(() => client.callTool({ name: "ocx_echo", arguments: { word: "hello", dry_run: true } }))
      expect(result.structuredContent).toEqual(yield* expected(named("echo"), { word: "hello" }, callerOf("alice"), true))
      const bad = yield* Effect.promise(() => client.callTool({ name: "ocx_echo", arguments: { word: "hello", dry_run: "yes" } }))
      expect(bad.isError).toBe(true)
      expect((bad.structuredContent as any).stopped).toEqual({ reason: "refused", message: `bad argument: dry_run: expected a boolean, not "yes"` })
    }))

  it.live("a bad argument and an unknown tool are refused, isError, in runTool's words", () =>
    Effect.gen(function*() {
      const client = yield* Effect.promise(() => as("alice"))
      const bad = yield* Effect.promise(() => client.callTool({ name: "ocx_echo", arguments: { word: 3 } }))
      expect(bad.isError).toBe(true)
      expect(bad.structuredContent).toEqual(yield* expected(named("echo"), { word: 3 }, callerOf("alice")))
      const unknown = yield* Effect.promise(() => client.callTool({ name: "ocx_frobnicate", arguments: {} }))
      expect(unknown.isError).toBe(true)
      expect(textOf(unknown).stopped.message).toBe(`no tool named "ocx_frobnicate"; the tools are ${mcpNames.join(", ")}`)
    }))

  it("a tool MCP does not offer is refused, naming where it is offered; list and help show only MCP's tools", async () => {
    const client = await as("alice")
    const before = state()
    for (const name of ["hook", "unhook"]) {
      const result = await client.callTool({ name: `ocx_${name}`, arguments: { dry_run: true } })
      expect(result.isError).toBe(true)
      expect(textOf(result)).toEqual({ tool: name, operations: [], stopped: { reason: "refused", message: notOfferedMessage("mcp", named(name)) } })
      expect(textOf(result).stopped.message).toBe(
        `${name} is not offered by MCP: a sandbox has no served repository; it is offered by the command line (ocx2) and the OCX web page`
      )
      const help = await client.callTool({ name: "ocx_help", arguments: { tool: name } })
      expect(textOf(help).stopped).toEqual({ reason: "refused", message: notOfferedMessage("mcp", named(name)) })
    }
    const list = await client.callTool({ name: "ocx_list", arguments: {} })
    expect(textOf(list).output.tools.map((t: { name: string }) => `ocx_${t.name}`)).toEqual(mcpNames)
    const help = await client.callTool({ name: "ocx_help", arguments: { tool: "stage" } })
    expect(textOf(help).output.name).toBe("stage")
    expect(state()).toBe(before)
  })
})

describe("create over MCP", () => {
  it.live("a dry run checks the run and says what it would write, and writes nothing", () =>
    Effect.gen(function*() {
      const client = yield* Effect.promise(() => as("alice"))
      const before = state()
      const input = { title: "from MCP", node: "lab", objective: "say hello", user: "builder", fields: runFields() }
      const result = yield* Effect.promise(() => client.callTool({ name: "ocx_create", arguments: { ...input, dry_run: true } }))
      expect(result.isError).toBe(false)
      const answer = textOf(result)
      expect(answer.stopped).toEqual({ reason: "dry_run" })
      expect(answer.operations.at(-1)).toEqual({ op: "write", detail: `a new thread "from MCP" as alice, holding a run for lab`, done: false })
      expect(answer.output.message).toEqual({
        ocx: 2, to: "lab", run: { clone: serverCode, objective: "say hello", ...runFields(), process: { ...runFields().process, user: "builder" } }
      })
      expect(answer).toEqual(yield* expected(named("create"), input, callerOf("alice"), true))
      expect(state()).toBe(before)
    }))

  it("is refused to a user without admin or setup, by the capabilities the repository gives, and nothing is written", async () => {
    const client = await as("builder")
    const before = state()
    const result = await client.callTool({ name: "ocx_create", arguments: { title: "t", node: "lab", objective: "x", user: "builder", fields: runFields() } })
    expect(result.isError).toBe(true)
    expect(textOf(result).stopped).toEqual({
      reason: "refused",
      message: "create needs Fossil's admin (a) or setup (s) capability: a node runs only what they send (or what capability-R.json allows an R sender)"
    })
    expect(state()).toBe(before)
  })
})

describe("an MCP server acts as its user, within the capabilities its repository gives that user", () => {
  it.live("takes no capability from the environment: OCX_CAPABILITIES grants nothing, with or without a repository", () =>
    Effect.gen(function*() {
      const before = state()
      const withRepository = yield* Effect.promise(() => connect(withGuarded, { OCX_USER: "builder", OCX_CAPABILITIES: "s", OCX_REPOSITORY: repository }))
      const refused = yield* Effect.promise(() => withRepository.callTool({ name: "ocx_guarded", arguments: { word: "builder" } }))
      expect(refused.isError).toBe(true)
      expect(textOf(refused)).toEqual(yield* expected(makeGuarded(marks), { word: "builder" }, callerOf("builder")))
      expect(textOf(refused).stopped).toEqual({ reason: "refused", message: "guarded is for a user with Setup (s)" })
      // without a repository the caller holds nothing, whoever it names
      const without = yield* Effect.promise(() => connect(withGuarded, { OCX_USER: "alice", OCX_CAPABILITIES: "s" }))
      const alsoRefused = yield* Effect.promise(() => without.callTool({ name: "ocx_guarded", arguments: { word: "alice" } }))
      expect(textOf(alsoRefused).stopped).toEqual({ reason: "refused", message: "guarded is for a user with Setup (s)" })
      const status = yield* Effect.promise(() => without.callTool({ name: "ocx_status", arguments: {} }))
      expect(textOf(status).output.caller).toEqual({ user: "alice", capabilities: "" })
      expect(existsSync(marks)).toBe(false)
      expect(state()).toBe(before)
    }))

  it.live("lets a user with Setup use it: a dry run says what it would do, a call does it", () =>
    Effect.gen(function*() {
      const client = yield* Effect.promise(() => as("alice", withGuarded))
      const dry = yield* Effect.promise(() => client.callTool({ name: "ocx_guarded", arguments: { word: "first", dry_run: true } }))
      expect(dry.structuredContent).toEqual(yield* expected(makeGuarded(marks), { word: "first" }, callerOf("alice"), true))
      expect(existsSync(marks)).toBe(false)
      const done = yield* Effect.promise(() => client.callTool({ name: "ocx_guarded", arguments: { word: "first", times: 2, extra: { a: 1 } } }))
      expect(done.isError).toBe(false)
      expect(done.structuredContent).toEqual({
        tool: "guarded",
        operations: [{ op: "mark", detail: `first in ${marks}`, done: true }],
        output: { marked: "first" },
        stopped: { reason: "completed" }
      })
      expect(readFileSync(marks, "utf8")).toBe("first\n")
      // what the tool logged went to stderr, and stdout carried only the protocol
      yield* Effect.sleep("50 millis")
      expect(stderrOf.get(client)!()).toContain("guarded called with first")
      expect(protocolErrors).toEqual([])
    }))

  it("reads the capabilities at each call: a change in the repository takes effect at once", async () => {
    const client = await as("carol")
    const input = { title: "t", node: "lab", objective: "x", user: "builder", fields: runFields(), dry_run: true }
    expect(textOf(await client.callTool({ name: "ocx_create", arguments: input })).stopped.reason).toBe("refused")
    await fossil(["user", "capabilities", "carol", "a", "-R", repository])
    try {
      expect(textOf(await client.callTool({ name: "ocx_create", arguments: input })).stopped.reason).toBe("dry_run")
    } finally {
      await fossil(["user", "capabilities", "carol", "oi", "-R", repository])
    }
    expect(textOf(await client.callTool({ name: "ocx_create", arguments: input })).stopped.reason).toBe("refused")
  })

  it("refuses every call as a user the repository does not have, naming it, rather than answering as nobody (issue 40)", async () => {
    const client = await connect(real, { OCX_USER: "ghost", OCX_REPOSITORY: repository })
    const result = await client.callTool({ name: "ocx_runs", arguments: {} })
    expect(result.isError).toBe(true)
    expect(textOf(result).stopped).toEqual({
      reason: "refused",
      message: `no user ghost in the repository ${repository}: the user to act as (--user, OCX_USER for MCP) is one of its Fossil users (fossil user list -R ${repository})`
    })
  })

  it("on a clone, acts as the user the clone remembers, with the capabilities the clone gives that user", async () => {
    const client = await connect(real, { OCX_REPOSITORY: clone })
    const status = textOf(await client.callTool({ name: "ocx_status", arguments: {} }))
    expect(status.output.caller).toEqual({ user: "builder", capabilities: fullcap(clone, "builder") })
    // a clone lists its cloner as setup: its sandbox, not Fossil, limits a run's program
    expect(fullcap(clone, "builder")).toContain("s")
  })
})

describe("ocx2 --mcp", () => {
  it.live("serves the same tools as ocx2-mcp, as --user within the capabilities --repository gives", () =>
    Effect.gen(function*() {
      const client = yield* Effect.promise(() => connect(ocx2, {}, ["--repository", repository, "--user", "builder", "--mcp"]))
      const { tools: offered } = yield* Effect.promise(() => client.listTools())
      expect(offered.map((t) => t.name)).toEqual(mcpNames)
      const echo = yield* Effect.promise(() => client.callTool({ name: "ocx_echo", arguments: { word: "hi" } }))
      expect(echo.structuredContent).toEqual(yield* expected(named("echo"), { word: "hi" }, callerOf("builder")))
      const status = textOf(yield* Effect.promise(() => client.callTool({ name: "ocx_status", arguments: {} })))
      expect(status.output.caller).toEqual({ user: "builder", capabilities: fullcap(repository, "builder") })
      const before = state()
      const create = yield* Effect.promise(() => client.callTool({ name: "ocx_create", arguments: { title: "t", node: "lab", objective: "x", user: "builder", fields: runFields() } }))
      expect(textOf(create).stopped.message).toMatch(/^create needs Fossil's admin \(a\) or setup \(s\) capability/)
      expect(state()).toBe(before)
      const hook = yield* Effect.promise(() => client.callTool({ name: "ocx_hook", arguments: {} }))
      expect(textOf(hook).stopped.message).toBe(notOfferedMessage("mcp", named("hook")))
    }))
})
