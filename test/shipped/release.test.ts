import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { chromium, type Browser, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runFossil } from "../../src/fossil/Command.js"
import { cloneAs, webLogin } from "../support/fossilServer.js"
import * as ChildProcess from "node:child_process"
import { makeImage } from "../containers/world.js"
import { containersUnder, leftovers } from "../containers/deploy/deployWorld.js"
import { buildImage } from "../support/ociImages.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { git } from "../git/gitWorld.js"
import { pidsNaming } from "../node/hookWorld.js"
import { startSupervisor, stopSupervisor, supervisorLog } from "../node/supervisorWorld.js"
import { LineCheckingTransport, makeShippedWorld, runProgram, shellEnvironment, type ShippedWorld, waitFor } from "./shippedWorld.js"

// The release as shipped (issue 11): this checkout staged and accepted into a fresh ROOT as the
// README says, then every entry point driven as a user drives it, through ROOT/current, each
// twice: the second time with every cache the first left beside the programs (V8's code caches,
// the capabilities cache, the spare watcher; the CLI's second pass, the tools they change; the
// pages, a program started afresh for each page, once: their first page without the cache). The
// in-process suites test the tools; this one tests what is installed: the links, the bundles, the
// native addon found from the release, the hook run by a poller that a service manager started,
// and the pages from an extension root.

let world: ShippedWorld
let browser: Browser | undefined
const screenshots = Path.join(Os.tmpdir(), "ocx2-screenshots", "shipped")

beforeAll(async () => {
  world = await makeShippedWorld()
  Fs.mkdirSync(screenshots, { recursive: true })
}, 240_000)

afterAll(async () => {
  await browser?.close()
  await world?.close()
})

/** A run of the shipped program ROOT/current/ocx2, as the admin, from a directory that is not the checkout. */
const ocx2 = async (args: ReadonlyArray<string>, options: { readonly as?: string; readonly input?: string } = {}) => {
  const ran = await runProgram(world.program("ocx2"), ["--json", "--repository", world.node.repository, "--user", options.as ?? users.admin.login, ...args], {
    cwd: world.node.dir,
    ...(options.input === undefined ? {} : { input: options.input })
  })
  let answer: any
  try {
    answer = JSON.parse(ran.stdout)
  } catch {
    throw new Error(`ocx2 ${args.join(" ")} printed no JSON answer (exit ${String(ran.code)}):\n${ran.stdout}\n${ran.stderr}`)
  }
  // nothing but the answer: no warning, no stack, no module the release cannot find
  expect(ran.stderr, `stderr of ocx2 ${args.join(" ")}`).toBe("")
  return { ...ran, answer }
}

/**
 * A run for this host's node whose process prints a line and, when `seconds` is given, then waits
 * that long. Each section runs as a process user of its own (the node keeps one run per process
 * user), so a section that fails leaves nothing that holds up the next.
 */
const runFields = (line: string, seconds?: number, process: object = {}, user: string = users.builder.login) =>
  shellRun(world.node, seconds === undefined ? `echo ${line}` : `echo ${line}; sleep ${seconds}`, { user, ...process })

/**
 * What create says this host's node did at once: it handed the run to a watcher, or the hook,
 * woken by the fast poller, got there first and the node found nothing left to do. Either way the
 * run is then started exactly once, which each test checks in the thread.
 */
const actedAtOnce = /handed to a watcher|found nothing to do/

const cacheFiles = () => Fs.readdirSync(Path.join(world.root, "current")).filter((f) => f.endsWith(".cache")).sort()

