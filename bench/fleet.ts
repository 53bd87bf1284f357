/**
 * A fleet on one server (issue 42): what an idle clone node costs the server's host, how fast the
 * real nodes beside them pick runs up, and how fast a receipt reaches every waiting node.
 *
 *   npm run bench -- fleet [--n 10,100,500] [--real 4] [--runs 2] [--idle 20] [--page 10]
 *
 * One served repository (a real `fossil server`, its OCX pages served from a release root of the
 * server's host) and its fleet's listener (ocx2-listen); `--real` real clone nodes, each on a host of
 * its own with its supervisor (`ocx2 supervise`), holding their questions at the listener as the
 * page told them; and N simulated idle clone nodes, each signed in as a node user of its own (Fossil's
 * /login) and holding the question on a connection of its own as a node does (POST newer_than, wait 20,
 * arrived), asked again each time it is answered. For N = 0 and each N, it prints:
 *  - the server host's resident memory (VmRSS of the fossil server, the listener and any page process,
 *    from /proc) and CPU (their utime + stime over `--idle` seconds of nothing arriving), and per idle
 *    node against N = 0 in the same run;
 *  - the real nodes' pickup: from a run's receipt to its `started`'s, both as the server timed them,
 *    `--runs` runs per real node, posted while the idle nodes wait: median and p95;
 *  - the time from one receipt (a forum post through the web form) to the last of the N being told.
 * Then, for comparison, `--page` idle nodes holding the question at the receipt page instead (no
 * listener: a Fossil process and an ocx2-cgi each), measured the same way. The load average is
 * printed beside every figure.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Os from "node:os"
import * as Path from "node:path"
import { receivedAt } from "./support/measure.js"
import { webLogin, type WebSession, webNewThread } from "../test/support/fossilServer.js"
import { pidsNaming, sleep, waitFor } from "../test/support/world.js"
import BetterSqlite3 from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as FossilRepository from "../layers/FossilRepository.js"
import { readMessage } from "../src/protocol/Envelope.js"
import { closeCloneWorld, type CloneWorld, makeCloneWorld, useThisBuild } from "../test/node/cloneWorld.js"
import { dist } from "../test/node/hookWorld.js"
import {
  addCloneHost, addNodeUsers, type CloneHost, lab2Host, listenerWaiting, postRunTo, type RunningListener, type ServerHost,
  serveFromReleaseRoot, startListener, startNodeOn, superviseOn
} from "../test/node/fleetWorld.js"
import { repositoryId } from "../src/listen/ListenFiles.js"

const option = (name: string, fallback: string) => {
  const at = process.argv.indexOf(`--${name}`)
  return at >= 0 && process.argv[at + 1] !== undefined ? process.argv[at + 1]! : fallback
}
const counts = option("n", "10,100,500").split(",").map(Number)
if (counts.some((n) => !Number.isInteger(n) || n <= 0)) {
  console.error(`--n ${option("n", "")}: counts of idle nodes, such as 10,100,500`)
  process.exit(2)
}
const realCount = Number(option("real", "4"))
const runsEach = Number(option("runs", "2"))
const idleSeconds = Number(option("idle", "20"))
const pageCount = Number(option("page", "10"))

const load = () => `[load ${Os.loadavg().map((l) => l.toFixed(2)).join(" ")}]`
const say = (line: string) => console.log(`${line}  ${load()}`)
const quantile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!
}
const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`
const mb = (kb: number) => `${(kb / 1024).toFixed(1)} MB`

/** An idle node: a connection of its own holding the question, asked again each time it is answered. */
interface Idle {
  /** [newest told, when (epoch ms)] */
  readonly told: Array<readonly [number, number]>
  seen: number
  readonly stop: () => void
}
const idleNode = (address: string, cookie: string, seen: number, page: boolean): Idle => {
  const agent = new Http.Agent({ keepAlive: true, maxSockets: 1 })
  let stopped = false
  const idle: Idle = { told: [], seen, stop: () => {
    stopped = true
    agent.destroy()
  } }
  const ask = () =>
    new Promise<number | undefined>((resolve) => {
      const body = JSON.stringify({ newer_than: idle.seen, wait: 20, arrived: true })
      const request = Http.request(address, {
        method: "POST", agent,
        headers: { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body), Cookie: cookie, ...(page ? { Referer: address } : {}) }
      }, (response) => {
        let text = ""
        response.setEncoding("utf8")
        response.on("data", (c: string) => (text += c))
        response.on("end", () => {
          try {
            resolve((JSON.parse(text) as { output?: { newest?: number } }).output?.newest)
          } catch {
            resolve(undefined)
          }
        })
        response.on("error", () => resolve(undefined))
      })
      request.on("error", () => resolve(undefined))
      request.end(body)
    })
  void (async () => {
    while (!stopped) {
      const newest = await ask()
      if (stopped) return
      if (newest === undefined) {
        await sleep(500)
        continue
      }
      if (newest !== idle.seen) {
        idle.told.push([newest, Date.now()])
        idle.seen = newest
      }
    }
  })()
  return idle
}

