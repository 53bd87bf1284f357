/**
 * The watcher's overhead against the floor of what it must do anyway (issue 4).
 *
 * Run from the project root after `npm run build` (the watcher bundle is measured as shipped):
 *   npx esbuild bench/launch.ts --bundle --platform=node --format=esm \
 *     --external:better-sqlite3 --outfile=bench/launch.out.mjs && node bench/launch.out.mjs
 *
 * For each of N runs (a directory step, a sandbox, a process that records the moment it starts
 * and exits at once):
 *  - start: from spawning the watcher to the process's first instruction (the first thing its
 *    shell does is write the clock), against the floor: `bwrap ... /bin/true` launched
 *    directly, plus one bare write to the repository (a reply as the node user);
 *  - end: from the process's exit to its ended being recorded (the receipt's time in the
 *    served repository), against the floor: one bare write;
 *  - the watcher's peak resident memory (GNU time's %M).
 * Each figure is the median of the runs; watcher and floor runs alternate, so both see the
 * same machine load. Targets: overhead at most 2x the floor; peak RSS under 80 MB.
 */
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import BetterSqlite3 from "better-sqlite3"
import * as FossilRepository from "../layers/FossilRepository.js"
import { Repository } from "../services/Repository.js"
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

const watchOnce = async () => {
  const run = await world.post({
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
  const t0 = Date.now()
  const rss = await new Promise<number>((resolve, reject) => {
    const child = ChildProcess.spawn("/usr/bin/time", ["-f", "%M", process.execPath, watcherProgram,
      "--root", world.root, "--repository", world.repository, "--node", users.node.login, "--run", run], {
      stdio: ["ignore", "ignore", "pipe"]
    })
    let err = ""
    child.stderr.on("data", (d) => (err += String(d)))
    child.once("error", reject)
    child.once("exit", () => resolve(Number(err.trim().split("\n").pop()) / 1024))
  })
  const workspace = Path.join(world.root, "work", run)
  const first = Number(Fs.readFileSync(Path.join(workspace, "first"), "utf8")) / 1e6
  const last = Number(Fs.readFileSync(Path.join(workspace, "last"), "utf8")) / 1e6
  const record = await world.record(run)
  const ended = receivedAt(record.ended!.hash)!
  const log = Fs.readFileSync(Path.join(world.root, "care", `${run}.log`), "utf8")
  const mainAt = Number(/main (\d+)\)/.exec(log)?.[1] ?? NaN)
  return { start: first - t0, fromMain: first - mainAt, end: ended - last, rss }
}

const starts: Array<number> = []
const fromMains: Array<number> = []
const ends: Array<number> = []
const rsses: Array<number> = []
const floorsStart: Array<number> = []
const floorsWrite: Array<number> = []
const target = await world.post({ clone: world.serverCode, objective: "a thread for the floor's writes", process: { user: "x", command: ["true"] } })
for (let i = 0; i < runs + 1; i++) {
  const watched = await watchOnce()
  const bwrap = await bwrapTrue()
  const t = performance.now()
  await write(`a bare write ${i}`, target)
  const bare = performance.now() - t
  if (i === 0) continue // warm-up: page cache, first SQLite open
  starts.push(watched.start)
  fromMains.push(watched.fromMain)
  ends.push(watched.end)
  rsses.push(watched.rss)
  floorsStart.push(bwrap + bare)
  floorsWrite.push(bare)
}

const start = median(starts)
const end = median(ends)
const floorStart = median(floorsStart)
const floorWrite = median(floorsWrite)
console.log(`runs: ${runs} (after one warm-up)`)
console.log(`start: watcher start to the process's first instruction ${ms(start)}; floor (bwrap /bin/true + one write) ${ms(floorStart)}; ratio ${(start / floorStart).toFixed(2)}x (target <= 2x)`)
const fromMain = median(fromMains)
console.log(`       of which node's own start and loading the program: ${ms(start - fromMain)}; from the watcher's main() ${ms(fromMain)}, ratio ${(fromMain / floorStart).toFixed(2)}x`)
console.log(`end:   the process's exit to ended recorded ${ms(end)}; floor (one write) ${ms(floorWrite)}; ratio ${(end / floorWrite).toFixed(2)}x (target <= 2x)`)
console.log(`peak RSS of the watcher: median ${median(rsses).toFixed(1)} MB, max ${Math.max(...rsses).toFixed(1)} MB (target < 80 MB)`)
db.close()
await world.close()
