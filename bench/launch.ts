/**
 * The watcher's overhead against the floor of what it must do anyway (issue 4).
 *
 * Run from the project root after `npm run build` (the watcher bundle is measured as shipped):
 *   npx esbuild bench/launch.ts --bundle --platform=node --format=esm \
 *     --external:better-sqlite3 --outfile=bench/launch.out.mjs && node bench/launch.out.mjs
 *
 * For each of N runs (a directory step, a sandbox, a process that records the moment it starts
 * and exits at once), handed off the two ways a node hands a run off:
 *  - to the node's spare watcher (docs/architecture.md, "The spare watcher"), as the hook and
 *    the node do whenever one waits: from the hand-off to the process's first instruction (the
 *    first thing its shell does is write the clock);
 *  - to a watcher started for it (no spare waits: the first run, a burst, spare-watcher off):
 *    from spawning the watcher to the process's first instruction;
 * each against the same run's floor: its own sandbox (`setpriv ... bwrap ...` with the run's
 * arguments, as the watcher builds them) launched directly with /bin/true as its command, plus
 * one bare write to the repository (a reply as the node user); and, for comparison, against the
 * floor of a minimal `bwrap ... /bin/true` (the run's mounts and identity left out). Also:
 *  - end: from the process's exit to its ended being recorded (the receipt's time in the
 *    served repository), against the floor: one bare write;
 *  - the watcher's peak resident memory (getrusage's, as its log records it).
 * Each figure is the median of the runs; the kinds of run and the floor alternate, so all see
 * the same machine load. Targets: overhead at most 2x the floor; peak RSS under 80 MB.
 */
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import BetterSqlite3 from "better-sqlite3"
import * as FossilRepository from "../layers/FossilRepository.js"
import { Repository } from "../services/Repository.js"
import * as Either from "effect/Either"
import { defaultTools, sandboxCommand } from "../layers/BwrapSandbox.js"
import { hostSettings, nodeOwnPaths } from "../src/root/NodeConfig.js"
import { askSpare, handOffRun } from "../src/pickup/SpareClient.js"
import { readMessage, writeMessage } from "../src/protocol/Envelope.js"
import { checkRun } from "../src/protocol/Refusals.js"
import { releasePaths } from "../src/release/ReleasePaths.js"
import { planMounts } from "../src/sandbox/MountPlan.js"
import { launchSpec } from "../src/watcher/LaunchPlan.js"
import { makeNodeWorld, sandbox, users } from "../test/support/nodeWorld.js"

const runs = Number(process.env.BENCH_RUNS ?? 10)
const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}
const ms = (n: number) => `${n.toFixed(1)} ms`

const world = await makeNodeWorld()
const watcherProgram = Path.join(import.meta.dirname, "../dist/ocx2-watcher.mjs")
if (!Fs.existsSync(watcherProgram)) throw new Error("run `npm run build` first: dist/ocx2-watcher.mjs is missing")

const db = new BetterSqlite3(world.repository, { readonly: true, fileMustExist: true })
/** when the served repository received an artifact, in epoch milliseconds */
const receivedAt = (hash: string): number | undefined => {
  const row = db.prepare(
    "SELECT r.mtime AS mtime FROM blob b JOIN rcvfrom r USING(rcvid) WHERE b.uuid = ?"
  ).get(hash) as { mtime: number } | undefined
  return row === undefined ? undefined : (row.mtime - 2440587.5) * 86400000
}

const write = (text: string, to: string) =>
  Effect.runPromise(
    Effect.flatMap(Repository, (r) => r.reply({ user: users.node.login, to, text })).pipe(
      Effect.provide(FossilRepository.layer({ path: world.repository }))
    )
  )

/** the run's own sandbox, as the watcher launches it, with /bin/true for its command */
const runsOwnSandbox = (runHash: string, run: object): ReadonlyArray<string> => {
  const reading = readMessage(writeMessage({ ocx: 2, to: users.node.login, run }))
  if (reading._tag !== "Message") throw new Error("the run is no message")
  const capabilities = { sandbox: true, wall: true, cpu: true, file_size: true, processes: true, memory: true, notes: [] }
  const checked = checkRun({
    message: reading, runHash, sender: { login: users.admin.login, capabilities: "s" }, processUserCapabilities: "oi",
    cloneUsers: new Set(), host: hostSettings(world.config, capabilities)
  })
  if (Either.isLeft(checked)) throw new Error(checked.left.note)
  const values = { ...checked.right.start, workspace: Path.join(world.root, "work", runHash) }
  const spec = launchSpec(checked.right, values, { runHash, releaseDir: releasePaths(world.root).current, ownPaths: nodeOwnPaths(world.config) })
  if (Either.isLeft(spec)) throw new Error(spec.left.note)
  const mounts = planMounts(spec.right.sandbox!)
  if ("_tag" in mounts) throw new Error(String(mounts))
  return sandboxCommand(defaultTools(), { ...spec.right, command: ["/bin/true"] }, mounts)
}

const timed = (argv: ReadonlyArray<string>) =>
  new Promise<number>((resolve, reject) => {
    const t0 = performance.now()
    const child = ChildProcess.spawn(argv[0]!, argv.slice(1), { stdio: "ignore" })
    child.once("error", reject)
    child.once("exit", (code) => (code === 0 ? resolve(performance.now() - t0) : reject(new Error(`${argv.join(" ")}: exit ${code}`))))
  })

const bwrapTrue = () =>
  new Promise<number>((resolve, reject) => {
    const t0 = performance.now()
    const child = ChildProcess.spawn("bwrap", [
      "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
      "--ro-bind", "/usr", "/usr", "--ro-bind", "/bin", "/bin", "--ro-bind", "/lib", "/lib", "--ro-bind", "/lib64", "/lib64",
      "--proc", "/proc", "--dev", "/dev", "--die-with-parent", "--new-session", "--clearenv", "/bin/true"
    ], { stdio: "ignore" })
    child.once("error", reject)
    child.once("exit", () => resolve(performance.now() - t0))
  })

