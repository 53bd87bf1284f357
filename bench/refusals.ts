/**
 * What refuses people's posts (issue 13 item 3; docs/locks.md):
 * `npm run bench -- refusals [--runs N] [--alone SECONDS] [--fossil-poller]`.
 *
 * bench/load's setting (a served repository in fast mode with the node's hook, two people replying
 * through the web form every 100 ms each, tried once) for SECONDS with no runs, then during N runs
 * of one process user posted at once; meanwhile the kernel records every fcntl lock request on the
 * host (perf, tracepoints filelock:fcntl_setlk and locks_remove_posix, and sched fork and exec for
 * each process's ancestry). Then each failed transaction on the repository (a process holding
 * SHARED refused RESERVED, never taking it after: SQLite's refusal without the busy handler) is
 * attributed to the processes that held RESERVED, PENDING or EXCLUSIVE at that instant: the
 * server's requests (people, pushes), Fossil's backoffice, the node's writes, its read commands.
 *
 * Fast mode's poller is the node's (`ROOT/ocx2-hook --poll REPO`, each backoffice exclusive); with
 * --fossil-poller, Fossil's own (`fossil backoffice --poll 1 REPO`), as before the node had one.
 * Needs root and perf (the kernel's tracepoints). Everything else as bench/load: loopback, temporary.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { composeForumPost, type Artifact } from "../src/fossil/Artifact.js"
import { hook } from "../src/tools/hook.js"
import { cloneAs, fossil, freePort, pushArtifacts, serviceEnvironment, webLogin, webNewThread, webReplyOnce, type WebSession } from "../test/support/fossilServer.js"
import { shellRun, users } from "../test/support/nodeWorld.js"
import { endWatchers, makeHookWorld, sleep, type HookWorld } from "../test/node/hookWorld.js"
import { startLockTrace, traceUnavailable } from "./support/lockTrace.js"

const args = process.argv.slice(2)
const option = (name: string) => {
  const i = args.indexOf(name)
  return i === -1 ? undefined : args[i + 1]
}
const runs = Number(option("--runs") ?? 50)
const aloneSeconds = Number(option("--alone") ?? 10)
const fossilPoller = args.includes("--fossil-poller")

const unavailable = traceUnavailable()
if (unavailable !== undefined) {
  console.error(`refusals ${unavailable}`)
  process.exit(2)
}

interface Post { readonly phase: string; readonly failed: string | undefined }
const posts: Array<Post> = []
const people = (url: string, repository: string, sessions: ReadonlyArray<WebSession>, thread: string, phase: string) => {
  let going = true
  const one = async (session: WebSession) => {
    while (going) {
      const t0 = Date.now()
      const r = await webReplyOnce({ repository }, session, { to: thread, text: `${session.user} says hello` })
        .catch((e: unknown) => ({ status: 0, body: `no answer: ${String(e)}`, hash: undefined }))
      posts.push({ phase, failed: r.hash === undefined ? r.body.replace(/<[^>]*>/g, " ").replace(/\s+/g, " ").replace(/^.*Logout/, "").trim().slice(0, 90) : undefined })
      await sleep(Math.max(0, 100 - (Date.now() - t0)))
    }
  }
  const done = Promise.all(sessions.map(one))
  return async () => {
    going = false
    await done
  }
}

const allEnded = async (world: HookWorld, hashes: ReadonlyArray<string>, boundMs: number) => {
  const ended = new Set<string>()
  const deadline = Date.now() + boundMs
  while (ended.size < hashes.length && Date.now() < deadline) {
    for (const run of hashes) if (!ended.has(run) && (await world.replies(run)).some((m) => m.kind === "ended")) ended.add(run)
    if (ended.size < hashes.length) await sleep(500)
  }
  return ended.size
}

const trace = await startLockTrace()
const world = await makeHookWorld({ fastHooks: false })
await world.server.stop()
const repository = world.repository
const phases: Array<{ readonly name: string; readonly t0: number; readonly t1: number }> = []
const children: Array<ChildProcess.ChildProcess> = []
let ino = 0
try {
  ino = Fs.statSync(repository).ino
  await fossil(["settings", "backoffice-disable", "on", "-R", repository])
  const spawn = (program: string, argv: ReadonlyArray<string>) => {
    const child = ChildProcess.spawn(program, [...argv], { cwd: "/", detached: true, stdio: "ignore", env: serviceEnvironment() })
    children.push(child)
    return child
  }
  if (fossilPoller) spawn("fossil", ["backoffice", "--poll", "1", repository])
  else spawn(Path.join(world.root, "ocx2-hook"), ["--poll", repository])
  const poller = children[0]!.pid!
  const port = await freePort()
  const server = spawn("fossil", ["server", "--nojail", "--localhost", "--port", String(port), repository]).pid!
  const url = `http://127.0.0.1:${port}/`
  for (let i = 0; ; i++) {
    try {
      await (await fetch(url + "robots.txt")).arrayBuffer()
      break
    } catch {
      if (i > 200) throw new Error("the server did not answer")
      await sleep(50)
    }
  }
  const installed = await world.call(hook, { node: users.node.login, root: world.root })
  if (installed.stopped.reason !== "completed") throw new Error(`hook: ${installed.stopped.message}`)
  const clones = await Promise.all(["a", "b"].map((n) => cloneAs(url, users.admin.login, users.admin.password, Path.join(world.dir, `alice-${n}.fossil`))))
  const thread = await webNewThread({ repository }, await webLogin(url, users.admin.login, users.admin.password), { title: "people talking", text: "replies" })
  const sessions = await Promise.all([users.runner, users.stranger].map((u) => webLogin(url, u.login, u.password)))

  let t0 = Date.now()
  let stop = people(url, repository, sessions, thread, "alone")
  await sleep(aloneSeconds * 1000)
  await stop()
  phases.push({ name: "alone", t0, t1: Date.now() })

  t0 = Date.now()
  stop = people(url, repository, sessions, thread, "burst")
  const artifacts: ReadonlyArray<Artifact> = Array.from({ length: runs }, (_, i) =>
    composeForumPost({ date: new Date(Date.now() + i), user: users.admin.login, title: `run ${i}`, text: world.runText(shellRun(world, `echo ${i}`)) }))
  const half = Math.ceil(runs / 2)
  await Promise.all([pushArtifacts(clones[0]!, users.admin.login, artifacts.slice(0, half)), pushArtifacts(clones[1]!, users.admin.login, artifacts.slice(half))])
  const ended = await allEnded(world, artifacts.map((a) => a.hash), 240_000)
  await stop()
  phases.push({ name: "burst", t0, t1: Date.now() })
  await sleep(1000)

  // ---------- the kernel's record, read back ----------
  const failedTransactions = await trace.stop(ino, new Map([[server, "SERVER"], [poller, "POLLER"], [process.pid, "BENCH"]]))
  const kind = (c: string) => {
    if (c === "SERVER") return "a request of the server"
    // Fossil's poller runs each backoffice through sh; the node's through flock
    if (/^POLLER(>sh|>flock)?>fossil$/.test(c)) return "Fossil's backoffice"
    if (/>fossil$/.test(c) && c.startsWith("POLLER")) return "the node's fossil (a write, or whatis/tarball)"
    if (c === "POLLER") return "the node's poller (its read of the hook's cursor)"
    if (c.startsWith("POLLER")) return "the node (better-sqlite3)"
    return c.startsWith("BENCH") ? "the bench" : `another process (${c})`
  }
  const phaseOf = (t: number) => phases.find((p) => t >= p.t0 && t <= p.t1)?.name ?? "between"
  console.log(`fast mode's poller: ${fossilPoller ? "Fossil's own, fossil backoffice --poll 1" : "the node's, ocx2-hook --poll (each backoffice exclusive)"}; ${ended}/${runs} runs ended; load average ${Os.loadavg().map((l) => l.toFixed(1)).join(" ")}`)
  for (const p of phases) {
    const mine = posts.filter((x) => x.phase === p.name)
    const failed = mine.filter((x) => x.failed !== undefined)
    console.log(`${p.name === "alone" ? `two people alone for ${aloneSeconds} s` : `during ${runs} runs of one process user`}: people's posts ${mine.length}, failed ${failed.length}` +
      `${failed.length > 0 ? ` (${failed[0]!.failed})` : ""}`)
    const table = new Map<string, number>()
    for (const r of failedTransactions.filter((x) => phaseOf(x.t) === p.name)) {
      const key = `${kind(r.chain)} refused by ${r.holders.map((h) => kind(h.chain)).join(" + ") || "(no writer seen)"}`
      table.set(key, (table.get(key) ?? 0) + 1)
    }
    for (const [key, n] of [...table].sort((a, b) => b[1] - a[1])) console.log(`  ${String(n).padStart(4)} failed transactions: ${key}`)
  }
} finally {
  await trace.stop(0, new Map()).catch(() => undefined)
  endWatchers(world.root)
  for (const c of children) {
    try {
      process.kill(-c.pid!, "SIGKILL")
    } catch { /* gone */ }
  }
  await world.close()
}
