import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { tools } from "../../../src/tools/Registry.js"
import { offeredBy } from "../../../src/tools/Tool.js"
import { makeWorld, users, type World } from "../../support/world.js"

// The bundled program (npm test builds dist/ first), as a person or a script runs it: its
// standard output a pipe, once with NO_COLOR=1. Issue 11: ocx2's own options after the tool's
// name (defect 3); help, errors and exit statuses (defect 6).

const program = Path.join(import.meta.dirname, "../../../dist/ocx2.mjs")
const cliTools = offeredBy("cli", tools)

interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const ocx2 = (args: ReadonlyArray<string>, options: { readonly env?: NodeJS.ProcessEnv; readonly input?: string } = {}): Promise<Ran> =>
  new Promise((resolve, reject) => {
    const env: NodeJS.ProcessEnv = { ...process.env, USER: "root", ...options.env }
    if (options.env?.["NO_COLOR"] === undefined) delete env["NO_COLOR"]
    const child = ChildProcess.spawn("node", [program, ...args], { env, stdio: ["pipe", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += String(d)))
    child.stderr.on("data", (d) => (stderr += String(d)))
    child.once("error", reject)
    child.once("close", (code) => resolve({ code, stdout, stderr }))
    child.stdin.end(options.input ?? "")
  })

const noColour = { NO_COLOR: "1" }

let world: World | undefined
let dir: string
let repository: string
let missing: string
beforeAll(async () => {
  // alice (setup), lab (the node) and builder (o, i): the program acts on the repository file, so its backoffice stays off
  world = await makeWorld({ prefix: "ocx2-cli-program-", users: [users.admin, users.node, users.builder], checkin: {}, backoffice: false })
  ;({ dir, repository } = world)
  missing = Path.join(dir, "nonexistent.fossil")
}, 90_000)
afterAll(() => world?.close())

describe("ocx2's own options go before the tool's name, and are still taken after it (defect 3)", () => {
  it("ocx2 node --repository CLONE SERVER-URL FILE --check is the node's call, not an unknown argument", async () => {
    const passwords = Path.join(dir, "no-passwords.json")
    const called = await ocx2(["node", "--repository", repository, "https://server.example/repo", passwords, "--check"])
    expect(called.stderr).not.toMatch(/unknown argument/i)
    expect(called.stderr).toContain(`node: refused: the passwords file ${passwords} does not exist`)
    expect(called.code).toBe(1)
    const json = await ocx2(["node", "--repository", repository, "https://server.example/repo", passwords, "--check", "--json"])
    expect(JSON.parse(json.stdout)).toMatchObject({ tool: "node", stopped: { reason: "refused" } })
  })

  it("ocx2 status --json and ocx2 create --json ... answer in JSON", async () => {
    const status = await ocx2(["status", "--json", `--repository=${repository}`, "--user", "alice"])
    expect(status.code).toBe(0)
    expect(JSON.parse(status.stdout)).toMatchObject({ tool: "status", output: { caller: { user: "alice", capabilities: expect.stringContaining("s") } } })
    const create = await ocx2([
      "--user", "alice", "create", "--json", "--repository", repository, "--title", "a run", "--node", "lab",
      "--objective", "o", "--fields", '{"process": {"user": "builder", "command": ["true"]}}', "--dry-run"
    ])
    expect(create.stderr).toBe("")
    expect(create.code).toBe(0)
    const answer = JSON.parse(create.stdout)
    expect(answer.stopped).toEqual({ reason: "dry_run" })
    expect(answer.operations.at(-1).detail).toContain("as alice")
  })

  it("after the tool's name, the tool's own option wins: create's --user is the run's process user", async () => {
    const create = await ocx2([
      "--repository", repository, "--user", "alice", "create", "--user", "builder", "--title", "a run", "--node", "lab",
      "--objective", "o", "--fields", '{"process": {"command": ["true"]}}', "--dry-run", "--json"
    ])
    const answer = JSON.parse(create.stdout)
    expect(answer.output.message.run.process).toEqual({ user: "builder", command: ["true"] })
    expect(answer.operations.at(-1).detail).toContain("as alice")
  })
})

describe("help (defect 6)", () => {
  const readable = (ran: Ran) => {
    expect(ran.code).toBe(0)
    expect(ran.stderr).toBe("")
    expect(ran.stdout).not.toMatch(/\x1b\[/)
    expect(ran.stdout).not.toContain("A user-defined piece of text")
    for (const line of ran.stdout.split("\n")) expect(line.length, line).toBeLessThanOrEqual(100)
  }

  it("ocx2 --help, ocx2 help TOOL and ocx2 TOOL --help are plain text within 100 columns, through a pipe and with NO_COLOR", async () => {
    const calls = [["--help"], ["help", "create"], ["create", "--help"], ["-h"], ["node", "--help"], ["help"], ["list"]]
    const ran = await Promise.all([...calls.map((c) => ocx2(c)), ...calls.map((c) => ocx2(c, { env: noColour }))])
    for (const r of ran) readable(r)
    const [rootHelp, helpCreate, createHelp] = ran
    expect(helpCreate!.stdout).toBe(createHelp!.stdout)
    expect(createHelp!.stdout).toMatch(/--title TITLE +write the run as the first post of a new thread with this title/)
    expect(createHelp!.stdout).toMatch(/--objective OBJECTIVE +the run's objective/)
    expect(rootHelp!.stdout).toMatch(/--repository FILE +the repository file to act on/)
  }, 90_000)

  it("ocx2 --help documents the exit status", async () => {
    const { stdout } = await ocx2(["--help"])
    expect(stdout).toMatch(/^Exit status:\n {2}0 +done \(a dry run too\)\n {2}1 +refused or failed .*\n(.*\n)* {2}2 +bad usage: /m)
  })

  it("every tool's help names its options with their descriptions", async () => {
    const helps = await Promise.all(cliTools.map((tool) => ocx2([tool.name, "--help"], { env: noColour })))
    for (const help of helps) {
      expect(help.code).toBe(0)
      expect(help.stdout).toContain("--dry-run")
      expect(help.stdout).not.toMatch(/\x1b\[/)
    }
  }, 120_000)
})

describe("errors and exit statuses (defect 6)", () => {
  it("a bad global flag names the option and the options there are, with status 2", async () => {
    const { code, stdout, stderr } = await ocx2(["--jsn", "list"])
    expect(code).toBe(2)
    expect(stdout).toBe("")
    expect(stderr).not.toContain("Invalid subcommand")
    expect(stderr).toContain("unknown option --jsn (did you mean --json?)")
    expect(stderr).toContain("--json, --repository FILE, --user USER, --mcp, --help, --version")
    expect(stderr).not.toMatch(/\x1b\[/)
  })

  it("an unknown option, a missing argument and an unknown tool are bad usage: status 2", async () => {
    const [option, argument, tool] = await Promise.all([ocx2(["echo", "hi", "--opton", "x"]), ocx2(["echo"]), ocx2(["frobnicate"])])
    expect(option.code).toBe(2)
    expect(option.stderr).toContain("echo's options are --option OPTION, --flag, --dry-run, --help")
    expect(argument.code).toBe(2)
    expect(argument.stderr).toContain("echo needs WORD (the word to echo)")
    expect(tool.code).toBe(2)
  })

  it("a missing --repository file is named, from every tool, with status 1 (refused: the call was written right)", async () => {
    const calls: Array<ReadonlyArray<string>> = [
      ["create", "--title", "x"], ["status"], ["run", "abc"], ["stop", "abc"], ["receipt"], ["post", "abc", "text"],
      ["node", "https://s/r", "pw.json"], ["hook"], ["unhook"], ["stage", "."], ["accept"], ["rollback"], ["echo", "x"], []
    ]
    const ran = await Promise.all(calls.map((call) => ocx2(["--repository", missing, ...call])))
    for (const [k, r] of ran.entries()) {
      expect(r.stderr, calls[k]!.join(" ")).toContain(`refused: no repository file ${missing}`)
      expect(r.code).toBe(1)
    }
    const json = await ocx2(["create", "--title", "x", "--repository", missing, "--json"])
    expect(JSON.parse(json.stdout)).toEqual({ tool: "create", operations: [], stopped: { reason: "refused", message: `no repository file ${missing}` } })
    const notFossil = Path.join(dir, "not-a-repository.fossil")
    Fs.writeFileSync(notFossil, "plain text, no SQLite")
    const read = await ocx2(["--repository", notFossil, "create", "--title", "x"])
    expect(read.stderr).toContain(`${notFossil} is not a Fossil repository`)
    expect(read.code).toBe(1)
  }, 120_000)

  it("a --user the repository does not have is an error naming it, not an empty answer (issue 40)", async () => {
    const runs = await ocx2(["--repository", repository, "--user", "ghost", "runs"])
    expect(runs.stderr).toContain(`no user ghost in the repository ${repository}`)
    expect(runs.stdout).not.toMatch(/0 of 0 runs/)
    expect(runs.code).toBe(1)
    const known = await ocx2(["--repository", repository, "--user", "builder", "runs"])
    expect(known.code).toBe(0)
  })

  it("a value the tool does not take is bad usage (2), said in one sentence; JSON that does not parse names where (issue 40)", async () => {
    const state = await ocx2(["--repository", repository, "--user", "alice", "runs", "--state", "done"])
    expect(state.stderr.trim()).toBe('runs: refused: bad argument: state must be one of waiting, started, ended, refused, lost, open or over, not "done"')
    expect(state.code).toBe(2)
    const fields = await ocx2(["--repository", repository, "--user", "alice", "create", "--title", "t", "--node", "lab", "--fields", '{"objective": "x",}'])
    expect(fields.stderr.trim()).toBe("create: refused: bad argument: fields: not JSON at line 1, column 19 (position 18): Expected double-quoted property name")
    expect(fields.code).toBe(2)
  })

  it("a dry run is done (0), a refusal 1 (2 is for bad usage alone, issue 40)", async () => {
    const dry = await ocx2(["echo", "x", "--dry-run"])
    expect(dry.code).toBe(0)
    const refused = await ocx2(["--repository", repository, "--user", "builder", "create", "--title", "x"])
    expect(refused.stderr).toContain("create needs Fossil's admin (a) or setup (s) capability")
    expect(refused.code).toBe(1)
  })
})

describe("create --fields @FILE and - (defect 6)", () => {
  const create = (fields: string, input?: string) =>
    ocx2(["--repository", repository, "--user", "alice", "--json", "create", "--title", "a run", "--node", "lab", "--fields", fields, "--dry-run"],
      input !== undefined ? { input } : {})
  const run = { objective: "from a file", process: { user: "builder", command: ["true"] } }

  it("reads the JSON object from FILE, and from standard input", async () => {
    const file = Path.join(dir, "fields.json")
    Fs.writeFileSync(file, JSON.stringify(run))
    const fromFile = await create(`@${file}`)
    expect(fromFile.code).toBe(0)
    expect(JSON.parse(fromFile.stdout).output.message.run).toMatchObject(run)
    const fromStdin = await create("-", JSON.stringify({ ...run, objective: "from stdin" }))
    expect(fromStdin.code).toBe(0)
    expect(JSON.parse(fromStdin.stdout).output.message.run.objective).toBe("from stdin")
  })

  it("a file that cannot be read or holds no JSON object is an error naming it", async () => {
    const none = Path.join(dir, "none.json")
    const notJson = Path.join(dir, "not.json")
    Fs.writeFileSync(notJson, "{objective")
    const list = Path.join(dir, "list.json")
    Fs.writeFileSync(list, "[]")
    const [a, b, c, d] = await Promise.all([create(`@${none}`), create(`@${notJson}`), create(`@${list}`), create("-", "null")])
    expect(JSON.parse(a.stdout).stopped).toEqual({ reason: "refused", message: `--fields @${none}: no file ${none}` })
    expect(JSON.parse(b.stdout).stopped.message).toBe(`--fields @${notJson}: ${notJson} is not JSON at line 1, column 2 (position 1): Expected property name or '}'`)
    expect(JSON.parse(c.stdout).stopped.message).toBe(`--fields @${list}: ${list} holds an array, not a JSON object`)
    expect(JSON.parse(d.stdout).stopped.message).toBe("--fields -: standard input holds null, not a JSON object")
    for (const r of [a, b, c, d]) expect(r.code).toBe(2)
  })
})
