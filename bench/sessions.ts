/**
 * Sessions at scale (issue 42): `npm run bench -- sessions [--s 50,200] [--thread 5000]`.
 *
 * For each S: a served repository in fast mode, its node started with `hook --node` and its
 * supervisor (`ocx2 supervise`, as installed) running, S process users, and S session runs posted
 * in one push from alice's clone (after two runs that end, whose watchers write the watcher's code
 * cache under the watchers' Node options, as a node's earlier runs have), each process stamping
 * every line it reads with the clock (perl, one process, no fork per line). Once every session is
 * live it prints:
 *  - the watchers' memory from /proc/PID/smaps_rollup (proportional, private, resident: median,
 *    largest and the sum) and the supervisor's;
 *  - from a post's receipt (rcvfrom.mtime) to its line on the session's stdin, for one push holding
 *    a reply in each of the S threads (three times): median, p95 and the last of all S;
 *  - a round's time against the number of new arrivals (1, 10, 50, S replies in one receipt, each in
 *    another session's thread): from the receipt to the supervisor's log line of the round that
 *    delivered them (its log says when a round ended, not when it began: the wake-up and the cheap
 *    question are in the figure too).
 * Then (with --thread N, default 5000; 0 skips it) one more session whose thread grows to N posts,
 * pushed 100 to a receipt; at 100, 1,000 and N posts, five single replies: the round's time and
 * the post-to-line time (median), and the watcher's memory. The load average is printed beside
 * every figure. Everything listens on 127.0.0.1 and lives in a temporary directory, removed at the end.
 */
import BetterSqlite3 from "better-sqlite3"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { composeForumPost, type Artifact } from "../src/fossil/Artifact.js"
import { hook } from "../src/tools/hook.js"
import { supervisorFilesOf } from "../src/root/SupervisorFiles.js"
import { addUsers, cloneAs, pushArtifacts } from "../test/support/fossilServer.js"
import { shellRun, users } from "../test/support/nodeWorld.js"
import { endWatchers, explain, makeHookWorld, sleep, waitFor, type HookWorld } from "../test/node/hookWorld.js"
import { startSupervisor, stopSupervisor } from "../test/node/supervisorWorld.js"

const usage = "usage: npm run bench -- sessions [--s N[,N...]] [--thread N (0, or at least 1000)]"
const argv = process.argv.slice(2)
const argOf = (name: string) => {
  const i = argv.indexOf(name)
  return i >= 0 ? argv[i + 1] : undefined
}
const sizes = (argOf("--s") ?? "50,200").split(",").map(Number)
const threadPosts = Number(argOf("--thread") ?? 5000)
if (sizes.some((s) => !Number.isInteger(s) || s < 1) || !Number.isInteger(threadPosts) || (threadPosts !== 0 && threadPosts < 1000)) {
  console.error(usage)
  process.exit(2)
}

const load = () => `load ${Os.loadavg().map((l) => l.toFixed(1)).join(" ")}`
const quantile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!
}
const mb = (kb: number) => (kb / 1024).toFixed(1)

/** Pss, private (clean + dirty) and Rss of a process, kB, from /proc/PID/smaps_rollup. */
const memoryOf = (pid: number): { pss: number; priv: number; rss: number } | undefined => {
  try {
    const text = Fs.readFileSync(`/proc/${pid}/smaps_rollup`, "utf8")
    const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(text)?.[1] ?? 0)
    return { pss: kb("Pss"), priv: kb("Private_Clean") + kb("Private_Dirty"), rss: kb("Rss") }
  } catch {
    return undefined
  }
}
const describeMemory = (what: string, pids: ReadonlyArray<number>) => {
  const all = pids.map(memoryOf).filter((m) => m !== undefined)
  const row = (name: "pss" | "priv" | "rss") => {
    const xs = all.map((m) => m[name])
    return `median ${mb(quantile(xs, 0.5))}, largest ${mb(Math.max(...xs))}, sum ${mb(xs.reduce((a, b) => a + b, 0))}`
  }
  console.log(`  ${what} (${all.length} processes), MB: proportional ${row("pss")}; private ${row("priv")}; resident ${row("rss")}; ${load()}`)
}