describe("the release as installed", () => {
  it("is staged, accepted and hooked as the README says, with its programs and the addon in ROOT/current", () => {
    const current = Fs.realpathSync(Path.join(world.root, "current"))
    expect(Path.dirname(current)).toBe(Path.join(Fs.realpathSync(world.root), "staged"))
    for (const program of ["ocx2", "ocx2-hook", "ocx2-hook-round", "ocx2-watcher", "ocx2-cgi", "ocx2-cgi-pages", "ocx2-cgi-receipt", "ocx2-mcp", "ocx2-mcp-server", "ocx2-git", "ocx2-containers", "ocx2-containers-client"]) {
      expect(Fs.statSync(Path.join(current, program)).mode & 0o111, program).not.toBe(0)
    }
    expect(Fs.existsSync(Path.join(current, "node_modules", "better-sqlite3", "package.json"))).toBe(true)
    // the flock(2) addon beside the programs, where the watcher, hook and tools look for it first
    const flockAddon = { exports: {} as { flock?: unknown } }
    process.dlopen(flockAddon, Path.join(current, "ocx2-flock.node"))
    expect(typeof flockAddon.exports.flock).toBe("function")
    // copied, not linked: the release stands on its own when the checkout moves on (the tools that
    // read the repository below, read and runs, load the addon from here)
    expect(Fs.realpathSync(Path.join(current, "node_modules", "better-sqlite3"))).toBe(Path.join(current, "node_modules", "better-sqlite3"))
    // the checkout's real gate ran and passed (its typecheck and the protocol tests), as its log says
    expect(Fs.readFileSync(Path.join(world.root, "staged", "gate.log"), "utf8")).toMatch(/gate ended: exit status 0/)
    expect(Fs.readlinkSync(Path.join(world.root, "ocx2-hook"))).toBe("current/ocx2-hook")
  })

  // Pass 2 runs what the caches change: the program started with its code cache (any tool), a run
  // created and acted on at once (the hook round's cache, the spare watcher, the capabilities cache),
  // stopped and started by hand. The tools that only read or dry-run run the same bundle whether its
  // cache is there or not, so they run once, in pass 1.
  for (const pass of [1, 2]) {
    const first = pass === 1
    it(`${first ? "every tool" : "the tools that start and stop runs"} through ROOT/current/ocx2 (pass ${pass}${first ? "" : ", with every cache present"})`, async () => {
      if (!first) expect(cacheFiles()).toEqual(expect.arrayContaining(["ocx2.cjs.cache", "ocx2-hook-round.cjs.cache"]))

      expect((await ocx2(["list"])).answer.stopped.reason).toBe("completed")
      expect((await ocx2(["echo", `hello-${pass}`])).answer.output.word).toBe(`hello-${pass}`)
      const trunk = world.node.trunk
      if (first) {
        expect((await ocx2(["help", "create"])).answer.output.name).toBe("create")
        const status = await ocx2(["status", "--root", world.root])
        expect(status.answer.stopped.reason).toBe("completed")
        expect(JSON.stringify(status.answer.output)).toContain("installed")
        const receipt = await ocx2(["receipt", "--artifacts", trunk])
        expect(receipt.answer.stopped.reason).toBe("completed")
      }

      // create: the run is written and this host's node acts on it at once
      const created = await ocx2(["create", "--title", `a run, pass ${pass}`, "--node", users.node.login, "--fields", JSON.stringify(runFields(`created-${pass}`))])
      expect(created.answer.stopped.reason, created.stdout).toBe("completed")
      expect(created.answer.output.acted).toMatch(actedAtOnce)
      const run = created.answer.output.run as string
      const ended = await world.waitEnded(run)
      expect(ended.map((m) => m.kind)).toEqual(["started", "ended"])
      expect(ended[1]!.content).toEqual({ outcome: "exited", exit: 0 })

      // create --dry-run and --fields from standard input write nothing
      if (first) {
        const dry = await ocx2(["create", "--title", "not written", "--node", users.node.login, "--fields", "-", "--dry-run"], { input: JSON.stringify(runFields("dry")) })
        expect(dry.answer.stopped.reason).toBe("dry_run")
        expect(dry.answer.output.run).toBeUndefined()
      }

      // stop: a long run is ended stopped by this host's node at once
      const long = await ocx2(["create", "--title", `a long run, pass ${pass}`, "--node", users.node.login, "--fields", JSON.stringify(runFields(`long-${pass}`, 120))])
      const longRun = long.answer.output.run as string
      expect(await world.waitStarted(longRun)).toBe(true)
      const stopped = await ocx2(["stop", longRun])
      expect(stopped.answer.stopped.reason, stopped.stdout).toBe("completed")
      expect(stopped.answer.output.acted).toBeDefined()
      const stoppedReplies = await world.waitEnded(longRun)
      expect(stoppedReplies.filter((m) => m.kind === "ended").map((m) => m.content.outcome)).toEqual(["stopped"])

      // run: a manual run waits for a person, and run starts it
      const manual = await ocx2(["create", "--title", `a manual run, pass ${pass}`, "--node", users.node.login, "--fields", JSON.stringify(runFields(`manual-${pass}`, undefined, { manual: true }))])
      expect(manual.answer.stopped.reason, manual.stdout).toBe("completed")
      const manualRun = manual.answer.output.run as string
      if (first) expect((await ocx2(["run", manualRun, "--dry-run"])).answer.stopped.reason).toBe("dry_run")
      const started = await ocx2(["run", manualRun])
      expect(started.answer.stopped.reason, started.stdout).toBe("completed")
      const manualEnded = await world.waitEnded(manualRun)
      expect(manualEnded.map((m) => m.kind)).toEqual(["started", "ended"])
      expect(manualEnded[1]!.content).toEqual({ outcome: "exited", exit: 0 })
      if (!first) return

      // runs, read and watch: the runs just made, each in its state; a run's record and a file of the code; a run followed to its end
      const listed = await ocx2(["runs", "--limit", "0"])
      expect(listed.answer.stopped.reason, listed.stdout).toBe("completed")
      const states = new Map((listed.answer.output.runs as Array<{ run: string; state: string; outcome?: string }>).map((r) => [r.run, r]))
      expect(states.get(run)).toMatchObject({ state: "ended", outcome: "exited" })
      expect(states.get(longRun)).toMatchObject({ state: "ended", outcome: "stopped" })
      expect(states.get(manualRun)).toMatchObject({ state: "ended", outcome: "exited" })
      const record = await ocx2(["read", run])
      expect(record.answer.output.kind).toBe("run")
      expect(record.answer.output.posts.map((p: { kind: string }) => p.kind).slice(0, 3)).toEqual(["run", "started", "ended"])
      const followed = await ocx2(["watch", run])
      expect(followed.answer.output).toMatchObject({ over: true, followed: "care directory", summary: { state: "ended", outcome: "exited" } })
      expect(followed.answer.output.events.some((e: { type: string; text?: string }) => e.type === "output" && e.text === `created-${pass}\n`)).toBe(true)

      // audit: a verdict on trunk by a reviewer (nobody audits their own check-in), read back as the served repository holds it
      const audited = await ocx2(["audit", trunk, "pass", `the shipped release, pass ${pass}`, run], { as: users.runner.login })
      expect(audited.answer.stopped.reason, audited.stdout).toBe("completed")

      // the rest as dry runs (post writes from a clone; the release tools would change this root)
      for (const args of [["post", run, "a plain reply"], ["stage", ".", "--root", world.root], ["accept"], ["rollback"], ["hook", "--node", users.node.login], ["unhook"]]) {
        const answer = (await ocx2([...args, "--dry-run"])).answer
        expect(["dry_run", "refused"], `${args.join(" ")}: ${JSON.stringify(answer.stopped)}`).toContain(answer.stopped.reason)
      }
      // attach and node have nothing to act on here: refused, named, and no crash
      const attach = await runProgram(world.program("ocx2"), ["--json", "attach", "0123456789abcdef"], { cwd: world.node.dir })
      expect(attach.code).toBe(1)
      expect(JSON.parse(attach.stdout).stopped.reason).toBe("refused")
      const nodeCall = await runProgram(world.program("ocx2"), ["--json", "--repository", world.node.repository, "node", world.node.server.url, Path.join(world.node.dir, "no-such-passwords.json")], { cwd: world.node.dir })
      expect(nodeCall.code).toBe(1)
      expect(JSON.parse(nodeCall.stdout).stopped.message).toContain("no-such-passwords.json")
    }, 240_000)
  }
})

