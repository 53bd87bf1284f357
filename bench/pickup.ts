/**
 * How fast the server's node picks a run up, and what the hook costs on a receipt with no run (issue 5).
 *
 * Run from the project root after `npm run build` (the hook and watcher bundles are measured as shipped):
 *   npx esbuild bench/pickup.ts --bundle --platform=node --format=esm \
 *     --external:better-sqlite3 --outfile=bench/pickup.out.mjs && node bench/pickup.out.mjs
 *
 *  - pickup, fast mode (backoffice-disable on, fossil backoffice --poll 1): from the receipt of a
 *    pushed run to the receipt of its started, both as the served repository timed them, over
 *    BENCH_RUNS runs (default 20): median and p95. Targets: median < 1 s, p95 < 2 s.
 *  - pickup with the node's supervisor (`ocx2 supervise`, inotify), in a fast-mode world of its own: the same
 *    measure over BENCH_RUNS runs (at least 30). Targets: median < 250 ms, p95 < 500 ms.
 *  - a burst of BENCH_BURST runs (default 50, one process user's) posted at once in one push, in fast mode
 *    and with the supervisor: each answered exactly once, and the time from their receipt to the last ended.
 *  - the supervisor's CPU over BENCH_IDLE_SECONDS (default 60) with nothing arriving, and its peak RSS.
 *    Targets: under 1 % of a core, under 80 MB. The supervisor's pickups, burst, idle CPU and peak RSS are
 *    measured twice in the same run, each in a world of its own: as shipped (the Node options of its #! line)
 *    and, the baseline, by a bare `node`.
 *  - pickup on a clone's host with its supervisor, BENCH_CLONE_RUNS runs each way (default 10), alternating in
 *    one world, the supervisor pulling when the server's OCX page answers the question it holds (receipt
 *    --newer-than N --wait S) and the node's spare waiting, a receipt the server gave remembered 5 s: the
 *    page answering with the number alone (OCX2_ASK_AHEAD=0, the baseline) and asking ahead (the held
 *    question with --arrived: the receipts and process users' capabilities the round would ask next; a
 *    record's receipts with its process user's capabilities). With
 *    BENCH_CLONE_MODES=all, also pulling every half second (--short-cycle) with no spare, the held
 *    question with no spare, and every receipt asked of the server each time (OCX2_RECEIPT_MEMO_MS=0). Each way's median stages are printed from the supervisor's and the
 *    watcher's logs. Target: median < 1.5 s.
 *  - BENCH_PARTS=fast,supervisor,clone,default (all by default) names the parts measured.
 *  - pickup, Fossil's default backoffice, for comparison: BENCH_DEFAULT_RUNS runs (default 3),
 *    each bounded at 90 s, since a receipt within a minute of the last backoffice waits for its lease.
 *  - the hook's CPU time (user + sys, GNU time) on a receipt carrying no run, against `node -e 0`,
 *    alternating, BENCH_CPU_RUNS times (default 20): medians and their ratio. Target: at most 2x.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import BetterSqlite3 from "better-sqlite3"
import { composeForumPost } from "../src/fossil/Artifact.js"
import { receivedAt } from "./support/measure.js"
import { hook } from "../src/tools/hook.js"
import { cloneAs, fossil, pushArtifacts } from "../test/support/fossilServer.js"
import { shellRun, users } from "../test/support/nodeWorld.js"
import { endWatchers, makeHookWorld, sleep, waitFor, type HookWorld } from "../test/node/hookWorld.js"
import { startSupervisor, stopSupervisor } from "../test/node/supervisorWorld.js"
import { closeCloneWorld, cloneUsers, makeCloneWorld, runNode, useThisBuild } from "../test/node/cloneWorld.js"
import { dist } from "../test/node/hookWorld.js"
import { supervisorFilesOf } from "../src/root/SupervisorFiles.js"
import { stopSpare } from "../src/pickup/SpareClient.js"
import { writeMessage } from "../src/protocol/Envelope.js"
import { sandbox } from "../test/support/nodeWorld.js"

const runs = Number(process.env.BENCH_RUNS ?? 30)
const burst = Number(process.env.BENCH_BURST ?? 50)
const idleSeconds = Number(process.env.BENCH_IDLE_SECONDS ?? 60)
const defaultRuns = Number(process.env.BENCH_DEFAULT_RUNS ?? 3)
const cpuRuns = Number(process.env.BENCH_CPU_RUNS ?? 20)
/** BENCH_PARTS=fast,supervisor,clone,default (all by default): which of the parts below are measured */
const parts = (process.env.BENCH_PARTS ?? "fast,supervisor,clone,default").split(",")

