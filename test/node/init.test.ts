import BetterSqlite3 from "better-sqlite3"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import { chromium } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { Repository } from "../../services/Repository.js"
import { removeTree } from "../../src/demo/RemoveTree.js"
import { stopSpare } from "../../src/pickup/SpareClient.js"
import { readMessage } from "../../src/protocol/Envelope.js"
import type { DoctorOutput } from "../../src/tools/doctor.js"
import {
  cspWith, fossilDefaultCsp, type InitOutput, supervisorUnitTemplate, supervisorUnitText, unitEnvFile, unitFile
} from "../../src/tools/support/NodeInit.js"
import { createRepository, makeTempDir, type RunningServer, startServer } from "../support/fossilServer.js"
import { shellRun } from "../support/nodeWorld.js"
import { closeCloneWorld, cloneUsers, makeCloneWorld, type CloneWorld } from "./cloneWorld.js"
import { answerWithin, dist, endWatchers, makeReleaseRoot, project } from "../support/world.js"

// ocx2 init (issue 40), following README.md "Installing a node" and docs/operations.md from a bare
// repository (only its admin): a real fossil server started as a service manager starts it, with an
// empty extension root; a release root as accept leaves it (makeReleaseRoot: staging runs the
// checkout's gate, a minute or more). The checkout's program, as README's `bin/ocx2`, runs init; a
// person follows README's "A first run from the web pages" in Chromium (the runs list, New run,
// the form with README's own fields, create's link) to the run page showing its end; doctor (the installed ROOT/current/ocx2)
// finds every check ok; init again changes nothing. This host has no systemd as PID 1, so the
// supervisor is the detached one; the unit init would write is held to docs/systemd's.

const admin = { login: "alice", capabilities: "s", password: "alice-pw" }
let dir: string
let repository: string
let root: string
let extroot: string
let server: RunningServer

beforeAll(async () => {
  dir = makeTempDir("ocx2-init-")
  // the runs' sandboxes (uid 1000) reach their workspaces under ROOT, as under an operator's /srv
  Fs.chmodSync(dir, 0o755)
  repository = await createRepository(Path.join(dir, "repo.fossil"), [admin])
  root = Path.join(dir, "root")
  makeReleaseRoot(root)
  extroot = Path.join(dir, "ext")
  Fs.mkdirSync(extroot)
  server = await startServer(repository, { extroot })
}, 120_000)

afterAll(async () => {
  if (root !== undefined) {
    endWatchers(root)
    stopSpare(root)
  }
  await server?.stop()
  if (dir !== undefined && process.env.OCX2_KEEP_TEST_DIR === undefined) await removeTree(dir)
})

const ocx2 = (program: string, user: string, args: ReadonlyArray<string>) =>
  ChildProcess.spawnSync(process.execPath, [program, "--repository", repository, "--user", user, ...args], { encoding: "utf8", timeout: 180_000 })
const init = (...args: ReadonlyArray<string>) =>
  ocx2(Path.join(dist, "ocx2.mjs"), admin.login, ["init", "--node", "lab", "--root", root, "--process-user", "builder", ...args])
const answerOf = (r: ChildProcess.SpawnSyncReturns<string>) =>
  JSON.parse(r.stdout) as { operations: ReadonlyArray<{ op: string; detail: string; done: boolean }>; output?: InitOutput; stopped: { reason: string; message?: string } }
const states = (output: InitOutput | undefined) => Object.fromEntries((output?.steps ?? []).map((s) => [s.step, s.state]))

/** What init may change, read: the repository's users, settings and hooks, ROOT's node and settings, the extension root. */
const snapshot = () => {
  const db = new BetterSqlite3(repository, { readonly: true })
  try {
    return {
      users: db.prepare("SELECT login, cap FROM user ORDER BY login").all(),
      config: db.prepare("SELECT name, value FROM config WHERE name IN ('hooks', 'default-csp', 'backoffice-disable', 'email-url') ORDER BY name").all(),
      root: Fs.readdirSync(root).sort(),
      settings: Fs.existsSync(Path.join(root, "settings")) ? Fs.readdirSync(Path.join(root, "settings")).sort() : [],
      ext: Fs.readdirSync(extroot).sort()
    }
  } finally {
    db.close()
  }
}