/** The server host's processes: the fossil server (and what it forked), the listener and the page's programs. */
const serverPids = (world: CloneWorld, host: ServerHost) =>
  [...new Set([...pidsNaming(world.served), ...pidsNaming(Path.join(host.root, "current"))])].filter((pid) => pid !== process.pid)
const rssKb = (pid: number) => {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(Fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0)
  } catch {
    return 0
  }
}
/** Proportional memory (KB): shared pages counted once over the processes sharing them, where RSS counts them in each. */
const pssKb = (pid: number) => {
  try {
    return Number(/\nPss:\s+(\d+)/.exec(Fs.readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"))?.[1] ?? 0)
  } catch {
    return 0
  }
}
const cpuTicks = (pid: number) => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return Number(fields[11]) + Number(fields[12])
  } catch {
    return undefined
  }
}
/** The server host's resident memory (KB) and its CPU over `seconds` (ms of CPU per second), and how many processes it ran. */
const serverCost = async (world: CloneWorld, host: ServerHost, seconds: number) => {
  const before = new Map(serverPids(world, host).map((pid) => [pid, cpuTicks(pid) ?? 0]))
  const rss = [...before.keys()].reduce((n, pid) => n + rssKb(pid), 0)
  const pss = [...before.keys()].reduce((n, pid) => n + pssKb(pid), 0)
  const processes = before.size
  await sleep(seconds * 1000)
  let ticks = 0
  for (const pid of serverPids(world, host)) {
    const now = cpuTicks(pid)
    if (now !== undefined) ticks += now - (before.get(pid) ?? 0)
  }
  return { rss, pss, processes, cpuMsPerSecond: (ticks * 10) / seconds }
}

/** The run's replies that are messages naming it, with their hashes, read from the served file. */
const repliesOf = (host: CloneHost, run: string) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(FossilRepository.make({ path: host.served }), (r) => r.thread(run))).pipe(
    Effect.map((posts) => posts.flatMap((p) => {
      const reading = readMessage(p.text)
      return reading._tag === "Message" && reading.re === run ? [{ kind: reading.kind, hash: p.hash }] : []
    }))))

/** Each real node's pickups: a run posted to each at once, `runsEach` times; from the run's receipt to its started's. */
const pickups = async (hosts: ReadonlyArray<CloneHost>, alice: WebSession) => {
  const took: Array<number> = []
  let missed = 0
  for (let round = 0; round < runsEach; round++) {
    await Promise.all(hosts.map(async (host) => {
      const run = await postRunTo(host, alice)
      const replies = await waitFor(async () => {
        const now = await repliesOf(host, run)
        return now.some((m) => m.kind === "ended") ? now : undefined
      }, 90_000, 100)
      const startedHash = replies?.find((m) => m.kind === "started")?.hash
      const from = receivedAt(host.served, run)
      const to = startedHash === undefined ? undefined : receivedAt(host.served, startedHash)
      if (from === undefined || to === undefined) missed++
      else took.push(to - from)
    }))
  }
  return { took, missed }
}