describe("the supervisor as installed", () => {
  it("ROOT/current/ocx2-supervise, as its systemd unit starts it: status names it, a posted run is handed by it and answered once, SIGTERM ends it", async () => {
    const at = { root: world.root, repository: world.node.repository, dir: world.node.dir }
    const supervisor = await startSupervisor(at)
    try {
      const status = await ocx2(["status", "--root", world.root])
      expect(status.answer.output.supervisor).toMatchObject({ running: true, pid: supervisor.pid })
      const run = await world.node.post(runFields("supervised", undefined, {}, users.stranger.login))
      const ended = await world.waitEnded(run)
      expect(ended.map((m) => m.kind)).toEqual(["started", "ended"])
      expect(ended[1]!.content).toEqual({ outcome: "exited", exit: 0 })
      expect(supervisorLog(at).some((l) => l.pid === supervisor.pid && l.did.some((d) => d.startsWith(`${run}: handed to a watcher`)))).toBe(true)
    } finally {
      await stopSupervisor(supervisor)
    }
    expect(await supervisor.exited).toEqual({ code: 0, signal: null })
  })
})

describe("MCP as installed", () => {
  const servers = [
    { name: "ROOT/current/ocx2 --mcp", program: () => world.program("ocx2"), args: () => ["--repository", world.node.repository, "--user", users.admin.login, "--mcp"], env: () => shellEnvironment() },
    { name: "ROOT/current/ocx2-mcp", program: () => world.program("ocx2-mcp"), args: () => [], env: () => ({ ...shellEnvironment(), OCX_USER: users.admin.login, OCX_REPOSITORY: world.node.repository }) }
  ]
  for (const server of servers) {
    for (const pass of [1, 2]) {
      it(`${server.name}: list, echo, create as a dry run and for real, stop, and nothing but JSON-RPC on stdout (pass ${pass})`, async () => {
        const transport = new LineCheckingTransport(server.program(), server.args(), server.env(), world.node.dir)
        const client = new Client({ name: "ocx2-shipped-test", version: "0.0.0" })
        await client.connect(transport)
        try {
          const call = async (name: string, args: Record<string, unknown>) => {
            const result: any = await client.callTool({ name, arguments: args })
            return JSON.parse(result.content[0].text)
          }
          const listed = await client.listTools()
          expect(listed.tools.map((t) => t.name)).toEqual(expect.arrayContaining(["ocx_echo", "ocx_create", "ocx_stop"]))
          expect((await call("ocx_echo", { word: `mcp-${pass}` })).output.word).toBe(`mcp-${pass}`)
          const fields = runFields(`mcp-${pass}`, 120, {}, users.runner.login)
          const dry = await call("ocx_create", { title: "an MCP dry run", node: users.node.login, fields, dry_run: true })
          expect(dry.stopped.reason).toBe("dry_run")
          const created = await call("ocx_create", { title: `an MCP run, pass ${pass}`, node: users.node.login, fields })
          expect(created.stopped.reason, JSON.stringify(created)).toBe("completed")
          expect(created.output.acted).toMatch(actedAtOnce)
          const run = created.output.run as string
          expect(await world.waitStarted(run)).toBe(true)
          const stopped = await call("ocx_stop", { run })
          expect(stopped.stopped.reason, JSON.stringify(stopped)).toBe("completed")
          const replies = await world.waitEnded(run)
          expect(replies.filter((m) => m.kind === "ended").map((m) => m.content.outcome)).toEqual(["stopped"])
          // the reading tools, marked read-only: the run followed to its end, listed, and read with its reports
          for (const name of ["ocx_runs", "ocx_read", "ocx_watch"]) expect(listed.tools.find((t) => t.name === name)?.annotations?.readOnlyHint, name).toBe(true)
          const watched = await call("ocx_watch", { run })
          expect(watched.output).toMatchObject({ over: true, summary: { state: "ended", outcome: "stopped" } })
          const runsNow = await call("ocx_runs", { state: "over" })
          expect(runsNow.output.runs.some((r: { run: string }) => r.run === run)).toBe(true)
          const read = await call("ocx_read", { what: run })
          expect(read.output.kind).toBe("run")
        } finally {
          await client.close()
        }
        expect(transport.lines.length).toBeGreaterThan(0)
        expect(transport.notProtocol, `stderr: ${transport.stderr}`).toEqual([])
      }, 180_000)
    }
  }
})