const replies = (run: string) =>
  Effect.runPromise(Effect.flatMap(Repository, (r) => r.thread(run)).pipe(Effect.provide(FossilRepository.layer({ path: repository }))))
    .then((posts) => posts.flatMap((p) => {
      const m = readMessage(p.text)
      return m._tag === "Message" && m.re === run ? [{ kind: m.kind, content: m.content as Record<string, unknown> }] : []
    }))

describe("ocx2 init", () => {
  it("is the house's supervisor unit, for the account that runs init, and a CSP that adds the stream's origin once", () => {
    expect(supervisorUnitTemplate).toBe(Fs.readFileSync(Path.join(project, "docs", "systemd", "ocx2-supervise@.service"), "utf8"))
    const unit = supervisorUnitText(supervisorUnitTemplate, "ocx")
    expect(unit).toMatch(/^User=ocx$/m)
    expect(unit).toMatch(/^Environment=USER=ocx$/m)
    expect(unit).not.toMatch(/fossil$/m)
    const csp = cspWith(fossilDefaultCsp, "http://127.0.0.1:8091")
    expect(csp).toBe(`${fossilDefaultCsp}; connect-src 'self' http://127.0.0.1:8091`)
    expect(cspWith(csp, "http://127.0.0.1:8091")).toBe(csp)
    expect(cspWith("default-src 'self'; connect-src 'self'", "http://h:1")).toBe("default-src 'self'; connect-src 'self' http://h:1")
  })

  it("--dry-run on a bare repository says every step and changes nothing; with --supervisor systemd, the unit it would write", () => {
    const before = snapshot()
    const dry = init("--dry-run", "--json")
    expect(dry.status, dry.stderr).toBe(0)
    const answer = answerOf(dry)
    expect(answer.stopped).toEqual({ reason: "dry_run" })
    expect(states(answer.output)).toEqual({
      "node user": "would", "process user": "would", "server URL": "would", release: "already", hook: "would",
      supervisor: "would", pages: "would", stream: "would", "content-security policy": "would"
    })
    expect(answer.output?.serverUrl).toBe(server.url.replace(/\/+$/, ""))
    expect(answer.operations.filter((o) => o.done), dry.stdout).toEqual([])
    const would = answer.operations.filter((o) => !o.done).map((o) => `${o.op}: ${o.detail}`).join("\n")
    expect(would).toContain(`ln -s ${Path.join(root, "current", "ocx2-cgi")} ${Path.join(extroot, "ocx2-cgi")}`)
    expect(would).toContain("fossil settings default-csp")
    expect(would).toContain("fossil user new lab")
    const systemd = answerOf(init("--dry-run", "--json", "--supervisor", "systemd"))
    const unitLines = systemd.operations.filter((o) => o.op === "supervisor").map((o) => o.detail)
    expect(unitLines).toEqual([
      expect.stringContaining(`write ${unitFile}`),
      `write ${unitEnvFile}: OCX2_ROOT=${root}`,
      "systemctl daemon-reload",
      "systemctl enable --now ocx2-supervise@lab.service"
    ])
    expect(snapshot()).toEqual(before)
  }, 180_000)

  it("sets up the node: a run posted through the web form is answered, doctor finds all ok; init again changes nothing", async () => {
    const first = init("--json")
    console.log(first.stderr)
    const answer = answerOf(first)
    expect(answer.stopped, first.stdout).toEqual({ reason: "completed" })
    expect(first.status).toBe(0)
    expect(states(answer.output)).toEqual({
      "node user": "done", "process user": "done", "server URL": "done", release: "already", hook: "done",
      supervisor: "done", pages: "done", stream: "done", "content-security policy": "done"
    })
    expect(answer.output?.supervisor).toBe("detached")
    expect(answer.output?.steps.find((s) => s.step === "supervisor")?.words).toMatch(/systemd does not run this host: PID 1 is /)
    expect(Fs.readlinkSync(Path.join(extroot, "ocx2-cgi"))).toBe(Path.join(root, "current", "ocx2-cgi"))
    // Fossil's pages now let a script reach the stream server's fixed port
    const stream = JSON.parse(Fs.readFileSync(Path.join(root, "settings", "stream"), "utf8")) as { host: string; port: number }
    expect(stream.host).toBe("127.0.0.1")
    const home = await (await fetch(`${server.url}timeline`)).text()
    expect(home).toContain(`connect-src 'self' http://127.0.0.1:${stream.port}`)

    // a person follows README's "A first run from the web pages" in a browser, literally: the
    // runs list, New run, the form filled as it says with its fields, create's link, the run page
    // showing the end without a reload
    const readme = Fs.readFileSync(Path.join(project, "README.md"), "utf8")
    const section = readme.slice(readme.indexOf("A first run from the web pages"))
    const fields = /```json\n([\s\S]*?)```/.exec(section)?.[1]
    expect(fields, "README's first run has its fields").toBeDefined()
    const browser = await chromium.launch({
      executablePath: "/usr/bin/chromium",
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    })
    let run: string | undefined
    try {
      const page = await (await browser.newContext({ viewport: { width: 1200, height: 900 } })).newPage()
      await page.goto(`${server.url}login`)
      await page.fill("input[name=u]", admin.login)
      await page.fill("input[name=p]", admin.password)
      await Promise.all([page.waitForNavigation(), page.click("input[name=in]")])
      await page.goto(`${server.url}ext/ocx2-cgi`)
      expect(await page.locator("#ocx-runs").count()).toBe(1)
      await Promise.all([page.waitForNavigation(), page.click("text=New run")])
      await page.fill("#f-title", "a first run after init")
      await page.fill("#f-node", "lab")
      await page.fill("#f-objective", "say hello")
      await page.fill("#f-user", "builder")
      await page.fill("#f-fields", fields!)
      await Promise.all([page.waitForNavigation(), page.click("button[type=submit]:has-text('create')")])
      const link = page.locator("a.ocx-run-link")
      expect(await link.count(), await page.locator("#ocx-answer").textContent() ?? "").toBe(1)
      run = /watch\?run=([0-9a-f]{64})$/.exec((await link.getAttribute("href")) ?? "")?.[1]
      let navigations = 0
      await Promise.all([page.waitForNavigation(), link.click()])
      page.on("framenavigated", () => navigations++)
      await page.locator("#ocx-run-state", { hasText: "exited 0" }).waitFor({ timeout: answerWithin })
        .catch(async (e) => { throw new Error(`the run page of ${run} did not show its end within ${answerWithin / 1000} s: ${await replies(run!).then((r) => r.map((m) => m.kind).join(", "))}: ${String(e)}`) })
      await page.locator("#ocx-stream", { hasText: "hello from lab" }).waitFor({ timeout: 30_000 })
      expect(navigations).toBe(0)
      await page.screenshot({ path: Path.join(dir, "first-run.png"), fullPage: true })
    } finally {
      await browser.close()
    }
    const ended = await replies(run!)
    expect(ended.map((m) => m.kind)).toContain("started")
    const end = ended.find((m) => m.kind === "ended")!.content
    expect(end.outcome).toBe("exited")
    expect(end.exit, JSON.stringify(ended)).toBe(0)

    // doctor, as installed, finds every check ok
    const doctor = ocx2(Path.join(root, "current", "ocx2"), admin.login, ["doctor", "--json"])
    const found = JSON.parse(doctor.stdout).output as DoctorOutput
    expect(found.findings.filter((f) => !f.ok), doctor.stdout).toEqual([])
    expect(doctor.status).toBe(0)

    // init again: every step already so, nothing changed
    const before = snapshot()
    const again = init("--json")
    expect(again.status, again.stdout).toBe(0)
    const second = answerOf(again)
    expect(second.output?.steps.filter((s) => s.state !== "already"), again.stdout).toEqual([])
    expect(second.operations, again.stdout).toEqual([])
    expect(again.stderr).toContain("init: node user: already: lab holds no capability of its own")
    expect(snapshot()).toEqual(before)

    // the text a person reads says each step
    const text = init()
    expect(text.status).toBe(0)
    expect(text.stderr).toContain("init: supervisor: already: the supervisor runs")
    expect(text.stdout).toContain("ok: true")
  }, 300_000)

  it("refuses without setup, and --clone as not yet, exit 1; a command line written wrongly, exit 2", () => {
    const refused = ocx2(Path.join(dist, "ocx2.mjs"), "lab", ["init", "--node", "lab", "--root", root])
    expect(refused.status).toBe(1)
    expect(refused.stdout + refused.stderr).toContain("init needs Fossil's setup capability (s)")
    const clone = init("--clone", "https://example.org/repo")
    expect(clone.status).toBe(1)
    expect(clone.stdout + clone.stderr).toContain("no passwords file: give --passwords FILE")
    const wrong = ocx2(Path.join(dist, "ocx2.mjs"), admin.login, ["init", "--root", root])
    expect(wrong.status).toBe(2)
  }, 60_000)
})