/** The served repository's newest receipt number, read from its file. */
const newestReceipt = (served: string) => {
  const db = new BetterSqlite3(served, { readonly: true, fileMustExist: true })
  try {
    return (db.prepare("SELECT coalesce(max(rcvid), 0) AS n FROM rcvfrom").get() as { n: number }).n
  } finally {
    db.close()
  }
}

/** The receipt number of an artifact in the served repository. */
const receiptOf = (served: string, hash: string) => {
  const db = new BetterSqlite3(served, { readonly: true, fileMustExist: true })
  try {
    return (db.prepare("SELECT rcvid FROM blob WHERE uuid = ?").get(hash) as { rcvid: number } | undefined)?.rcvid
  } finally {
    db.close()
  }
}

/**
 * One receipt (a forum post by alice), and the time from it to each idle node being told of it (a
 * number at least its receipt's; the real nodes' own reports may tell them of others before):
 * [median, last], or how many were told.
 */
const notifyAll = async (world: CloneWorld, idles: ReadonlyArray<Idle>, alice: WebSession) => {
  const post = await webNewThread({ repository: world.served }, alice, { title: "a receipt for the fleet", text: "nothing for anyone" })
  const at = receivedAt(world.served, post)!
  const rcvid = receiptOf(world.served, post)!
  const toldAt = (idle: Idle) => idle.told.find(([newest]) => newest >= rcvid)?.[1]
  const all = await waitFor(() => (idles.every((i) => toldAt(i) !== undefined) ? true : undefined), 60_000, 20)
  if (all === undefined) return `${idles.filter((i) => toldAt(i) !== undefined).length} of ${idles.length} told within 60 s`
  const delays = idles.map((i) => toldAt(i)! - at)
  return { median: quantile(delays, 0.5), last: Math.max(...delays) }
}