const processUserOf = (i: number) => `session-${i}`
// each line read is written with the moment it was read (ms), by one process
const stamp = "exec perl -MTime::HiRes=time -ne 'BEGIN { $| = 1 } printf \"%d %s\", time * 1000, $_' > $$workspace$$/lines"

interface Live {
  readonly world: HookWorld
  readonly clone: string
  readonly runs: Array<string>
  readonly supervisorPid: number
  readonly stop: () => Promise<void>
}

const linesFile = (world: HookWorld, run: string) => Path.join(world.root, "work", run, "lines")
/** the moment each post was stamped by the session's process, by hash */
const stampsOf = (world: HookWorld, run: string): Map<string, number> => {
  const out = new Map<string, number>()
  let text: string
  try {
    text = Fs.readFileSync(linesFile(world, run), "utf8")
  } catch {
    return out
  }
  for (const line of text.split("\n")) {
    const hash = /"post":"([0-9a-f]{64})"/.exec(line)?.[1]
    if (hash !== undefined) out.set(hash, Number(line.slice(0, line.indexOf(" "))))
  }
  return out
}
const watcherPid = (world: HookWorld, run: string): number | undefined => {
  try {
    const pid = Number(Fs.readFileSync(Path.join(world.root, "care", `${run}.lock`), "utf8").trim())
    return Number.isInteger(pid) && pid > 0 ? pid : undefined
  } catch {
    return undefined
  }
}
const sessionStarted = (world: HookWorld, run: string): boolean => {
  try {
    return JSON.parse(Fs.readFileSync(Path.join(world.root, "care", `${run}.session`), "utf8")).started !== undefined && Fs.existsSync(linesFile(world, run))
  } catch {
    return false
  }
}

/** when the served repository received each artifact (epoch ms; rcvfrom.mtime is a Julian day) */
const receivedAt = (world: HookWorld, hashes: ReadonlyArray<string>): Map<string, number> => {
  const db = new BetterSqlite3(world.repository, { readonly: true, fileMustExist: true })
  try {
    const q = db.prepare<[string], { mtime: number }>("SELECT r.mtime AS mtime FROM blob b JOIN rcvfrom r USING (rcvid) WHERE b.uuid = ?")
    const out = new Map<string, number>()
    for (const h of hashes) {
      const row = q.get(h)
      if (row !== undefined) out.set(h, (row.mtime - 2440587.5) * 86_400_000)
    }
    return out
  } finally {
    db.close()
  }
}

/** The supervisor's log lines that delivered something, with when they were written. */
const roundsLogged = (world: HookWorld): ReadonlyArray<{ at: number; did: ReadonlyArray<string> }> => {
  try {
    return Fs.readFileSync(supervisorFilesOf(world.root, world.repository, users.node.login).log, "utf8").split("\n").filter((l) => l !== "")
      .map((l) => JSON.parse(l) as { at: string; round?: unknown; did?: ReadonlyArray<string> })
      .filter((e) => e.round !== undefined && e.did?.some((d) => /deliver/.test(d)) === true)
      .map((e) => ({ at: Date.parse(e.at), did: e.did! }))
  } catch {
    return []
  }
}

let postCount = 0
const reply = (run: string, text = "a reply") =>
  composeForumPost({ date: new Date(Date.now() + postCount++), user: users.admin.login, root: run, replyTo: run, text: `${text} ${postCount}` })

/**
 * One receipt holding `posts`; resolves, once every one is on its session's stdin, with each one's
 * time from its receipt to its line and the time from the receipt to the round that delivered them.
 */
