/**
 * What the test suite costs, and the least time it could take on this machine:
 * `npm run bench -- suite [--workers N] [FILTER...]`.
 *
 * Runs the suite (or the test files FILTER names, as vitest takes them) one file at a time by
 * default, each file alone on the machine, and prints each file's wall time and CPU time: the
 * machine's, every process's (from /proc/stat), since most of a file's work is in the programs
 * and servers it starts; its vitest worker's own share beside it. Then the totals, and the floor:
 * the suite's CPU time over the machine's cores, the least wall time any number of workers could
 * reach with every core busy all the time (four workers keep two cores about 98 % busy, and the
 * same work costs more CPU time when files share the cores). Beside them, in the same run, what
 * a bare Node start costs here (`node -e 0`, the median of 10), which every program the suite
 * starts pays.
 *
 * `--workers N` runs N files at once, as `npm test` does (4): the per-file figures then overlap
 * and only the totals are printed. The machine must be otherwise idle: the CPU time counted is
 * the whole machine's. Exit status 1 when a test failed.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { machineBusySeconds } from "./support/machineCpu.js"
import { median } from "./support/measure.js"

type Cost = { readonly file: string; readonly wall: number; readonly cpu: number; readonly worker: number }

const project = Path.join(import.meta.dirname, "..")
const argv = process.argv.slice(2)
const at = argv.indexOf("--workers")
const workers = at === -1 ? 1 : Number(argv[at + 1])
if (!Number.isInteger(workers) || workers < 1) {
  console.error("usage: npm run bench -- suite [--workers N] [FILTER...]: N is a whole number of at least 1")
  process.exit(2)
}
const filters = at === -1 ? argv : argv.filter((_, i) => i !== at && i !== at + 1)

const load = () => Os.loadavg().map((l) => l.toFixed(1)).join(" ")
const s = (x: number) => `${x.toFixed(1)} s`

/** the CPU time of one `node -e 0`, user and system, from the kernel's account of the child */
const bareNode = (): number => {
  const ran = ChildProcess.spawnSync("/bin/sh", ["-c", `${process.execPath} -e 0; cat /proc/$$/stat`], { encoding: "utf8" })
  // fields 16 and 17 of /proc/PID/stat: the children's user and system time, in clock ticks
  const fields = ran.stdout.slice(ran.stdout.lastIndexOf(")") + 2).split(" ")
  return (Number(fields[13]) + Number(fields[14])) / 100
}

const main = () => {
  const out = Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-suite-cost-")), "cost.jsonl")
  const node = median(Array.from({ length: 10 }, bareNode))
  console.log(`suite: ${workers === 1 ? "one test file at a time" : `${workers} test files at once`}${filters.length === 0 ? "" : `, ${filters.join(" ")}`}; load average at the start ${load()}`)
  const busy0 = machineBusySeconds()
  const t0 = Date.now()
  const vitest = ChildProcess.spawnSync(
    process.execPath,
    [Path.join(project, "node_modules", "vitest", "vitest.mjs"), "run", "--dir", "test", "--config", "bench/support/suiteCost.config.ts", "--reporter=dot", ...filters],
    { cwd: project, env: { ...process.env, OCX2_TEST_WORKERS: String(workers), OCX2_SUITE_COST: out }, encoding: "utf8", maxBuffer: 1 << 28 }
  )
  const wall = (Date.now() - t0) / 1000
  const cpu = machineBusySeconds() - busy0
  const costs: Array<Cost> = Fs.existsSync(out) ? Fs.readFileSync(out, "utf8").trim().split("\n").map((l) => JSON.parse(l) as Cost) : []
  Fs.rmSync(Path.dirname(out), { recursive: true, force: true })
  const summary = (vitest.stdout ?? "").split("\n").filter((l) => /Test Files|Tests /.test(l)).map((l) => l.trim()).join("; ")
  const cores = Os.availableParallelism()
  if (costs.length === 0) {
    console.log(`no test file ran${filters.length === 0 ? "" : ` (none matches ${filters.join(" ")})`}; vitest exited ${String(vitest.status)}:`)
    console.log(`${vitest.stdout ?? ""}${vitest.stderr ?? ""}`.trim())
    process.exit(1)
  }
  if (workers === 1) {
    const byCpu = [...costs].sort((a, b) => b.cpu - a.cpu)
    console.log(`each file alone, the costliest first (CPU: the machine's while the file ran; worker: its vitest worker's own):`)
    for (const c of byCpu.slice(0, 25)) {
      console.log(`  ${s(c.cpu).padStart(8)} CPU ${s(c.wall).padStart(8)} wall ${s(c.worker).padStart(7)} worker  ${Path.relative(project, c.file)}`)
    }
    const rest = byCpu.slice(25)
    if (rest.length > 0) console.log(`  ${s(rest.reduce((a, c) => a + c.cpu, 0)).padStart(8)} CPU in the other ${rest.length} files`)
    const top = byCpu.slice(0, 10).reduce((a, c) => a + c.cpu, 0)
    console.log(`the 10 costliest files: ${s(top)} of CPU, ${((100 * top) / Math.max(cpu, 1e-9)).toFixed(0)} % of the suite's`)
  }
  const ownCpu = costs.reduce((a, c) => a + c.worker, 0)
  console.log(`${costs.length} files: wall ${s(wall)}, CPU ${s(cpu)} (the machine's), of which the vitest workers' own during the files ${s(ownCpu)}; ${summary}`)
  console.log(`floor on this machine's ${cores} cores, every core busy all the time: ${s(cpu / cores)} (CPU ${s(cpu)} / ${cores}); without the vitest workers' own: ${s((cpu - ownCpu) / cores)}`)
  console.log(`a bare Node start here (node -e 0): ${(node * 1000).toFixed(0)} ms of CPU; load average at the end ${load()}`)
  if (vitest.status !== 0) {
    console.log(`vitest exited ${String(vitest.status)}:\n${(vitest.stdout ?? "").split("\n").slice(-40).join("\n")}\n${vitest.stderr ?? ""}`)
    process.exit(1)
  }
}

main()