const measuredRun = () => ({
  clone: world.serverCode,
  objective: "measure the watcher",
  workspace: [{ step: "directory", at: "$$root$$/work/$$run$$" }],
  sandbox: sandbox(),
  limits: { wall: "1m" },
  process: {
    user: users.builder.login,
    command: ["sh", "-c", "date +%s%N > $$workspace$$/first; date +%s%N > $$workspace$$/last"],
    env: { PATH: "/usr/bin:/bin" }
  }
})
const postRun = () => world.post(measuredRun())

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const alive = (pid: number) => Fs.existsSync(`/proc/${pid}`)
// the node as its hook names it: no server URL (the watchers write to the served repository)
const node = { ...world.config, serverUrl: undefined }

/** until the node's spare answers (each watcher starts the next when its run is over) */
const spareReady = async (required = true) => {
  for (let i = 0; i < 200; i++) {
    if ((await askSpare(world.root, { ping: true })) !== undefined) return
    await sleep(50)
  }
  if (required) throw new Error("no spare watcher started")
}

const measured = async (run: string, t0: number) => {
  const workspace = Path.join(world.root, "work", run)
  const first = Number(Fs.readFileSync(Path.join(workspace, "first"), "utf8")) / 1e6
  const last = Number(Fs.readFileSync(Path.join(workspace, "last"), "utf8")) / 1e6
  const record = await world.record(run)
  const ended = receivedAt(record.ended!.hash)!
  const log = Fs.readFileSync(Path.join(world.root, "care", `${run}.log`), "utf8")
  const mainAt = Number(/main (\d+)\)/.exec(log)?.[1] ?? NaN)
  const rss = Number(/peak memory: ([\d.]+) MB/.exec(log)?.[1] ?? NaN)
  return { run, start: first - t0, fromMain: first - mainAt, end: ended - last, rss }
}

/** a watcher started for the run, as when no spare waits */
const watchStarted = async () => {
  const run = await postRun()
  await spareReady(false) // the last run's spare has finished starting (the first run finds none)
  const t0 = Date.now()
  await new Promise<void>((resolve, reject) => {
    const child = ChildProcess.spawn(process.execPath, [watcherProgram,
      "--root", world.root, "--repository", world.repository, "--node", users.node.login, "--run", run], { stdio: "ignore" })
    child.once("error", reject)
    child.once("exit", () => resolve())
  })
  return measured(run, t0)
}

/** the run handed to the node's spare, as the hook hands it */
const watchSpare = async () => {
  const run = await postRun()
  await spareReady()
  const t0 = Date.now()
  const handed = await handOffRun(node, run, { watcherProgram })
  if (!handed.warm) throw new Error("the spare did not take the run")
  while (alive(handed.pid)) await sleep(20)
  return measured(run, t0)
}

type Measured = Awaited<ReturnType<typeof measured>>
const spares: Array<Measured> = []
const starteds: Array<Measured> = []
const floorsStart: Array<number> = []
const floorsMinimal: Array<number> = []
const floorsWrite: Array<number> = []
const target = await world.post({ clone: world.serverCode, objective: "a thread for the floor's writes", process: { user: "x", command: ["true"] } })
for (let i = 0; i < runs + 1; i++) {
  const started = await watchStarted()
  const spare = await watchSpare()
  await spareReady()
  const bwrap = await bwrapTrue()
  const own = await timed(runsOwnSandbox(spare.run, measuredRun()))
  const t = performance.now()
  await write(`a bare write ${i}`, target)
  const bare = performance.now() - t
  if (i === 0) continue // warm-up: page cache, first SQLite open, the code caches
  starteds.push(started)
  spares.push(spare)
  floorsStart.push(own + bare)
  floorsMinimal.push(bwrap + bare)
  floorsWrite.push(bare)
}

const floorStart = median(floorsStart)
const floorMinimal = median(floorsMinimal)
const floorWrite = median(floorsWrite)
const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}x`
const start = (of: Array<Measured>) => median(of.map((m) => m.start))
console.log(`runs: ${runs} of each kind (after one warm-up)`)
console.log(`floor: the run's own sandbox launched with /bin/true + one write ${ms(floorStart)}; a minimal bwrap /bin/true + one write ${ms(floorMinimal)}`)
console.log(`start, handed to the spare: hand-off to the process's first instruction ${ms(start(spares))}; ratio ${ratio(start(spares), floorStart)} (target <= 2x); against the minimal floor ${ratio(start(spares), floorMinimal)}`)
const startedFromMain = median(starteds.map((m) => m.fromMain))
console.log(`start, a watcher started for it: spawn to the process's first instruction ${ms(start(starteds))}; ratio ${ratio(start(starteds), floorStart)}`)
console.log(`       of which node's own start and loading the program ${ms(start(starteds) - startedFromMain)}; from the watcher's main() ${ms(startedFromMain)}, ratio ${ratio(startedFromMain, floorStart)}`)
const end = median([...spares, ...starteds].map((m) => m.end))
console.log(`end:   the process's exit to ended recorded ${ms(end)}; floor (one write) ${ms(floorWrite)}; ratio ${ratio(end, floorWrite)} (target <= 2x)`)
const rsses = [...spares, ...starteds].map((m) => m.rss)
console.log(`peak RSS of the watcher: median ${median(rsses).toFixed(1)} MB, max ${Math.max(...rsses).toFixed(1)} MB (target < 80 MB; a spare's included)`)
db.close()
await world.close()