const deliver = async (live: Live, posts: ReadonlyArray<{ run: string; post: Artifact }>) => {
  const before = roundsLogged(live.world).length
  await pushArtifacts(live.clone, users.admin.login, posts.map((p) => p.post))
  const pushed = Date.now()
  const received = receivedAt(live.world, posts.map((p) => p.post.hash))
  const runs = [...new Set(posts.map((p) => p.run))]
  const stamped = await waitFor(() => {
    const stamps = new Map<string, number>()
    for (const run of runs) for (const [h, t] of stampsOf(live.world, run)) stamps.set(h, t)
    return posts.every((p) => stamps.has(p.post.hash)) ? stamps : undefined
  }, 300_000, 20)
  if (stamped === undefined) throw new Error(`not every post reached its session within 300 s\n${explain(live.world)}`)
  const toLine = posts.map((p) => Math.round(stamped.get(p.post.hash)! - received.get(p.post.hash)!))
  const at = Math.min(...posts.map((p) => received.get(p.post.hash)!))
  // the first round logged after the push that delivered anything
  const round = await waitFor(() => roundsLogged(live.world).slice(before)[0], 10_000, 20)
  // from the receipt, Fossil's own transaction is in the figure; from the push's answer, it is not
  return { toLine, roundMs: round === undefined ? NaN : Math.round(round.at - at), afterPushMs: round === undefined ? NaN : Math.round(round.at - pushed) }
}

const startLive = async (s: number): Promise<Live> => {
  const world = await makeHookWorld({ fastHooks: true })
  const installed = await world.call(hook, { node: users.node.login, root: world.root })
  if (installed.stopped.reason !== "completed") throw new Error(`hook --node: ${JSON.stringify(installed.stopped)}`)
  await addUsers(world.repository, Array.from({ length: s + 1 }, (_, i) => ({ login: processUserOf(i), capabilities: "oi", password: `s${i}-pw` })))
  const supervisor = await startSupervisor(world)
  const clone = await cloneAs(world.server.url, users.admin.login, users.admin.password, Path.join(world.dir, "alice.fossil"))
  return { world, clone, runs: [], supervisorPid: supervisor.pid, stop: () => stopSupervisor(supervisor) }
}

/** Posts `n` session runs in one push and waits until each is live. */
const startSessions = async (live: Live, first: number, n: number) => {
  const posted = Array.from({ length: n }, (_, i) => {
    const run = shellRun(live.world, stamp, { session: true, hears: ["*"], user: processUserOf(first + i) }, { limits: { wall: "60m" } })
    return composeForumPost({ date: new Date(Date.now() + i), user: users.admin.login, title: `session ${first + i}`, text: live.world.runText(run) })
  })
  const began = Date.now()
  await pushArtifacts(live.clone, users.admin.login, posted)
  const runs = posted.map((p) => p.hash)
  const up = await waitFor(() => (runs.every((r) => sessionStarted(live.world, r)) ? true : undefined), 1_200_000, 500)
  if (up === undefined) {
    throw new Error(`${runs.filter((r) => !sessionStarted(live.world, r)).length} of ${n} sessions did not start within 20 minutes\n${explain(live.world)}`)
  }
  live.runs.push(...runs)
  return (Date.now() - began) / 1000
}

/**
 * One run that ends, before any session: its watcher writes the watcher's code cache under the
 * watchers' Node options as it exits (a node has had runs before its sessions; a world made from
 * this checkout has a cache written by a run under other options, or none).
 */
const warmUp = async (live: Live) => {
  // twice: the spare started as the first ends may start before the cache is written, and compile the
  // watcher from its source (malloc's heap of such a watcher stays some 9 MB larger)
  for (const n of [1, 2]) {
    const post = composeForumPost({ date: new Date(), user: users.admin.login, title: `a run that ends ${n}`, text: live.world.runText(shellRun(live.world, "true")) })
    await pushArtifacts(live.clone, users.admin.login, [post])
    await live.world.waitEnded(post.hash)
    await sleep(2000)
  }
}

