import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { bundle } from "../adapters/extServer.js"
import { makeWorld, type World } from "../support/world.js"

// The release rule with real programs (seed 001, "Stage, accept or roll back a release"): a
// release root built as test/node/hookWorld.ts's makeReleaseRoot builds one (the bundled programs
// copied into ROOT/staged/NAME, node_modules linked), with three releases: previous A, current B,
// and a different next C. Each release's own ocx2 is run as a person runs it, and each release's
// CGI as Fossil runs it from its extension root (ocx2-cgi -> ROOT/current/ocx2-cgi, ocx2-cgi-next
// -> ROOT/next/ocx2-cgi), with a CGI environment and the body on stdin.

const A = "aaaaaaaaaaaa"
const B = "bbbbbbbbbbbb"
const C = "cccccccccccc"

const admin = { login: "admin", password: "admin-secret-1", capabilities: "s" }
const origin = "http://127.0.0.1:8080"

let world: World | undefined
let dir: string
let build: string
let repository: string
let root: string
let ext: string
const programs: Record<string, string> = {}

/** ROOT/staged/NAME holding the bundled programs, as stage leaves a release. */
const addRelease = (at: string, name: string) => {
  const release = Path.join(at, "staged", name)
  Fs.mkdirSync(release, { recursive: true })
  for (const [program, source] of Object.entries(programs)) {
    Fs.copyFileSync(source, Path.join(release, program))
    Fs.chmodSync(Path.join(release, program), 0o755)
  }
  Fs.writeFileSync(Path.join(release, "package.json"), JSON.stringify({ type: "module" }))
  Fs.symlinkSync(Path.join(import.meta.dirname, "../../node_modules"), Path.join(release, "node_modules"))
}

const makeRoot = (at: string, links: Record<string, string>) => {
  Fs.mkdirSync(at, { recursive: true }) // the world's ROOT is there already
  for (const name of new Set(Object.values(links))) addRelease(at, name)
  for (const [link, name] of Object.entries(links)) Fs.symlinkSync(`staged/${name}`, Path.join(at, link))
  Fs.symlinkSync("current/ocx2-hook", Path.join(at, "ocx2-hook"))
  return at
}

const links = (at: string) => Object.fromEntries(["previous", "current", "next"].map((l) => {
  try {
    return [l, Fs.readlinkSync(Path.join(at, l))]
  } catch {
    return [l, undefined]
  }
}))

interface Answer {
  readonly tool: string
  readonly operations: ReadonlyArray<{ readonly op: string; readonly detail: string; readonly done: boolean }>
  readonly output?: Record<string, unknown>
  readonly stopped: { readonly reason: string; readonly message?: string }
}

/**
 * A program run to its end, its output gathered. Not spawnSync: a worker blocked for a program's
 * whole run under load misses vitest's own calls ("Timeout calling onTaskUpdate").
 */
const ran = (
  program: string,
  args: ReadonlyArray<string>,
  options: { readonly env: NodeJS.ProcessEnv; readonly input?: string }
): Promise<{ status: number | null; error: Error | undefined; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    const child = spawn(program, args, { env: options.env, timeout: 60_000 })
    let stdout = ""
    let stderr = ""
    let error: Error | undefined
    child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c))
    child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c))
    child.once("error", (e) => (error = e))
    child.once("close", (status) => resolve({ status, error, stdout, stderr }))
    child.stdin.on("error", () => {}) // a program that exits before reading its input
    child.stdin.end(options.input ?? "")
  })

/** `PROGRAM --json --repository REPO --user admin TOOL ARGS...`, as a person at a terminal runs it. */
const cli = async (program: string, tool: string, ...args: Array<string>): Promise<{ code: number | null; answer: Answer }> => {
  const r = await ran(program, ["--json", "--repository", repository, "--user", admin.login, tool, ...args], {
    env: { ...process.env, USER: "root" }
  })
  try {
    return { code: r.status, answer: JSON.parse(r.stdout) }
  } catch {
    throw new Error(`${program} ${tool}: exit ${r.status} ${String(r.error ?? "")}, stdout ${r.stdout}, stderr ${r.stderr}`)
  }
}