describe("the OCX pages as installed, in Chromium", () => {
  const logIn = async (page: Page) => {
    await page.goto(`${world.node.server.url}login`)
    await page.fill("input[name=u]", users.admin.login)
    await page.fill("input[name=p]", users.admin.password)
    await Promise.all([page.waitForNavigation(), page.click("input[name=in]")])
  }
  const submit = (page: Page) => Promise.all([page.waitForNavigation(), page.click("form.ocx-form button[type=submit]")])
  const answerOf = async (page: Page) => JSON.parse((await page.locator("#ocx-answer pre.ocx-json").textContent()) ?? "")

  // One pass: the pages' program is started afresh for every page, so its first page runs it as the
  // first call after an install does (no code cache) and every later page runs it from the cache
  // that first call left; a second pass would only repeat the later pages.
  it("a person logs in, creates a run, sees it answered, creates another and stops it: the first page without the pages' code cache, the rest with it", async () => {
    // the pages' own bundle (ocx2-cgi runs it for every page but a receipt question, bin/ocx2-cgi.ts)
    const cgiCache = Path.join(world.root, "current", "ocx2-cgi-pages.cjs.cache")
    Fs.rmSync(cgiCache, { force: true })
    browser ??= await chromium.launch({
      executablePath: "/usr/bin/chromium",
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    })
    const context = await browser.newContext({ viewport: { width: 1024, height: 800 } })
    const page = await context.newPage()
    try {
      await logIn(page)
      await page.goto(world.pagesUrl)
      expect(await page.locator(".ocx").innerText()).toContain(`You act as ${users.admin.login}`)
      expect(await waitFor(async () => (Fs.existsSync(cgiCache) ? true : undefined), 10_000, 50), "the first page left the pages' code cache in ROOT/current").toBe(true)
      await page.screenshot({ path: Path.join(screenshots, `ocx-page.png`), fullPage: true })

      // a receipt question, as a clone's node asks it (layers/RemoteReceipts.ts), answered by the
      // receipt's own bundle: twice, the second time through the code cache the first left
      const receiptCache = Path.join(world.root, "current", "ocx2-cgi-receipt.cjs.cache")
      Fs.rmSync(receiptCache, { force: true })
      for (const time of [1, 2]) {
        const asked = await page.request.post(`${world.pagesUrl}/receipt`, {
          headers: { referer: `${world.pagesUrl}/receipt`, "content-type": "application/json" },
          data: JSON.stringify({ capabilities_of: users.node.login, artifacts: [world.node.trunk] })
        })
        const answer = await asked.json()
        expect(answer.stopped.reason, `question ${time}: ${JSON.stringify(answer)}`).toBe("completed")
        expect(answer.output.capabilities_of.user).toBe(users.node.login)
        expect(typeof answer.output.capabilities_of.capabilities).toBe("string")
        expect(answer.output.receipts.map((r: { hash: string }) => r.hash)).toEqual([world.node.trunk])
        if (time === 1) expect(await waitFor(async () => (Fs.existsSync(receiptCache) ? true : undefined), 10_000, 50), "the receipt's code cache").toBe(true)
      }

      await page.goto(`${world.pagesUrl}/create`)
      await page.fill("#f-title", `a run from the page`)
      await page.fill("#f-node", users.node.login)
      await page.fill("#f-fields", JSON.stringify(runFields("page", undefined, {}, users.stranger.login)))
      await submit(page)
      const created = await answerOf(page)
      expect(created.stopped.reason, JSON.stringify(created)).toBe("completed")
      expect(created.output.acted).toMatch(actedAtOnce)
      await page.screenshot({ path: Path.join(screenshots, `created.png`), fullPage: true })
      const run = created.output.run as string
      // the person sees the answer in the thread, as Fossil shows it
      const seen = await waitFor(async () => {
        await page.goto(`${world.node.server.url}forumpost/${run}`)
        return (await page.content()).includes("Ended: exited 0") ? true : undefined
      }, 60_000, 300)
      expect(seen).toBe(true)
      await page.screenshot({ path: Path.join(screenshots, `answered.png`), fullPage: true })

      await page.goto(`${world.pagesUrl}/create`)
      await page.fill("#f-title", `a long run from the page`)
      await page.fill("#f-node", users.node.login)
      await page.fill("#f-fields", JSON.stringify(runFields("page-long", 120, {}, users.stranger.login)))
      await submit(page)
      const long = (await answerOf(page)).output.run as string
      expect(await world.waitStarted(long)).toBe(true)
      await page.goto(`${world.pagesUrl}/stop`)
      await page.fill("#f-run", long)
      await submit(page)
      const stopped = await answerOf(page)
      expect(stopped.stopped.reason, JSON.stringify(stopped)).toBe("completed")
      await page.screenshot({ path: Path.join(screenshots, `stopped.png`), fullPage: true })
      const replies = await world.waitEnded(long)
      expect(replies.filter((m) => m.kind === "ended").map((m) => m.content.outcome)).toEqual(["stopped"])

      // the runs page lists both, and each links to its run page
      await page.goto(`${world.pagesUrl}/runs`)
      for (const made of [run, long]) expect(await page.locator(`tr[data-run="${made}"]`).count()).toBe(1)
      await page.screenshot({ path: Path.join(screenshots, `runs.png`), fullPage: true })
      await Promise.all([page.waitForNavigation(), page.click(`tr[data-run="${long}"] a[href*="watch"]`)])
      expect(await page.locator("#ocx-run-state").textContent()).toBe("stopped")
      await page.screenshot({ path: Path.join(screenshots, `run.png`), fullPage: true })
    } finally {
      await context.close()
    }
    console.log(`screenshots of the shipped pages: ${screenshots}`)
  }, 180_000)
})

