/**
 * The tools' world: a served repository with the node world's users and a check-in on trunk,
 * served by a real `fossil server` whose extension root runs the bundled CGI; the CLI and
 * ocx2-mcp bundled beside it; and one runner per entry point, each giving runTool's answer.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import BetterSqlite3 from "better-sqlite3"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { answerFor } from "../../src/adapters/Redact.js"
import type { Answer as ToolAnswer, Caller } from "../../src/tools/Tool.js"
import * as Read from "../../src/fossil/Read.js"
import { builtProgram } from "../adapters/extServer.js"
import { fossil, type TestUser } from "../support/fossilServer.js"
import { cgiExtroot, makeWorld, users } from "../support/world.js"

export { users }

export interface Answer {
  readonly tool: string
  readonly operations: ReadonlyArray<{ readonly op: string; readonly detail: string; readonly done: boolean }>
  readonly output?: any
  readonly stopped: { readonly reason: string; readonly message?: string }
}

export type EntryPoint = "cli" | "cgi" | "mcp"
export const entryPoints: ReadonlyArray<EntryPoint> = ["cli", "cgi", "mcp"]

export interface ToolsWorld {
  readonly dir: string
  readonly repository: string
  readonly base: string
  readonly trunk: string
  readonly serverCode: string
  readonly build: string
  /** runs a tool as `login` through an entry point: input as a JSON object, as MCP and the CGI take it */
  readonly call: (via: EntryPoint, login: string, tool: string, input: Record<string, unknown>, options?: { readonly dryRun?: boolean; readonly repository?: string }) => Promise<Answer>
  /** a count that changes with anything the repository receives */
  readonly state: () => string
  readonly cookie: (login: string) => Promise<string>
  readonly fullcap: (login: string) => string
  readonly stopServer: () => Promise<void>
  readonly close: () => Promise<void>
}

/** a user who may read the wiki and nothing else: no Read (o), no Check-In (i), yet able to sign in */
export const wanda: TestUser = { login: "wanda", capabilities: "j", password: "wanda-pw" }
const allUsers: ReadonlyArray<TestUser> = [...Object.values(users), wanda]

/** CLI arguments of a JSON input, as a person types them: positionals first, then options. */
export type CliShape = (input: Record<string, unknown>) => ReadonlyArray<string>

export const cliShapes: Record<string, CliShape> = {
  create: (i) => options(i),
  stop: (i) => [String(i.run), ...options(i, ["run"])],
  post: (i) => [String(i.to), String(i.text), ...options(i, ["to", "text"])],
  audit: (i) => [String(i.checkin), String(i.verdict), String(i.note), String(i.against), ...options(i, ["checkin", "verdict", "note", "against"])],
  receipt: (i) => options(i)
}

function options(input: Record<string, unknown>, positional: ReadonlyArray<string> = []): Array<string> {
  const out: Array<string> = []
  for (const [name, value] of Object.entries(input)) {
    if (positional.includes(name)) continue
    const option = `--${name.replace(/_/g, "-")}`
    if (typeof value === "boolean") {
      if (value) out.push(option)
    } else if (Array.isArray(value)) out.push(option, value.join(" "))
    else if (typeof value === "object") out.push(option, JSON.stringify(value))
    else out.push(option, String(value))
  }
  return out
}

const run = (command: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> =>
  new Promise((resolve, reject) => {
    const child = ChildProcess.spawn(command, [...args], { env, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()))
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()))
    child.once("error", reject)
    child.once("close", (code) => resolve({ code, stdout, stderr }))
  })