/** The CGI program at `program` run as Fossil runs it: only the CGI environment, the body on stdin. */
const cgi = async (
  program: string,
  request: { method: "GET" | "POST"; script: string; path: string; query?: string; body?: string; type?: string; referer?: string }
): Promise<{ status: number; body: string }> => {
  const body = request.body ?? ""
  const env: Record<string, string> = {
    GATEWAY_INTERFACE: "CGI/1.0",
    REQUEST_METHOD: request.method,
    SCRIPT_NAME: request.script,
    PATH_INFO: request.path,
    QUERY_STRING: request.query ?? "",
    HTTP_HOST: "127.0.0.1:8080",
    FOSSIL_USER: admin.login,
    FOSSIL_CAPABILITIES: admin.capabilities,
    FOSSIL_REPOSITORY: repository,
    ...(request.method === "POST"
      ? {
        HTTP_REFERER: request.referer ?? `${origin}${request.script}${request.path}`,
        CONTENT_TYPE: request.type ?? "application/x-www-form-urlencoded",
        CONTENT_LENGTH: String(Buffer.byteLength(body))
      }
      : {})
  }
  const r = await ran(process.execPath, [program], { input: body, env })
  const match = /^Status: (\d+)[^\r]*\r\n(?:[^\r]*\r\n)*?\r\n([\s\S]*)$/.exec(r.stdout)
  if (match === null) throw new Error(`${program}: exit ${r.status}, stdout ${r.stdout}, stderr ${r.stderr}`)
  return { status: Number(match[1]), body: match[2]! }
}

const jsonPost = (program: string, script: string, tool: string, object: unknown) =>
  cgi(program, { method: "POST", script, path: `/${tool}`, body: JSON.stringify(object), type: "application/json" })

beforeAll(async () => {
  // the served repository with its admin; the programs act on its file, so its backoffice stays off
  world = await makeWorld({ prefix: "ocx2-release-programs-", users: [admin], checkin: {}, backoffice: false })
  // the programs name their release root by its real path
  dir = Fs.realpathSync(world.dir)
  repository = Path.join(dir, Path.basename(world.repository))
  build = Path.join(dir, "build")
  Fs.mkdirSync(build)
  const project = Path.join(import.meta.dirname, "../..")
  // bundled from this checkout's source as npm run build does, each run by its #! line as a release's are
  for (const program of ["ocx2", "ocx2-cgi"]) {
    const file = await bundle(Path.join(project, "bin", `${program}.ts`), build, program)
    Fs.writeFileSync(file, `#!/usr/bin/env node\n${Fs.readFileSync(file, "utf8")}`)
    Fs.chmodSync(file, 0o755)
    programs[program] = file
  }
  // the bundles ocx2-cgi chooses from, beside it (bundle made them), as a release carries them
  for (const sibling of ["ocx2-cgi-pages", "ocx2-cgi-receipt"]) programs[sibling] = Path.join(build, `${sibling}.mjs`)
  root = makeRoot(Path.join(dir, "root"), { previous: A, current: B, next: C })
  // Fossil's extension root: ocx2-cgi follows current, and ocx2-cgi-next reaches next through a chain of links
  ext = Path.join(dir, "ext")
  Fs.mkdirSync(ext)
  Fs.symlinkSync(Path.join(root, "current", "ocx2-cgi"), Path.join(ext, "ocx2-cgi"))
  Fs.symlinkSync(Path.join(root, "next", "ocx2-cgi"), Path.join(dir, "hop"))
  Fs.symlinkSync(Path.join(dir, "hop"), Path.join(ext, "ocx2-cgi-next"))
}, 120_000)

afterAll(() => world?.close())