describe("the git export as installed", () => {
  it("export through ROOT/current/ocx2, kept current by the hook, fetched from the extension root's git and git-next", async () => {
    const mirror = Path.join(world.node.dir, "mirror")
    const made = await ocx2(["export", "--mirror", mirror])
    expect(made.answer.stopped.reason, made.stdout).toBe("completed")
    const dry = await ocx2(["export", "--dry-run"])
    expect(dry.answer.stopped.reason).toBe("dry_run")
    expect(dry.answer.output.awaits).toBe("up-to-date")
    const url = `${world.node.server.url}ext/git/served.git`
    const cloned = Path.join(world.node.dir, "git-clone")
    git(["clone", "--quiet", url, cloned])
    expect(git(["rev-parse", "HEAD"], { cwd: cloned }).stdout.trim()).toBe(git(["rev-parse", "refs/heads/master"], { cwd: mirror }).stdout.trim())
    // the pre-release candidate's program serves the same export
    const next = await fetch(`${world.node.server.url}ext/git-next/served.git/info/refs?service=git-upload-pack`)
    expect(next.status).toBe(200)
    expect(Buffer.from(await next.arrayBuffer()).toString()).toContain("# service=git-upload-pack")

    // a check-in pushed to the server reaches the clone through the hook
    const clone = await cloneAs(world.node.server.url, users.admin.login, users.admin.password, Path.join(world.node.dir, "git-alice.fossil"))
    const checkout = Path.join(world.node.dir, "git-alice")
    Fs.mkdirSync(checkout)
    for (const args of [["open", clone], ["addremove"], ["commit", "--no-warnings", "-m", "shipped to git"], ["push"]]) {
      if (args[0] === "addremove") Fs.writeFileSync(Path.join(checkout, "shipped.txt"), "shipped\n")
      const r = await runFossil(args, { user: users.admin.login, cwd: checkout })
      expect(r.code, `fossil ${args.join(" ")}: ${r.stderr}`).toBe(0)
    }
    // waited for in the mirror the extension root serves (a git read, no page called), then fetched once through the pages
    const exported = await waitFor(async () =>
      git(["log", "-1", "--format=%s", "refs/heads/master"], { cwd: mirror }).stdout.trim() === "shipped to git" ? true : undefined, 60_000, 250)
    expect(exported).toBe(true)
    git(["pull", "--quiet", "--ff-only"], { cwd: cloned })
    expect(git(["log", "-1", "--format=%s"], { cwd: cloned }).stdout.trim()).toBe("shipped to git")
    expect(git(["push", "origin", "HEAD:refs/heads/master"], { cwd: cloned, allowFail: true }).code).not.toBe(0)
  }, 120_000)

  it("export and import through the installed pages and ROOT/current/ocx2: a git repository becomes a repository beside the served one", async () => {
    const alice = await webLogin(world.node.server.url, users.admin.login, users.admin.password)
    const page = `${world.pagesUrl}/export`
    const dry: any = await (await fetch(`${page}?format=json`, { headers: { Cookie: alice.cookie } })).json()
    expect(dry.stopped.reason).toBe("dry_run")
    expect(dry.output.mirror).toBe(Path.join(world.node.dir, "mirror"))

    const upstream = Path.join(world.node.dir, "upstream")
    Fs.mkdirSync(upstream)
    git(["init", "--quiet", "-b", "main"], { cwd: upstream })
    Fs.writeFileSync(Path.join(upstream, "README"), "upstream\n")
    git(["add", "README"], { cwd: upstream })
    git(["-c", "user.name=Dev", "-c", "user.email=dev@example.com", "commit", "--quiet", "-m", "upstream's first"], { cwd: upstream })
    const cliDry = await ocx2(["import", upstream, "fromcli", "--dry-run"])
    expect(cliDry.answer.stopped.reason).toBe("dry_run")
    expect(Fs.existsSync(Path.join(world.node.dir, "fromcli.fossil"))).toBe(false)

    const made = await fetch(`${world.pagesUrl}/import`, {
      method: "POST",
      headers: { Cookie: alice.cookie, "Content-Type": "application/x-www-form-urlencoded", Referer: `${world.pagesUrl}/import` },
      body: new URLSearchParams({ upstream, name: "fromweb", format: "json" }).toString()
    })
    const answer: any = await made.json()
    expect(answer.stopped, JSON.stringify(answer)).toEqual({ reason: "completed" })
    expect(answer.output).toMatchObject({ repository: Path.join(Fs.realpathSync(world.node.dir), "fromweb.fossil"), trunk: "main", admin: users.admin.login })
    expect(git(["rev-parse", "refs/heads/main"], { cwd: answer.output.mirror }).stdout.trim()).toBe(git(["rev-parse", "main"], { cwd: upstream }).stdout.trim())
    // the import started a poller for the new repository, as the served one has (hook --fast)
    for (const pid of pidsNaming(answer.output.repository)) {
      try {
        process.kill(pid, "SIGKILL")
      } catch { /* gone */ }
    }
  }, 120_000)
})