const atScale = async (s: number) => {
  const live = await startLive(s)
  try {
    await warmUp(live)
    const startedIn = await startSessions(live, 0, s)
    console.log(`S = ${s}: ${s} sessions posted in one push, all live in ${startedIn.toFixed(1)} s; ${load()}`)
    await sleep(3000) // what starting left behind (the spare, the code caches) settles
    const watchers = live.runs.map((r) => watcherPid(live.world, r)).filter((p) => p !== undefined)
    describeMemory("watchers, live and idle", watchers)
    describeMemory("the supervisor", [live.supervisorPid])

    // a reply in each thread, in one receipt, three times
    const toLine: Array<number> = []
    const lasts: Array<number> = []
    for (let i = 0; i < 4; i++) {
      const r = await deliver(live, live.runs.map((run) => ({ run, post: reply(run) })))
      if (i === 0) continue // the first warms the page cache and the watchers' delivery path
      toLine.push(...r.toLine)
      lasts.push(Math.max(...r.toLine))
      await sleep(500)
    }
    console.log(`  a reply in each of the ${s} threads in one receipt (3 times): receipt to the line on stdin median ${quantile(toLine, 0.5)} ms, ` +
      `p95 ${quantile(toLine, 0.95)} ms, max ${Math.max(...toLine)} ms; the last of all ${s} each time: ${lasts.join(", ")} ms (target: 2000); ${load()}`)
    describeMemory("watchers, after delivering", watchers)
    describeMemory("the supervisor, after delivering", [live.supervisorPid])

    // a round's time against the number of new arrivals
    for (const n of [1, 10, 50, s].filter((n, i, all) => n <= s && all.indexOf(n) === i)) {
      const rounds: Array<number> = []
      const afterPush: Array<number> = []
      const lines: Array<number> = []
      for (let i = 0; i < 3; i++) {
        const r = await deliver(live, live.runs.slice(0, n).map((run) => ({ run, post: reply(run) })))
        rounds.push(r.roundMs)
        afterPush.push(r.afterPushMs)
        lines.push(...r.toLine)
        await sleep(300)
      }
      console.log(`  ${String(n).padStart(4)} new arrivals in one receipt: receipt to the round's log line median ${quantile(rounds, 0.5)} ms (of ${rounds.join(", ")}), ` +
        `the push's answer to it ${quantile(afterPush, 0.5)} ms; ` +
        `receipt to line median ${quantile(lines, 0.5)} ms, max ${Math.max(...lines)} ms; ${load()}`)
    }

    if (threadPosts > 0 && s === sizes[0]) await longThread(live, s)
  } finally {
    await live.stop()
    endWatchers(live.world.root)
    await live.world.close()
  }
}

/** One more session, its thread grown to threadPosts posts, 100 to a receipt. */
const longThread = async (live: Live, s: number) => {
  await startSessions(live, s, 1)
  const run = live.runs.at(-1)!
  const pid = watcherPid(live.world, run)!
  console.log(`a session whose thread grows to ${threadPosts} posts (beside the ${s} others), 100 to a receipt; five single replies at each size:`)
  let posts = 0
  for (const at of [100, 1000, threadPosts]) {
    while (posts < at) {
      const batch = Array.from({ length: Math.min(100, at - posts) }, () => ({ run, post: reply(run, `post ${posts} ${"x".repeat(200)}`) }))
      posts += batch.length
      await deliver(live, batch)
    }
    const rounds: Array<number> = []
    const afterPush: Array<number> = []
    const lines: Array<number> = []
    for (let i = 0; i < 5; i++) {
      const r = await deliver(live, [{ run, post: reply(run) }])
      posts++
      rounds.push(r.roundMs)
      afterPush.push(r.afterPushMs)
      lines.push(...r.toLine)
      await sleep(300)
    }
    const m = memoryOf(pid)
    console.log(`  ${String(at).padStart(5)} posts: a round of one new post, receipt to its log line median ${quantile(rounds, 0.5)} ms (of ${rounds.join(", ")}), ` +
      `the push's answer to it ${quantile(afterPush, 0.5)} ms; receipt to line median ${quantile(lines, 0.5)} ms; the watcher: proportional ${mb(m?.pss ?? NaN)} MB, private ${mb(m?.priv ?? NaN)} MB, resident ${mb(m?.rss ?? NaN)} MB; ${load()}`)
  }
}

for (const s of sizes) await atScale(s)