describe("the release rule, with real programs", { timeout: 120_000 }, () => {
  it("ocx2-cgi-next knows it is the pre-release candidate and refuses to accept once a release is served", async () => {
    const home = await cgi(Path.join(ext, "ocx2-cgi-next"), { method: "GET", script: "/ext/ocx2-cgi-next", path: "" })
    expect(home.status).toBe(200)
    expect(home.body).toContain(`This page is the pre-release candidate ${C} of ${root}, the server&#39;s release root; the active release is ${B}`)
    const page = await cgi(Path.join(ext, "ocx2-cgi-next"), { method: "GET", script: "/ext/ocx2-cgi-next", path: "/accept" })
    expect(page.body).toContain(`pre-release candidate ${C} of ${root}`)
    expect(page.body).toContain(`<form method="post" action="/ext/ocx2-cgi-next/accept"`)
    expect(page.body).not.toContain(`name="root"`)
    const current = await cgi(Path.join(ext, "ocx2-cgi"), { method: "GET", script: "/ext/ocx2-cgi", path: "" })
    expect(current.body).toContain(`This page is the active release ${B} of ${root}, the server&#39;s release root.`)

    const refused = await jsonPost(Path.join(ext, "ocx2-cgi-next"), "/ext/ocx2-cgi-next", "accept", {})
    const answer = JSON.parse(refused.body) as Answer
    expect(answer.stopped.reason).toBe("refused")
    expect(answer.stopped.message).toContain(
      `this page (ocx2-cgi) is the pre-release candidate ${C} of ${root} (next): once a release is served, only the active release (current, ${B}) accepts`
    )
    // the form's way too
    const form = await cgi(Path.join(ext, "ocx2-cgi-next"), { method: "POST", script: "/ext/ocx2-cgi-next", path: "/accept", body: "" })
    expect(form.body).toContain(`data-reason="refused"`)
    expect(form.body).toContain(`is the pre-release candidate ${C} of ${root} (next)`)
    // the pre-release candidate may roll back (here only as a dry run)
    const rollback = JSON.parse((await jsonPost(Path.join(ext, "ocx2-cgi-next"), "/ext/ocx2-cgi-next", "rollback", { dry_run: true })).body) as Answer
    expect(rollback.stopped).toEqual({ reason: "dry_run" })
    expect(rollback.output).toMatchObject({ root, current: A, previous: B })
    expect(links(root)).toEqual({ previous: `staged/${A}`, current: `staged/${B}`, next: `staged/${C}` })
  })

  it("the pages take the release root from their program's real path, and refuse one in the request", async () => {
    const other = makeRoot(Path.join(dir, "other"), { current: A, next: C })
    const program = Path.join(ext, "ocx2-cgi")
    const sent = await Promise.all([
      jsonPost(program, "/ext/ocx2-cgi", "accept", { root: other }),
      cgi(program, { method: "POST", script: "/ext/ocx2-cgi", path: "/accept", body: new URLSearchParams({ root: other, format: "json" }).toString() }),
      cgi(program, { method: "GET", script: "/ext/ocx2-cgi", path: "/rollback", query: new URLSearchParams({ root: other, format: "json" }).toString() })
    ])
    for (const response of sent) {
      const answer = JSON.parse(response.body) as Answer
      expect(answer.stopped).toEqual({
        reason: "refused",
        message: expect.stringMatching(new RegExp(`^the web page takes no release root from the request \\(root "${other}"\\): it (accepts|rolls back) on the release root that serves it, ${root};`))
      })
    }
    expect(links(other)).toEqual({ previous: undefined, current: `staged/${A}`, next: `staged/${C}` })
    // a CGI program in no release root accepts nothing
    const outside = JSON.parse((await jsonPost(programs["ocx2-cgi"]!, "/ext/ocx2-cgi", "accept", {})).body) as Answer
    expect(outside.stopped.reason).toBe("refused")
    expect(outside.stopped.message).toMatch(/^this page's program is not inside a release root/)
  })

  it("hook and unhook on the web act on the page's own root: a root in the request is refused, and the forms offer none", async () => {
    const other = makeRoot(Path.join(dir, "other-hook"), { current: A })
    const program = Path.join(ext, "ocx2-cgi")
    for (const tool of ["hook", "unhook"]) {
      const answer = JSON.parse((await jsonPost(program, "/ext/ocx2-cgi", tool, { root: other, dry_run: true })).body) as Answer
      expect(answer.stopped.reason, tool).toBe("refused")
      expect(answer.stopped.message, tool).toMatch(new RegExp(`^the web page takes no release root from the request \\(root "${other}"\\): ${tool} acts on the release root that serves the page`))
      const page = await cgi(program, { method: "GET", script: "/ext/ocx2-cgi", path: `/${tool}` })
      expect(page.body, tool).not.toContain(`name="root"`)
    }
    // without one, the page's dry run names its own release's root
    const own = JSON.parse((await jsonPost(program, "/ext/ocx2-cgi", "hook", { dry_run: true })).body) as Answer
    expect(JSON.stringify(own)).toContain(root)
    expect(JSON.stringify(own)).not.toContain(other)
  })

  it("at a terminal: next's and previous's ocx2 are refused, current's accepts, a checkout's recovers with --root", async () => {
    const next = await cli(Path.join(root, "next", "ocx2"), "accept")
    expect(next.code).toBe(1)
    expect(next.answer.stopped.message).toContain(
      `this program (ocx2) is the pre-release candidate ${C} of ${root} (next): once a release is served, only the active ` +
        `release (current, ${B}) accepts, as ${root}/current/ocx2 accept`
    )
    const previous = await cli(Path.join(root, "previous", "ocx2"), "accept", "--root", root)
    expect(previous.code).toBe(1)
    expect(previous.answer.stopped.message).toContain(`this program (ocx2) is release ${A} of ${root}, kept as previous (not the active release)`)
    const back = await cli(Path.join(root, "previous", "ocx2"), "rollback")
    expect(back.answer.stopped.message).toContain(`only the active release (current, ${B}) or the pre-release candidate (next, ${C}) rolls back`)
    expect(links(root)).toEqual({ previous: `staged/${A}`, current: `staged/${B}`, next: `staged/${C}` })

    const current = await cli(Path.join(root, "current", "ocx2"), "accept")
    expect(current.answer.stopped).toEqual({ reason: "completed" })
    expect(current.answer.operations[0]).toEqual({ op: "release", detail: `ocx2 is the active release ${B} of ${root} (current): it may accept`, done: true })
    expect(links(root)).toEqual({ previous: `staged/${B}`, current: `staged/${C}`, next: `staged/${C}` })

    // B is previous now: its program is refused; a checkout's (in no root) rolls back with --root
    expect((await cli(Path.join(root, "previous", "ocx2"), "rollback")).code).toBe(1)
    const checkout = await cli(programs.ocx2!, "rollback", "--root", root)
    expect(checkout.answer.stopped).toEqual({ reason: "completed" })
    expect(links(root)).toEqual({ previous: `staged/${C}`, current: `staged/${B}`, next: `staged/${C}` })
  })

  it("a node's first release: the pre-release candidate's page accepts it (trusted on first use)", async () => {
    const first = makeRoot(Path.join(dir, "first"), { next: C })
    const page = Path.join(ext, "first-next")
    Fs.symlinkSync(Path.join(first, "next", "ocx2-cgi"), page)
    const home = await cgi(page, { method: "GET", script: "/ext/ocx2-cgi-next", path: "" })
    expect(home.body).toContain(`This page is the pre-release candidate ${C} of ${first}, the server&#39;s release root; no release is served yet`)
    const accepted = JSON.parse((await jsonPost(page, "/ext/ocx2-cgi-next", "accept", {})).body) as Answer
    expect(accepted.stopped).toEqual({ reason: "completed" })
    expect(links(first)).toEqual({ previous: undefined, current: `staged/${C}`, next: `staged/${C}` })
  })
})