describe("the tool-container server as installed", () => {
  it("ocx2-containers token and serve, and ocx2 containers as a person runs it, twice (the second with the client's code cache)", async () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-shipped-containers-"))
    const root = Path.join(dir, "root")
    const minted = await runProgram(world.program("ocx2-containers"), ["token", "alice", "--root", root], { cwd: dir })
    expect(minted.code, minted.stderr).toBe(0)
    Fs.writeFileSync(Path.join(dir, "token"), minted.stdout)
    const server = ChildProcess.spawn(world.program("ocx2-containers"), ["serve", "--root", root, "--listen", "127.0.0.1:0", "--deployer", "in-process"], {
      cwd: dir,
      env: shellEnvironment(),
      stdio: ["ignore", "pipe", "pipe"]
    })
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = ""
        server.stdout!.on("data", (d: Buffer) => {
          out += d.toString()
          const m = /listening on (\S+)\n/.exec(out)
          if (m !== null) resolve(m[1]!)
        })
        server.once("exit", (code) => reject(new Error(`ocx2-containers exited ${String(code)}`)))
      })
      const common = ["--server", url, "--token-file", Path.join(dir, "token")]
      const { digest, image } = makeImage("tests/tool")
      const blobs = Path.join(dir, "layout", "blobs", "sha256")
      Fs.mkdirSync(blobs, { recursive: true })
      Fs.writeFileSync(Path.join(blobs, digest.slice(7)), image.manifest)
      for (const [d, bytes] of image.blobs) Fs.writeFileSync(Path.join(blobs, d.slice(7)), bytes)
      // a command among the others: in the installed program's help, its own help, and its dry run
      const help = await runProgram(world.program("ocx2"), ["--help"], { cwd: dir })
      expect(help.stdout).toMatch(/^ {2}- containers +Run a tool container/m)
      const own = await runProgram(world.program("ocx2"), ["containers", "--help"], { cwd: dir })
      expect(own.code, own.stderr).toBe(0)
      expect(own.stdout).toContain("--token-file TOKEN-FILE")
      const dry = await runProgram(world.program("ocx2"), ["containers", "run", `tests/tool@${digest}`, "--layout", Path.join(dir, "layout"), "--dry-run", ...common], { cwd: dir })
      expect(dry.code, dry.stderr).toBe(0)
      expect(dry.stdout).toContain(`"image":"${digest}"`)
      expect(dry.stdout).toContain("nothing was done (a dry run)")
      for (const pass of [1, 2]) {
        const version = await runProgram(world.program("ocx2"), ["containers", "version", ...common], { cwd: dir })
        expect(version.code, version.stderr).toBe(0)
        expect(version.stderr).toBe("")
        expect(JSON.parse(version.stdout).version).toBe("ocx2-containers 1")
        const created = await runProgram(world.program("ocx2"), ["containers", "volume-create", `v${pass}`, "persistent", ...common], { cwd: dir })
        expect(created.code, created.stderr).toBe(0)
        const run = ChildProcess.spawn(world.program("ocx2"), ["containers", "run", `tests/tool@${digest}`, "--layout", Path.join(dir, "layout"), "--volume", `v${pass}:/data:persistent`, ...common], {
          cwd: dir,
          env: shellEnvironment(),
          stdio: ["ignore", "pipe", "pipe"]
        })
        let out = ""
        run.stdout!.on("data", (d: Buffer) => (out += d.toString()))
        expect(await waitFor(async () => (/^id \S+\n/.test(out) ? true : undefined), 60_000, 20)).toBe(true)
        run.kill("SIGINT")
        expect(await new Promise((resolve) => run.once("exit", resolve))).toBe(0)
        expect(out).toMatch(/^id [A-Za-z0-9_-]{43}\nended\n$/)
      }
      expect(cacheFiles()).toContain("ocx2-containers-client.cjs.cache")
    } finally {
      server.kill("SIGTERM")
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 120_000)

  it("serve --deployer bwrap from the release: real containers of a busybox image with a FUSE mount and a volume, twice (the second the spare, its volume bound as it is taken), nothing left after", async () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-shipped-bwrap-"))
    const root = Path.join(dir, "root")
    const minted = await runProgram(world.program("ocx2-containers"), ["token", "alice", "--root", root], { cwd: dir })
    expect(minted.code, minted.stderr).toBe(0)
    Fs.writeFileSync(Path.join(dir, "token"), minted.stdout)
    // the proxy, its code and the static relay, volume binder and FUSE helper are found beside the installed server
    for (const beside of ["ocx2-container-proxy", "ocx2-container-proxy.cjs", "ocx2-container-relay", "ocx2-container-volumes", "fusemountfd"]) {
      expect(Fs.existsSync(Path.join(Path.dirname(world.program("ocx2-containers")), beside)), beside).toBe(true)
    }
    const server = ChildProcess.spawn(world.program("ocx2-containers"), ["serve", "--root", root, "--listen", "127.0.0.1:0", "--deployer", "bwrap"], {
      cwd: dir,
      env: shellEnvironment(),
      stdio: ["ignore", "pipe", "pipe"]
    })
    let serverErr = ""
    server.stderr!.on("data", (d: Buffer) => (serverErr += d.toString()))
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = ""
        server.stdout!.on("data", (d: Buffer) => {
          out += d.toString()
          const m = /listening on (\S+)\n/.exec(out)
          if (m !== null) resolve(m[1]!)
        })
        server.once("exit", (code) => reject(new Error(`ocx2-containers exited ${String(code)}: ${serverErr}`)))
      })
      const applets = ["sh", "cat", "grep", "sleep", "wget"]
      const image = buildImage([[
        { path: "bin/", type: "directory" },
        { path: "bin/busybox", type: "file", content: Fs.readFileSync("/bin/busybox"), mode: 0o755 },
        ...applets.map((a) => ({ path: `bin/${a}`, type: "symlink" as const, target: "busybox" })),
        { path: "etc/", type: "directory" },
        { path: "tmp/", type: "directory", mode: 0o1777 }
      ]], {
        run: {
          Entrypoint: ["/bin/sh", "-c"],
          Cmd: ["echo ran >> /data/runs; until grep -q ' /etc/token ' /proc/mounts; do sleep 0.05; done; wget -q -O /dev/null --post-data \"token=$(cat /etc/token)\" http://127.0.0.1:14978/ask/17"],
          Env: ["PATH=/bin"]
        }
      })
      image.writeLayout(Path.join(dir, "layout"))
      const created = await runProgram(world.program("ocx2"), ["containers", "volume-create", "data", "persistent", "--server", url, "--token-file", Path.join(dir, "token")], { cwd: dir })
      expect(created.code, created.stderr).toBe(0)
      let spareOfPass1: string | undefined
      for (const pass of [1, 2]) {
        Fs.writeFileSync(Path.join(dir, "token-file"), `t0ken${pass}`)
        const run = await runProgram(world.program("ocx2"), ["containers", "run", `tests/tool@${image.digest}`, "--layout", Path.join(dir, "layout"),
          "--fuse-file", `token:/etc/token:${Path.join(dir, "token-file")}`, "--volume", "data:/data:persistent", "--server", url, "--token-file", Path.join(dir, "token")], { cwd: dir })
        expect(run.code, `${run.stderr}\n${serverErr}`).toBe(0)
        expect(run.stdout).toMatch(/^id \S+$/m)
        expect(run.stdout).toContain(`ask 17 ${Buffer.from(`token=t0ken${pass}`).toString("base64")} (answered with nothing)`)
        expect(run.stdout).toMatch(/^ended$/m)
        // the run's container is gone; the spare stood up for the next run of the image may stand
        expect(await waitFor(async () => (containersUnder(root).every((c) => c.spare) ? true : undefined), 60_000, 20)).toBe(true)
        if (pass === 1) {
          // the spare the second run takes, volume and all (ocx2-container-volumes, installed beside the server)
          const spares = await waitFor(async () => (containersUnder(root).length === 1 ? containersUnder(root) : undefined), 60_000, 20)
          spareOfPass1 = spares?.[0]?.name
        }
      }
      expect(spareOfPass1).toBeDefined()
      expect(containersUnder(root).map((c) => c.name)).not.toContain(spareOfPass1)
      expect(serverErr).not.toContain("a spare was not taken")
      expect(Fs.readFileSync(Path.join(root, "volumes", "alice", "data", "data", "runs"), "utf8")).toBe("ran\nran\n")
      // the kit carries the proxy's code cache, made as it was built
      const kits = Fs.readdirSync(Path.join(root, "proxy-kit")).filter((k) => !k.startsWith("."))
      expect(kits.map((k) => Fs.existsSync(Path.join(root, "proxy-kit", k, "proxy.cjs.cache")))).toEqual([true])
      server.kill("SIGTERM")
      expect(await new Promise((resolve) => server.once("exit", resolve))).toBe(0)
      expect(Fs.readdirSync(Path.join(root, "containers"))).toEqual([])
      expect(leftovers(root)).toEqual([])
    } finally {
      server.kill("SIGKILL")
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 240_000)
})