describe("ocx2 init where steps cannot be done, and from a checkout", () => {
  const made: Array<string> = []
  const servers: Array<RunningServer> = []
  afterAll(async () => {
    for (const d of made) {
      endWatchers(d)
      stopSpare(Path.join(d, "root"))
    }
    for (const s of servers) await s.stop()
    if (process.env.OCX2_KEEP_TEST_DIR === undefined) for (const d of made) await removeTree(d)
  })
  const fresh = async () => {
    const at = makeTempDir("ocx2-init-")
    Fs.chmodSync(at, 0o755)
    made.push(at)
    return { at, repo: await createRepository(Path.join(at, "repo.fossil"), [admin]), root: Path.join(at, "root") }
  }
  const initIn = (repo: string, args: ReadonlyArray<string>) =>
    ChildProcess.spawnSync(process.execPath, [Path.join(dist, "ocx2.mjs"), "--repository", repo, "--user", admin.login, "init", "--node", "lab", ...args, "--json"],
      { encoding: "utf8", timeout: 600_000 })

  it("names each step that cannot be done with what to do instead, does what it can, skips what needs them, exit 1", async () => {
    const { repo, root } = await fresh()
    const r = initIn(repo, ["--root", root])
    expect(r.status, r.stdout).toBe(1)
    const output = answerOf(r).output!
    expect(output.ok).toBe(false)
    expect(states(output)).toEqual({
      "node user": "done", "server URL": "failed", release: "failed", hook: "skipped", supervisor: "skipped",
      pages: "skipped", stream: "skipped", "content-security policy": "skipped"
    })
    const step = (name: string) => output.steps.find((s) => s.step === name)!
    expect(step("server URL").fix).toContain("--server-url URL")
    expect(step("release").fix).toContain("--from CHECKOUT")
    expect(step("hook").words).toBe("it needs the step release, which failed: mend that and run init again")
    expect(step("stream").words).toBe("it needs the steps server URL, release, which failed: mend that and run init again")
    expect(r.stderr).toContain("init: release: failed: ")
  }, 120_000)

  it("replaces nothing in the extension root it did not make: the file in the way is named, the other steps done", async () => {
    const { at, repo, root } = await fresh()
    makeReleaseRoot(root)
    const extroot = Path.join(at, "ext")
    Fs.mkdirSync(extroot)
    Fs.writeFileSync(Path.join(extroot, "git"), "#!/bin/sh\n", { mode: 0o755 })
    const r = initIn(repo, ["--root", root, "--extroot", extroot, "--server-url", "http://127.0.0.1:9/"])
    expect(r.status, r.stdout).toBe(1)
    const output = answerOf(r).output!
    expect(states(output)).toEqual({
      "node user": "done", "server URL": "done", release: "already", hook: "done", supervisor: "done",
      pages: "failed", stream: "done", "content-security policy": "done"
    })
    const pages = output.steps.find((s) => s.step === "pages")!
    expect(pages.words).toBe(`${Path.join(extroot, "git")} is there already, not a link: init replaces nothing it did not make`)
    expect(pages.fix).toBe(`rm ${Path.join(extroot, "git")}; ln -s ${Path.join(root, "current", "ocx2-git")} ${Path.join(extroot, "git")} (or init again after removing it)`)
    expect(Fs.readFileSync(Path.join(extroot, "git"), "utf8")).toBe("#!/bin/sh\n")
    expect(output.serverUrl).toBe("http://127.0.0.1:9")
  }, 120_000)

  it("stages and accepts this checkout's check-in into a fresh ROOT (--from), then sets up the node from it", async () => {
    const { at, repo, root } = await fresh()
    const extroot = Path.join(at, "ext")
    Fs.mkdirSync(extroot)
    const server = await startServer(repo, { extroot })
    servers.push(server)
    // a checkout of this checkout's check-in (its gate is not thrown by work in progress beside it), with its packages
    const checkout = Path.join(at, "checkout")
    ChildProcess.execFileSync("git", ["clone", "-q", project, checkout])
    Fs.symlinkSync(Path.join(project, "node_modules"), Path.join(checkout, "node_modules"))
    const began = Date.now()
    const r = initIn(repo, ["--root", root, "--from", checkout])
    console.log(`init --from a checkout of ${project}: ${((Date.now() - began) / 1000).toFixed(1)} s`)
    expect(r.status, `${r.stdout}\n${r.stderr.slice(-3000)}`).toBe(0)
    const output = answerOf(r).output!
    expect(states(output)).toEqual({
      "node user": "done", "server URL": "done", release: "done", hook: "done", supervisor: "done",
      pages: "done", stream: "done", "content-security policy": "done"
    })
    expect(Fs.realpathSync(Path.join(root, "current"))).toMatch(new RegExp(`^${Fs.realpathSync(root)}/staged/[0-9a-f]{12}$`))
    expect(r.stderr).toContain("stage: gate")
  }, 600_000)
})