const quantile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!
}
const median = (values: ReadonlyArray<number>) => quantile(values, 0.5)

const startedOf = async (world: HookWorld, run: string) =>
  (await world.replies(run)).find((m) => m.kind === "started")?.hash

const pickups = async (world: HookWorld, count: number, boundMs: number, pause: number) => {
  const clone = await cloneAs(world.server.url, users.admin.login, users.admin.password, Path.join(world.dir, `alice-${Date.now()}.fossil`))
  const took: Array<number> = []
  let missed = 0
  for (let i = 0; i < count; i++) {
    const artifact = composeForumPost({ date: new Date(), user: users.admin.login, title: `run ${i}`, text: world.runText(shellRun(world, "true")) })
    await pushArtifacts(clone, users.admin.login, [artifact])
    const deadline = Date.now() + boundMs
    let started: string | undefined
    while (started === undefined && Date.now() < deadline) {
      await sleep(50)
      started = await startedOf(world, artifact.hash)
    }
    if (started === undefined) missed++
    else took.push(receivedAt(world.repository, started)! - receivedAt(world.repository, artifact.hash)!)
    await sleep(pause)
  }
  return { took, missed }
}

const cpuOf = (command: string, args: ReadonlyArray<string>, input = "") =>
  new Promise<number>((resolve, reject) => {
    const child = ChildProcess.spawn("/usr/bin/time", ["-f", "%U %S", command, ...args], { stdio: ["pipe", "ignore", "pipe"] })
    let err = ""
    child.stderr!.on("data", (b: Buffer) => (err += b.toString()))
    child.stdin!.end(input)
    child.once("error", reject)
    child.once("close", () => {
      const [user, sys] = err.trim().split("\n").at(-1)!.split(" ").map(Number)
      resolve(((user ?? NaN) + (sys ?? NaN)) * 1000)
    })
  })

const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`

/** BENCH_BURST runs of one process user pushed at once: each answered once? and from their receipt to the last ended */
const burstOf = async (world: HookWorld) => {
  const clone = await cloneAs(world.server.url, users.admin.login, users.admin.password, Path.join(world.dir, `burst-${Date.now()}.fossil`))
  const artifacts = Array.from({ length: burst }, (_, i) =>
    composeForumPost({ date: new Date(), user: users.admin.login, title: `burst ${i}`, text: world.runText(shellRun(world, "true")) }))
  await pushArtifacts(clone, users.admin.login, artifacts)
  const received = Math.min(...artifacts.map((a) => receivedAt(world.repository, a.hash)!))
  const answered = await waitFor(async () => {
    const all = await Promise.all(artifacts.map((a) => world.replies(a.hash)))
    return all.every((r) => r.some((m) => m.kind === "ended")) ? all : undefined
  }, 600_000, 500)
  if (answered === undefined) return `not every run ended within 10 minutes`
  await sleep(2000) // a second answer would come now
  const again = await Promise.all(artifacts.map((a) => world.replies(a.hash)))
  const once = again.every((r) => r.filter((m) => m.kind === "started").length === 1 && r.filter((m) => m.kind === "ended").length === 1)
  const lastEnded = Math.max(...again.map((r) => receivedAt(world.repository, r.find((m) => m.kind === "ended")!.hash)!))
  return `last ended ${s(lastEnded - received)} after the runs' receipt; ${once ? "each answered exactly once" : "NOT each answered exactly once"} (load average ${loadNow()})`
}

