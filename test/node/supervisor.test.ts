import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import BetterSqlite3 from "better-sqlite3"
import { flockHeld } from "../../src/care/FlockHeld.js"
import { cursorFileOf, lastHookLogEntry, readCursor } from "../../src/root/HookFiles.js"
import { hook } from "../../src/tools/hook.js"
import { unhook } from "../../src/tools/unhook.js"
import { webLogin, webNewThread, type WebSession } from "../support/fossilServer.js"
import { users } from "../support/nodeWorld.js"
import { closeHookWorld, countingRuns, makeHookWorld, waitFor, type HookWorld } from "./hookWorld.js"
import { answeredLostBy, startSupervisor, stopSupervisor, supervisorInfo, supervisorLog, type RunningSupervisor } from "./supervisorWorld.js"

// The node's supervisor (`ocx2 supervise`), as installed: the staged release root's program, a
// real fossil server whose backoffice runs no hook by itself here (Fossil's default backoffice, and
// runs posted through the web form, whose 302 starts none), real bubblewrap sandboxes. What starts
// a run here is the supervisor hearing the receipt through inotify, or nothing.

let world: HookWorld
let alice: WebSession
let supervisor: RunningSupervisor | undefined
beforeAll(async () => {
  world = await makeHookWorld({ fastHooks: false })
  const installed = await world.call(hook, { node: users.node.login, root: world.root })
  expect(installed.stopped).toEqual({ reason: "completed" })
  alice = await webLogin(world.server.url, users.admin.login, users.admin.password)
  supervisor = await startSupervisor(world)
}, 90_000)
afterAll(async () => {
  await stopSupervisor(supervisor)
  await closeHookWorld(world)
})

const post = (run: object) => webNewThread(world.server, alice, { title: "a run", text: world.runText(run) })
const { counting, launched, holder } = countingRuns(() => world)
const answers = async (run: string) =>
  (await world.waitEnded(run, 90_000)).filter((m) => m.kind === "started" || m.kind === "ended")
    .map((m) => [m.kind, m.sender, m.kind === "ended" ? (m.content as { outcome: string }).outcome : ""])
const alive = (pid: number) => Fs.existsSync(`/proc/${pid}`)