const main = async () => {
  const started = Date.now()
  say(`fleet bench: N = ${counts.join(", ")} idle nodes, ${realCount} real clone nodes, ${runsEach} runs each per level, ${idleSeconds} s idle windows, ${pageCount} at the page for comparison; ${Os.cpus().length} cores`)
  const world = await makeCloneWorld("ocx2-fleet-")
  const supervisors: Array<ChildProcess.ChildProcess> = []
  let listener: RunningListener | undefined
  let idles: Array<Idle> = []
  // stopped (Ctrl-C): every process of the bench's own directory ended, by pid, and the directory removed
  const endAll = () => {
    for (const pid of pidsNaming(world.dir)) {
      if (pid !== process.pid) {
        try {
          process.kill(pid, "SIGKILL")
        } catch { /* gone */ }
      }
    }
  }
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      endAll()
      void closeCloneWorld(world).finally(() => process.exit(130))
    })
  }
  try {
    useThisBuild(world, dist)
    const host = await serveFromReleaseRoot(world, dist)
    listener = await startListener(host, world.served)
    const hosts = [lab2Host(world)]
    for (let i = 2; i <= realCount; i++) hosts.push(await addCloneHost(world, `board${i}`))
    for (const h of hosts) {
      const code = await startNodeOn(h)
      if (code !== 0) throw new Error(`ocx2 node --check on ${h.node}'s host exited ${code}`)
      supervisors.push(await superviseOn(h))
    }
    const real = hosts.length
    const realWaiting = await waitFor(async () => ((await listenerWaiting(host)) === real ? true : undefined), 120_000, 200)
    say(`${real} real clone nodes started, ${realWaiting === true ? "each holding its question at the listener" : `only ${await listenerWaiting(host)} at the listener`}`)
    const alice = await webLogin(world.url, "alice", "alice-pw")
    // the forum's first post alone: Fossil makes its forum's table at the first post, and two first posts at once fail ("table forumpost already exists")
    await webNewThread({ repository: world.served }, alice, { title: "the fleet", text: "the forum's first post" })
    const most = Math.max(...counts, pageCount)
    const users = await addNodeUsers(world.served, "idle", most, "o")
    const cookies: Array<string> = []
    for (let at = 0; at < users.length; at += 10) {
      cookies.push(...(await Promise.all(users.slice(at, at + 10).map((u) => webLogin(world.url, u.login, u.password)))).map((w) => w.cookie))
    }
    say(`${users.length} node users signed in through Fossil's /login`)
    const address = `http://127.0.0.1:${host.port}/${repositoryId(world.served)}/receipt`

    const level = async (n: number, mode: "listener" | "page", baseline?: { rss: number; pss: number; cpu: number; processes: number }) => {
      const target = mode === "listener" ? address : `${world.url}ext/ocx2-cgi/receipt`
      const seen = newestReceipt(world.served)
      idles = cookies.slice(0, n).map((cookie) => idleNode(target, cookie, seen, mode === "page"))
      const holding = mode === "listener"
        ? await waitFor(async () => ((await listenerWaiting(host)) === real + n ? true : undefined), 120_000, 200)
        : await waitFor(() => (pidsNaming(Path.join(host.root, "current", "ocx2-cgi")).length >= n ? true : undefined), 120_000, 200)
      if (holding === undefined) say(`N = ${n} (${mode}): not every idle node held its question within 120 s`)
      await sleep(2000)
      const cost = await serverCost(world, host, idleSeconds)
      const per = baseline === undefined || n === 0
        ? ""
        : `; per idle node against N = 0: ${((cost.rss - baseline.rss) / n).toFixed(0)} KB resident (${((cost.pss - baseline.pss) / n).toFixed(0)} KB proportional), ` +
          `${(((cost.cpuMsPerSecond - baseline.cpu) / n) / 10).toFixed(4)} % of a core, ${((cost.processes - baseline.processes) / n).toFixed(2)} processes`
      say(`N = ${n} (${mode}): server host ${mb(cost.rss)} resident (${mb(cost.pss)} proportional) in ${cost.processes} processes, CPU ${(cost.cpuMsPerSecond / 10).toFixed(2)} % of a core over ${idleSeconds} s${per}`)
      const picked = await pickups(hosts, alice)
      if (picked.took.length > 0) {
        say(`N = ${n} (${mode}): real nodes' pickup (run's receipt to started's) over ${picked.took.length} runs: median ${s(quantile(picked.took, 0.5))}, p95 ${s(quantile(picked.took, 0.95))}, max ${s(Math.max(...picked.took))}${picked.missed > 0 ? `; ${picked.missed} not started within 90 s` : ""}`)
      }
      if (n > 0) {
        const told = await notifyAll(world, idles, alice)
        say(typeof told === "string"
          ? `N = ${n} (${mode}): ${told}`
          : `N = ${n} (${mode}): one receipt to every idle node told: median ${s(told.median)}, last ${s(told.last)}`)
      }
      for (const idle of idles) idle.stop()
      idles = []
      await waitFor(async () => (mode === "page" || (await listenerWaiting(host)) === real ? true : undefined), 60_000, 200)
      return { rss: cost.rss, pss: cost.pss, cpu: cost.cpuMsPerSecond, processes: cost.processes }
    }

    const zero = await level(0, "listener")
    for (const n of counts) await level(n, "listener", zero)
    if (pageCount > 0) {
      // the same without the listener: the real nodes fall back to the page by themselves, and the idle ones hold it there
      await listener.stop("SIGTERM")
      listener = undefined
      await waitFor(() => (pidsNaming(Path.join(host.root, "current", "ocx2-cgi")).length >= real ? true : undefined), 60_000, 200)
      const pageZero = await level(0, "page")
      await level(pageCount, "page", pageZero)
    }
    say(`done in ${s(Date.now() - started)}`)
  } finally {
    for (const idle of idles) idle.stop()
    for (const child of supervisors) child.kill("SIGTERM")
    await listener?.stop("SIGKILL")
    // the other boards' watchers, by pid: every process naming the bench's own directory
    endAll()
    await closeCloneWorld(world)
  }
}

main().then(() => process.exit(0), (e: unknown) => {
  console.error(e)
  process.exit(1)
})