/** the supervisor's CPU time (user + sys, ms) and its peak RSS (MB), from /proc */
const cpuMsOf = (pid: number) => {
  const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return (Number(fields[11]) + Number(fields[12])) * 10 // clock ticks of 10 ms
}
const peakRssOf = (pid: number) => Number(/VmHWM:\s+(\d+) kB/.exec(Fs.readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024

/** what the supervisor's #! line gives it (environment and Node's options), read from the build measured */
const shippedLine = () => Fs.readFileSync(Path.join(dist, "ocx2-supervise.mjs"), "utf8").split("\n")[0]!.replace(/^#!\/usr\/bin\/env -S /, "")

/** the host's load average now: the figures beside it are read against it (a shared machine) */
const loadNow = () => Os.loadavg().map((l) => l.toFixed(1)).join(", ")

const line = (what: string, took: ReadonlyArray<number>, missed: number, targets: string) =>
  console.log(`pickup, ${what}, ${runs} pushed runs: median ${s(median(took))}, p95 ${s(quantile(took, 0.95))}, max ${s(Math.max(...took))}` +
    `${missed > 0 ? `, ${missed} not started within 30 s` : ""}  (${targets}; load average ${loadNow()})`)

/** A fast-mode world with the node started (hook --node). */
const fastWorld = async () => {
  const world = await makeHookWorld({ fastHooks: true })
  const installed = await world.call(hook, { node: users.node.login, root: world.root })
  if (installed.stopped.reason !== "completed") throw new Error(`hook: ${installed.stopped.message}`)
  return world
}

if (parts.includes("fast")) {
  // ---- fast mode: the poller runs the hook once a second
  const fast = await fastWorld()
  try {
    const fastPickups = await pickups(fast, runs, 30_000, 200)
    line("fast mode (backoffice-disable on, fossil backoffice --poll 1)", fastPickups.took, fastPickups.missed, "targets: median < 1 s, p95 < 2 s")
    console.log(`burst of ${burst} runs of one process user, one push, fast mode: ${await burstOf(fast)}`)
  } finally {
    endWatchers(fast.root)
    await fast.close()
  }
}

if (parts.includes("supervisor")) {
  // ---- the supervisor as shipped (Node's options from its #! line) and, as the baseline, run by a bare
  // `node` (V8's defaults, as it ran before its #! line gave it options): each in a fast-mode world of its own
  const variants = [
    { name: `as shipped (its #! line: ${shippedLine()})`, nodeOptions: undefined },
    { name: "baseline (a bare node: V8's defaults)", nodeOptions: [] as ReadonlyArray<string> }
  ]
  for (const variant of variants) {
    console.log(`the node's supervisor, ${variant.name}:`)
    const world = await fastWorld()
    let supervisor: Awaited<ReturnType<typeof startSupervisor>> | undefined
    try {
      supervisor = await startSupervisor(world, {}, variant.nodeOptions !== undefined ? { nodeOptions: variant.nodeOptions } : {})
      const supervised = await pickups(world, runs, 30_000, 200)
      line("with the node's supervisor (inotify; the poller still runs and only wakes it)", supervised.took, supervised.missed, "targets: median < 250 ms, p95 < 500 ms")
      console.log(`burst of ${burst} runs of one process user, one push, with the supervisor: ${await burstOf(world)}`)
      const before = cpuMsOf(supervisor.pid)
      await sleep(idleSeconds * 1000)
      const idle = cpuMsOf(supervisor.pid) - before
      console.log(`the supervisor idle for ${idleSeconds} s (the poller running beside it): ${idle} ms of CPU, ` +
        `${(100 * idle / (idleSeconds * 1000)).toFixed(2)} % of a core; its peak RSS ${peakRssOf(supervisor.pid).toFixed(1)} MB  (targets: < 1 %, < 80 MB)`)
    } finally {
      await stopSupervisor(supervisor)
      endWatchers(world.root)
      await world.close()
    }
  }
}

if (parts.includes("clone")) {
  // ---- a clone's node with its supervisor: from the run's receipt on the server to its started's. The
  // supervisor pulling every half second (--short-cycle, as before the long poll) and pulling when the
  // server's page answers its held question, alternating in the same world, BENCH_CLONE_RUNS runs each
  const cloneRuns = Number(process.env.BENCH_CLONE_RUNS ?? 10)
  const lab = await makeCloneWorld("ocx2-bench-clone-")
  let labSupervisor: ChildProcess.ChildProcess | undefined
  const stopLabSupervisor = async () => {
    const s = labSupervisor
    labSupervisor = undefined
    if (s === undefined || s.exitCode !== null || s.signalCode !== null) return
    const exited = new Promise((r) => s.once("exit", r))
    s.kill("SIGTERM")
    await exited
  }
  try {
    useThisBuild(lab, dist)
    const checked = await runNode(lab, ["--check"])
    if (checked.stopped.reason !== "completed") throw new Error(`ocx2 node --check: ${JSON.stringify(checked.stopped)}`)
    const log = supervisorFilesOf(lab.root, lab.clone, cloneUsers.lab2.login).log
    const logText = () => (Fs.existsSync(log) ? Fs.readFileSync(log, "utf8") : "")
    const alice = await cloneAs(lab.url, cloneUsers.alice.login, cloneUsers.alice.password, Path.join(lab.dir, "alice.fossil"))
    // the baseline as before: a pull every half second and no spare watcher on the clone's host (ROOT/settings/spare-watcher off)
    // BENCH_CLONE_MODES=all adds the two ways before the held question and the spare
    const allModes = process.env.BENCH_CLONE_MODES === "all"
    const modes: ReadonlyArray<{ name: string; args: ReadonlyArray<string>; spare: boolean; env?: Record<string, string> }> = [
      ...(allModes ? [
        { name: "a pull every half second (--short-cycle), no spare (as before)", args: ["--short-cycle"], spare: false },
        { name: "a pull when the server's page answers its held question, no spare", args: [], spare: false }
      ] : []),
      ...(allModes ? [{ name: "the held question, the spare waiting, every receipt asked of the server each time", args: [], spare: true, env: { OCX2_RECEIPT_MEMO_MS: "0" } }] : []),
      { name: "each question by itself, receipts remembered 5 s (before)", args: [], spare: true, env: { OCX2_ASK_AHEAD: "0" } },
      { name: "asking ahead: the held question answered with what arrived, a record's receipts with its process user", args: [], spare: true }
    ]
    const spareSetting = Path.join(lab.root, "settings", "spare-watcher")
    const took = new Map<string, Array<number>>(modes.map((m) => [m.name, []]))
    // where each pickup's time went: the stages between the run's receipt and its started's, from the
    // supervisor's log (the long poll's answer, its pull, its round) and the watcher's (RUN.log)
    const stages = new Map<string, Array<Record<string, number>>>(modes.map((m) => [m.name, []]))
    const traceOf = (hash: string, startedAt: number): Record<string, number> | undefined => {
      const at0 = receivedAt(lab.served, hash)!
      const line = logText().split("\n").filter((l) => l.includes(`${hash}: handed`)).map((l) => JSON.parse(l) as { at: string; took?: { answered?: string; waitedMs?: number; pullMs: number; roundMs: number } })[0]
      let care = ""
      try {
        care = Fs.readFileSync(Path.join(lab.root, "care", `${hash}.log`), "utf8")
      } catch { /* none */ }
      const when = (re: RegExp) => {
        const m = care.split("\n").find((l) => re.test(l))
        return m === undefined ? undefined : Date.parse(m.slice(0, m.indexOf(" ")))
      }
      const holds = when(/ in care: /)
      const read = when(/ read the record$/)
      const checked = when(/ checked: starting$/)
      const wrote = when(/ wrote started: /)
      if (line?.took === undefined || holds === undefined || read === undefined || checked === undefined || wrote === undefined) return undefined
      const handed = Date.parse(line.at)
      const answered = line.took.answered !== undefined ? Date.parse(line.took.answered) : handed - line.took.roundMs - line.took.pullMs
      return {
        "receipt to the page's answer (or the cycle's pull)": answered - at0,
        "queued behind other work": line.took.waitedMs ?? 0,
        "the supervisor's pull": line.took.pullMs,
        "its round (senders asked, hand-off)": line.took.roundMs,
        "hand-off to the watcher holding the run": holds - handed,
        "the watcher's pull and record": read - holds,
        "its checks (the process user asked)": checked - read,
        "workspace, started written and pushed, its receipt read": wrote - checked,
        "to started's receipt on the server": startedAt - wrote
      }
    }
    let missed = 0
    for (let turn = 0; turn < 2; turn++) {
      for (const mode of modes) {
        Fs.mkdirSync(Path.dirname(spareSetting), { recursive: true })
        stopSpare(lab.root) // a spare started in the last way keeps that way's environment
        if (mode.spare) Fs.rmSync(spareSetting, { force: true })
        else {
          Fs.writeFileSync(spareSetting, "off\n")
          stopSpare(lab.root)
        }
        const from = logText().length
        labSupervisor = ChildProcess.spawn(process.execPath, [Path.join(lab.root, "current", "ocx2"), "supervise", "--node", cloneUsers.lab2.login, "--root", lab.root, ...mode.args], {
          env: { ...process.env, USER: "root", ...mode.env }, stdio: "ignore", detached: true
        })
        await waitFor(() => (logText().slice(from).includes("the node on") ? true : undefined), 60_000, 100)
        await sleep(mode.spare ? 3000 : 1000) // its first question asked, or its cycle begun; its spare started
        for (let i = 0; i < Math.ceil(cloneRuns / 2); i++) {
          const run = {
            clone: lab.cloneCode, objective: "a run for lab2", workspace: [{ step: "directory", at: "$$root$$/work/$$run$$" }],
            sandbox: sandbox(), limits: { wall: "2m" },
            process: { user: cloneUsers.builder.login, command: ["sh", "-c", "true"], env: { PATH: "/usr/bin:/bin" } }
          }
          const artifact = composeForumPost({ date: new Date(), user: cloneUsers.alice.login, title: `lab ${turn} ${i}`, text: writeMessage({ ocx: 2, to: cloneUsers.lab2.login, run }, "A run.") })
          await pushArtifacts(alice, cloneUsers.alice.login, [artifact])
          const ended = await waitFor(async () => {
            const db = new BetterSqlite3(lab.served, { readonly: true, fileMustExist: true })
            try {
              const rows = db.prepare("SELECT b.uuid AS uuid FROM forumpost f JOIN blob b ON b.rid = f.fpid WHERE f.froot = (SELECT rid FROM blob WHERE uuid = ?) ORDER BY b.rid").all(artifact.hash) as Array<{ uuid: string }>
              const replies = rows.map((r) => r.uuid).filter((h) => h !== artifact.hash && receivedAt(lab.served, h) !== undefined)
              // the run's started, once its ended is in too: the next run is not posted while this one's watcher still runs
              return replies.length >= 2 ? replies[0] : undefined
            } finally {
              db.close()
            }
          }, 30_000, 20)
          if (ended !== undefined) {
            took.get(mode.name)!.push(receivedAt(lab.served, ended)! - receivedAt(lab.served, artifact.hash)!)
            const trace = traceOf(artifact.hash, receivedAt(lab.served, ended)!)
            if (trace !== undefined) stages.get(mode.name)!.push(trace)
          } else missed++
          await sleep(Math.random() * 500)
        }
        await stopLabSupervisor()
      }
    }
    for (const mode of modes) {
      const t = took.get(mode.name)!
      console.log(`pickup on a clone's host with its supervisor, ${mode.name}, ${t.length} pushed runs: median ${s(median(t))}, max ${s(Math.max(...t))}` +
        `  (target: median < 1.5 s; load average ${Os.loadavg().map((l) => l.toFixed(1)).join(", ")})`)
      const traced = stages.get(mode.name)!
      if (traced.length > 0) {
        console.log(`  where it went, median of ${traced.length} (ms): ` +
          Object.keys(traced[0]!).map((k) => `${k} ${median(traced.map((x) => x[k]!)).toFixed(0)}`).join("; "))
      }
    }
    if (missed > 0) console.log(`  ${missed} runs on the clone's host not started and ended within 30 s`)
  } finally {
    await stopLabSupervisor()
    await closeCloneWorld(lab)
  }
}

if (parts.includes("default")) {
  // ---- default backoffice, and the hook's CPU time (no poller here: nothing else runs the hook)
  const plain = await makeHookWorld({ fastHooks: false })
  try {
    const installed = await plain.call(hook, { node: users.node.login, root: plain.root })
    if (installed.stopped.reason !== "completed") throw new Error(`hook: ${installed.stopped.message}`)
    const hookProgram = Path.join(plain.root, "ocx2-hook")
    const log = Path.join(plain.root, "node", "hook.log")
    const hookCpu: Array<number> = []
    const nodeCpu: Array<number> = []
    for (let i = 0; i < cpuRuns; i++) {
      // a receipt carrying no run: a plain ticket, made on the host (the command line starts no backoffice)
      await fossil(["ticket", "add", "title", `plain ${i}`, "-R", plain.repository])
      const summary = (await fossil(["sql", "-R", plain.repository, "SELECT uuid FROM blob ORDER BY rid DESC LIMIT 1"])).trim().replace(/'/g, "")
      hookCpu.push(await cpuOf(hookProgram, ["--log", log, plain.repository], `${summary} ticket x\n`))
      nodeCpu.push(await cpuOf(process.execPath, ["-e", "0"]))
    }
    const ratio = median(hookCpu) / median(nodeCpu)
    console.log(`hook CPU (user+sys) on a receipt carrying no run: median ${median(hookCpu).toFixed(0)} ms against node -e 0 ` +
      `${median(nodeCpu).toFixed(0)} ms: ${ratio.toFixed(2)}x  (target: at most 2x; ${cpuRuns} alternating runs)`)

    const { took, missed } = await pickups(plain, defaultRuns, 90_000, 0)
    console.log(`pickup, Fossil's default backoffice, ${defaultRuns} pushed runs (each bounded at 90 s): ` +
      `${took.map(s).join(", ")}${missed > 0 ? `; ${missed} not started within 90 s` : ""}`)
  } finally {
    endWatchers(plain.root)
    await plain.close()
  }
}