describe("the node's supervisor", () => {
  it("hears a run received with no hook called, and starts it; the hook, called, only wakes it", async () => {
    // no hook at all: only inotify can tell the supervisor
    expect((await world.call(unhook, { root: world.root })).output?.removed.length).toBe(1)
    const hooked = lastHookLogEntry(Path.join(world.root, "node", "hook.log"))
    const run = await post(counting("true"))
    expect(await answers(run)).toEqual([["started", "lab", ""], ["ended", "lab", "exited"]])
    expect(launched(run)).toBe(1)
    expect(lastHookLogEntry(Path.join(world.root, "node", "hook.log"))).toEqual(hooked)
    expect(supervisorLog(world).some((l) => l.pid === supervisor!.pid && l.did.some((d) => d.startsWith(`${run}: handed to a watcher`)))).toBe(true)
    expect((await world.call(hook, { root: world.root })).output?.hook).toBe("installed")

    // the hook as Fossil runs it: it wakes the supervisor and decides nothing itself
    const hookRun = ChildProcess.spawnSync(Path.join(world.root, "ocx2-hook"), ["--log", Path.join(world.root, "node", "hook.log"), world.repository], {
      input: `${run} forum post\n`
    })
    expect(hookRun.status).toBe(0)
    const entry = lastHookLogEntry(Path.join(world.root, "node", "hook.log"))
    expect(entry?.did).toEqual([`woke the node's supervisor (pid ${supervisor!.pid}), which decides what arrived`])
  }, 180_000)

  it("status, as installed, says it runs, its pid and the watchers it holds", async () => {
    const run = await post(counting("sleep 30", users.runner.login))
    await world.waitFor("the supervisor launches the run's watcher, once", () => (launched(run) === 1 ? true : undefined), { ms: 30_000, run })
    const watcher = holder(run)
    await waitFor(() => (supervisorInfo(world)?.watchers[run] === watcher ? true : undefined), 10_000, 50)
    const status = ChildProcess.spawnSync(Path.join(world.root, "current", "ocx2"), ["--json", "--repository", world.repository, "status", "--root", world.root], { encoding: "utf8" })
    expect(status.status, status.stderr).toBe(0)
    const shown = JSON.parse(status.stdout).output.supervisor
    expect(shown.running).toBe(true)
    expect(shown.pid).toBe(supervisor!.pid)
    expect(shown.watchers).toContainEqual({ run, pid: watcher })
    expect(shown.words).toMatch(/^pid \d+, since /)
    // and its end is seen: answered in its thread by the watcher, then gone from the roll
    process.kill(watcher, "SIGTERM")
    expect((await answers(run)).map(([kind]) => kind)).toEqual(["started", "ended"])
    await world.waitFor("the supervisor's roll drops the run's watcher", () => (supervisorInfo(world)?.watchers[run] === undefined ? true : undefined), { ms: 10_000, every: 50, run })
  }, 180_000)

  it("passes a message for no run of its node without round.lock: the lock held, its cursor still moves past it", async () => {
    // a run for another node holds a message (the cheap question cannot tell), yet nothing this node decides
    const cursorFile = cursorFileOf(world.root, world.repository, users.node.login)
    const roundLock = Path.join(world.root, "care", "round.lock")
    // flock holds the lock (--close: not its cat) until the cat ends, when its input is closed
    const holding = ChildProcess.spawn("flock", ["--exclusive", "--close", roundLock, "cat"], { stdio: ["pipe", "ignore", "ignore"] })
    const released = new Promise((resolve) => holding.once("exit", resolve))
    try {
      await waitFor(() => (flockHeld(roundLock) === "held" ? true : undefined), 10_000, 20)
      const other = await webNewThread(world.server, alice, { title: "a run for another node", text: world.runText(counting("true"), "elsewhere") })
      const db = new BetterSqlite3(world.repository, { readonly: true, fileMustExist: true })
      const at = db.prepare("SELECT rcvid, rid FROM blob WHERE uuid = ?").get(other) as { rcvid: number; rid: number }
      db.close()
      // a round waiting for the lock fails after 10 s and leaves the cursor where it was, as long as the lock is held
      const passed = await waitFor(() => {
        const cursor = readCursor(cursorFile)
        return cursor !== undefined && (cursor.rcvid > at.rcvid || (cursor.rcvid === at.rcvid && cursor.rid >= at.rid)) ? true : undefined
      }, 20_000, 50)
      expect(passed).toBe(true)
    } finally {
      holding.stdin!.end()
      await released
    }
  }, 120_000)

  it("a watcher SIGKILLed is answered lost at once, without a restart, and its process user's waiting run starts", async () => {
    const user = users.builder.login
    const killed = await post(counting("sleep 60", user))
    await world.waitFor("the supervisor launches the run's watcher, once", () => (launched(killed) === 1 ? true : undefined), { ms: 30_000, run: killed })
    const waiting = await post(counting("true", user))
    await world.waitFor("the second run of the process user waits (care/~USER.waiting)", () => (Fs.existsSync(Path.join(world.root, "care", `~${user}.waiting`)) ? true : undefined), { ms: 20_000, every: 50 })
    const watcher = holder(killed)
    await waitFor(() => (supervisorInfo(world)?.watchers[killed] === watcher ? true : undefined), 10_000, 50)
    process.kill(watcher, "SIGKILL")
    expect(await answers(killed)).toEqual([["started", "lab", ""], ["ended", "lab", "lost"]])
    expect(await answers(waiting)).toEqual([["started", "lab", ""], ["ended", "lab", "exited"]])
    expect(launched(killed)).toBe(1)
    expect(launched(waiting)).toBe(1)
    expect(await waitFor(() => answeredLostBy(world, supervisor!.pid, killed) || undefined, 30_000, 50),
      JSON.stringify(supervisorLog(world).filter((l) => l.run === killed || l.did.some((d) => d.includes(killed))))).toBe(true)
    expect(alive(supervisor!.pid)).toBe(true)
  }, 180_000)

  it("a watcher that died before started has its run decided again; a process user's holder gone, its waiting run starts", async () => {
    const user = users.stranger.login
    // another run of the user's holds its lock: the posted run waits for it
    const userLock = Path.join(world.root, "care", `~${user}.lock`)
    // its own process group: flock and the sleep that inherits its lock end together
    const holding = ChildProcess.spawn("flock", ["--exclusive", userLock, "sleep", "600"], { stdio: "ignore", detached: true })
    await waitFor(() => (ChildProcess.spawnSync("flock", ["--nonblock", userLock, "true"]).status === 1 ? true : undefined), 10_000, 50)
    const run = await post(counting("true", user))
    await world.waitFor("the run waits for its process user's lock (care/~USER.waiting)", () => (Fs.existsSync(Path.join(world.root, "care", `~${user}.waiting`)) ? true : undefined), { ms: 20_000, every: 50 })
    // a watcher for it dies the moment it holds the run, before anything else
    const crashed = ChildProcess.spawnSync(process.execPath, [Path.join(world.root, "current", "ocx2-watcher"),
      "--root", world.root, "--repository", world.repository, "--node", users.node.login, "--run", run], {
      env: { ...process.env, OCX2_CRASH_AT: "locked" }
    })
    expect(crashed.signal).toBe("SIGKILL")
    const decided = await waitFor(() => supervisorLog(world).find((l) => l.run === run), 10_000, 50)
    expect(decided?.did[0]).toMatch(/^waits/)
    expect((await world.replies(run)).length).toBe(0)
    // the holder ends without waking anyone: the supervisor hands the waiting run on
    process.kill(-holding.pid!, "SIGKILL")
    expect(await answers(run)).toEqual([["started", "lab", ""], ["ended", "lab", "exited"]])
    expect(launched(run)).toBe(1)
  }, 180_000)

  it("watchers outlive it; started again, it takes them back, and the runs end once", async () => {
    const run = await post(counting("sleep 4", users.runner.login))
    await world.waitFor("the supervisor launches the run's watcher, once", () => (launched(run) === 1 ? true : undefined), { ms: 30_000, run })
    const watcher = holder(run)
    process.kill(supervisor!.pid, "SIGKILL")
    await supervisor!.exited
    expect(alive(watcher)).toBe(true)
    supervisor = await startSupervisor(world)
    expect(supervisorInfo(world)?.watchers[run]).toBe(watcher)
    expect(supervisorLog(world).some((l) => l.pid === supervisor!.pid && l.did.some((d) => / decided; \d+ live watchers? taken back$/.test(d)))).toBe(true)
    expect(await answers(run)).toEqual([["started", "lab", ""], ["ended", "lab", "exited"]])
    expect(launched(run)).toBe(1)
  }, 180_000)

  it("stopped, it says so, and the hook does the rounds itself again", async () => {
    await stopSupervisor(supervisor)
    supervisor = undefined
    expect(supervisorInfo(world)).toBeUndefined()
    const again = await startSupervisor(world)
    // the installed program's #! line gives Node the options, and malloc the settings, that keep the
    // resident process small (bench/pickup measures its peak RSS against a bare node's), whoever starts it
    expect(Fs.readFileSync(`/proc/${again.pid}/cmdline`, "utf8").split("\0")).toEqual(expect.arrayContaining(["--max-semi-space-size=1", "--no-opt", "--single-threaded", "--v8-pool-size=1", "--optimize-for-size"]))
    expect(Fs.readFileSync(`/proc/${again.pid}/environ`, "utf8").split("\0")).toEqual(expect.arrayContaining(["MALLOC_ARENA_MAX=2", "MALLOC_MMAP_THRESHOLD_=65536", "MALLOC_TRIM_THRESHOLD_=65536"]))
    const refused = ChildProcess.spawnSync(Path.join(world.root, "current", "ocx2"), ["supervise", "--node", users.node.login, "--root", world.root], { encoding: "utf8" })
    // a refusal, not a wrong command line: 1 (2 is for usage alone)
    expect(refused.status).toBe(1)
    expect(refused.stderr).toContain(`a supervisor already runs for lab on ${world.repository} (pid ${again.pid})`)
    supervisor = again
    // as installed, it is listed with the tools, and --dry-run says what it would supervise and starts nothing
    const ocx2 = Path.join(world.root, "current", "ocx2")
    expect(ChildProcess.spawnSync(ocx2, ["--help"], { encoding: "utf8" }).stdout).toMatch(/^\s+- supervise\s+Run the node's resident supervisor/m)
    expect(ChildProcess.spawnSync(ocx2, ["supervise", "--help"], { encoding: "utf8" }).stdout).toContain("usage: ocx2 supervise --node NODE")
    const dry = ChildProcess.spawnSync(ocx2, ["supervise", "--node", users.node.login, "--root", world.root, "--dry-run"], { encoding: "utf8" })
    expect(dry.status, dry.stderr).toBe(0)
    expect(dry.stdout).toContain(`would supervise the node lab of ${world.repository} under ${world.root} (its receipts heard through inotify); pid ${again.pid} may already supervise it`)
    expect(supervisorInfo(world)?.pid).toBe(again.pid)
  }, 120_000)
})