describe("ocx2 init --clone, on a clone's host", () => {
  let world: CloneWorld | undefined
  let root: string
  beforeAll(async () => {
    world = await makeCloneWorld("ocx2-init-clone-")
    // a host of its own beside the world's: a release root as accept leaves it, no clone yet
    const host = Path.join(world.dir, "host2")
    Fs.mkdirSync(host)
    Fs.chmodSync(host, 0o755)
    root = Path.join(host, "root")
    makeReleaseRoot(root)
  }, 240_000)
  afterAll(async () => {
    if (root !== undefined) {
      endWatchers(root)
      stopSpare(root)
    }
    await closeCloneWorld(world)
  })
  const initClone = (...args: ReadonlyArray<string>) =>
    ChildProcess.spawnSync(process.execPath, [Path.join(dist, "ocx2.mjs"), "--json", "init", "--clone", world!.url, "--passwords", world!.passwords,
      "--node", cloneUsers.lab2.login, "--root", root, ...args], { encoding: "utf8", timeout: 180_000, env: { ...process.env, USER: "root" } })

  it("makes the clone, registers and starts the node, and its supervisor picks a run up; again, every step already", async () => {
    const dry = initClone("--dry-run")
    expect(dry.status, dry.stdout + dry.stderr).toBe(0)
    expect(states(answerOf(dry).output)).toEqual({ passwords: "already", clone: "would", "server URL": "would", release: "already", node: "would", supervisor: "would" })
    const clone = Path.join(root, "clones", `${cloneUsers.lab2.login}.fossil`)
    expect(Fs.existsSync(clone)).toBe(false)

    const first = initClone()
    console.log(first.stderr)
    expect(first.status, first.stdout).toBe(0)
    expect(states(answerOf(first).output)).toEqual({ passwords: "already", clone: "done", "server URL": "done", release: "already", node: "done", supervisor: "done" })
    // no password on any line said
    expect(first.stdout + first.stderr).not.toContain(cloneUsers.lab2.password)

    const code = (await Effect.runPromise(Effect.promise(() =>
      import("../support/fossilServer.js").then((m) => m.fossil(["sql", "-R", clone, "SELECT value FROM config WHERE name='server-code'"]))))).trim().replace(/'/g, "")
    const run = await world!.world.post(shellRun({ serverCode: code }, "echo from the clone host"), { to: cloneUsers.lab2.login })
    const replies = await world!.world.waitEnded(run)
    const ended = replies.find((m) => m.kind === "ended")!.content as { outcome: string; exit?: number }
    expect(ended, JSON.stringify(replies)).toEqual(expect.objectContaining({ outcome: "exited", exit: 0 }))
    expect(replies.find((m) => m.kind === "started")?.sender).toBe(cloneUsers.lab2.login)

    const doctor = ChildProcess.spawnSync(Path.join(root, "current", "ocx2"), ["--json", "--repository", clone, "doctor"], { encoding: "utf8", timeout: 120_000, env: { ...process.env, USER: "root" } })
    const found = JSON.parse(doctor.stdout).output as DoctorOutput
    expect(found.role).toBe("clone")
    expect(found.findings.filter((f) => !f.ok), doctor.stdout).toEqual([])

    const again = initClone()
    expect(again.status, again.stdout).toBe(0)
    expect(answerOf(again).output?.steps.filter((s) => s.state !== "already"), again.stdout).toEqual([])
    expect(answerOf(again).operations).toEqual([])
  }, 400_000)
})