export const makeToolsWorld = async (): Promise<ToolsWorld> => {
  // nobody without Read (o): the node user, holding nothing of its own, then reads nothing
  const world = await makeWorld({
    prefix: "ocx2-tools-",
    users: allUsers,
    nobody: "gjrz",
    checkin: { "PLAN.md": "The objective.\n" },
    // the bundled CGI (built below), served as a service manager serves it: from /, with a bare environment
    extroot: (_root, dir) => cgiExtroot(dir, Path.join(dir, "build", "ocx2-cgi.mjs"))
  })
  const { dir, repository, trunk, serverCode, server } = world
  const build = Path.join(dir, "build")
  Fs.mkdirSync(build)
  // the bundles leave better-sqlite3 external: they find it as a release finds its packages
  Fs.symlinkSync(Path.join(import.meta.dirname, "../../node_modules"), Path.join(build, "node_modules"))
  const [cli, cgi, mcp] = await Promise.all([
    builtProgram("ocx2", build),
    builtProgram("ocx2-cgi", build),
    builtProgram("ocx2-mcp", build)
  ]).catch(async (e: unknown) => {
    await world.close()
    throw e
  })
  if (cgi !== Path.join(build, "ocx2-cgi.mjs")) throw new Error(`the CGI was built as ${cgi}`)
  const base = server.url
  let serverUp = true
  const stopServer = async () => {
    if (!serverUp) return
    serverUp = false
    await server.stop()
  }

  const cookies = new Map<string, string>()
  const cookie = async (login: string) => {
    const known = cookies.get(login)
    if (known !== undefined) return known
    const user = allUsers.find((u) => u.login === login)!
    const response = await fetch(`${base}login`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", referer: `${base}login` },
      body: new URLSearchParams({ u: user.login, p: user.password, in: "Login" }).toString()
    })
    await response.arrayBuffer()
    const found = response.headers.getSetCookie().map((c) => c.split(";")[0]!).find((c) => c.startsWith("fossil-"))
    if (found === undefined) throw new Error(`login of ${login} failed`)
    cookies.set(login, found)
    return found
  }

  const fullcap = (login: string): string => {
    const db = new BetterSqlite3(repository, { readonly: true })
    try {
      return Read.user(db, login)?.fullcap ?? ""
    } finally {
      db.close()
    }
  }

  const mcpClients = new Map<string, Client>()
  const mcpClient = async (login: string, repo: string) => {
    const key = `${login} ${repo}`
    const known = mcpClients.get(key)
    if (known !== undefined) return known
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [mcp],
      // the capabilities are read from OCX_REPOSITORY, as the MCP server reads them for any program
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", USER: "root", OCX_USER: login, OCX_REPOSITORY: repo },
      stderr: "ignore"
    })
    const client = new Client({ name: "ocx2-tools-test", version: "0.0.0" })
    await client.connect(transport)
    mcpClients.set(key, client)
    return client
  }

  const call: ToolsWorld["call"] = async (via, login, tool, input, opts = {}) => {
    const repo = opts.repository ?? repository
    const dryRun = opts.dryRun === true
    if (via === "cli") {
      const args = [cli, "--json", "--repository", repo, "--user", login, tool, ...cliShapes[tool]!(input), ...(dryRun ? ["--dry-run"] : [])]
      const r = await run(process.execPath, args, { ...process.env, USER: "root" })
      try {
        return JSON.parse(r.stdout) as Answer
      } catch {
        throw new Error(`ocx2 ${args.slice(1).join(" ")} printed no answer (exit ${r.code}): ${r.stdout}${r.stderr}`)
      }
    }
    if (via === "cgi") {
      if (opts.repository !== undefined) throw new Error("the CGI acts on the served repository only")
      const page = `${base}ext/ocx2-cgi/${tool}`
      const response = await fetch(page, {
        method: "POST",
        headers: { "content-type": "application/json", cookie: await cookie(login), referer: page },
        body: JSON.stringify({ ...input, ...(dryRun ? { dry_run: true } : {}) })
      })
      const text = await response.text()
      try {
        return JSON.parse(text) as Answer
      } catch {
        throw new Error(`${page} answered ${response.status}: ${text.slice(0, 500)}`)
      }
    }
    const client = await mcpClient(login, repo)
    const result: any = await client.callTool({ name: `ocx_${tool}`, arguments: { ...input, ...(dryRun ? { dry_run: true } : {}) } })
    return JSON.parse(result.content[0].text) as Answer
  }

  const state = () => {
    const db = new BetterSqlite3(repository, { readonly: true })
    try {
      const r = db.prepare<[], { blobs: number; rcvid: number }>("SELECT (SELECT count(*) FROM blob) AS blobs, (SELECT coalesce(max(rcvid), 0) FROM rcvfrom) AS rcvid").get()!
      return `${r.blobs} blobs, receipt ${r.rcvid}`
    } finally {
      db.close()
    }
  }

  return {
    dir, repository, base, trunk, serverCode, build, call, state, cookie, fullcap, stopServer,
    close: async () => {
      for (const client of mcpClients.values()) await client.close().catch(() => undefined)
      await stopServer()
      await world.close()
    }
  }
}

/** Hashes and dates differ between calls; the rest of an answer must not. */
/** a caller who may not see server paths: the web pages show them redacted to such callers alone */
const noSetup: Caller = { user: undefined, capabilities: "", sandboxed: false }

/** An answer as every entry point may give it: hashes aside, and server paths as the web redacts them (answerFor). */
export const normalized = (answer: Answer): unknown =>
  JSON.parse(JSON.stringify(answerFor(answer as unknown as ToolAnswer<unknown>, noSetup)).replace(/\b[0-9a-f]{64}\b/g, "HASH").replace(/\b[0-9a-f]{40}\b/g, "HASH40"))

/**
 * Runs one case through every entry point: the same answer from each (hashes aside), and, when
 * the case writes nothing, a repository unchanged by it. `input` may differ per entry point
 * (a write needs a target of its own).
 */
export const throughEveryEntryPoint = async (
  world: ToolsWorld,
  c: {
    readonly login: string
    readonly tool: string
    readonly input: Record<string, unknown> | ((via: EntryPoint) => Promise<Record<string, unknown>> | Record<string, unknown>)
    readonly dryRun?: boolean
    readonly writes?: boolean
    readonly via?: ReadonlyArray<EntryPoint>
  }
): Promise<ReadonlyArray<Answer>> => {
  const answers: Array<Answer> = []
  for (const via of c.via ?? entryPoints) {
    const input = typeof c.input === "function" ? await c.input(via) : c.input
    const before = world.state()
    const answer = await world.call(via, c.login, c.tool, input, { dryRun: c.dryRun ?? false })
    if (c.writes !== true) {
      if (world.state() !== before) throw new Error(`${via} ${c.tool} changed the repository: ${JSON.stringify(answer)}`)
    }
    answers.push(answer)
  }
  const first = JSON.stringify(normalized(answers[0]!))
  answers.forEach((answer, i) => {
    if (JSON.stringify(normalized(answer)) !== first) {
      throw new Error(`the answers differ:\n${(c.via ?? entryPoints)[0]}: ${first}\n${(c.via ?? entryPoints)[i]}: ${JSON.stringify(normalized(answer))}`)
    }
  })
  return answers
}
