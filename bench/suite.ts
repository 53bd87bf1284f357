/**
 * What the test suite costs, and the least time it could take on this machine:
 * `npm run bench -- suite [--workers N] [FILTER...]`.
 *
 * Runs the suite (or the test files FILTER names, as vitest takes them) one file at a time by
 * default, each file alone on the machine, and prints each file's wall time and CPU time: the
 * suite's, every process it started (most of a file's work is in the programs and servers it
 * starts), its vitest worker's own share beside it. Then the totals, and the floor: the suite's
 * CPU time over the machine's cores, the least wall time any number of workers could reach with
 * every core busy all the time (four workers keep two cores about 98 % busy, and the same work
 * costs more CPU time when files share the cores).
 *
 * The suite's CPU time is its own, exact: vitest and everything it starts run in a cgroup of their
 * own (cpuacct), so what others run on the machine meanwhile is not counted (the machine's CPU
 * time, from /proc/stat, is printed beside it). It is printed as a ratio to a bare Node start
 * (`node -e 0`, the median of 10 before the suite and 10 after, measured the same way), which every Node
 * program the suite starts pays, and split by the kind of program that spent it: the watchers,
 * the CGI requests, the hook runs, the CLI calls, the vitest workers, Chromium, fossil, the
 * sandboxes (bench/support/processKinds.ts: the kernel's process accounting, and how exact it is).
 * Where the machine allows neither (not root, no cpuacct cgroup, no Perl), the machine's CPU time
 * is the suite's, as before, and the split is not printed.
 *
 * `--workers N` runs N files at once, as `npm test` does (4): the per-file figures then overlap
 * and only the totals are printed. Exit status 1 when a test failed.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { machineBusySeconds } from "./support/machineCpu.js"
import { median } from "./support/measure.js"
import { type Accounting, bareNodeCpu, type Split, start } from "./support/processKinds.js"

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

/** vitest's run: its exit status and output */
const runVitest = (argv: ReadonlyArray<string>, env: NodeJS.ProcessEnv): Promise<{ status: number | null; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    const child = ChildProcess.spawn(argv[0]!, argv.slice(1), { cwd: project, env, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d))
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d))
    child.once("close", (status) => resolve({ status, stdout, stderr }))
  })

const printSplit = (split: Split, node: number) => {
  const pct = (x: number) => `${((100 * x) / Math.max(split.total, 1e-9)).toFixed(1).padStart(5)} %`
  console.log(`the suite's CPU by the kind of program (${split.processes} processes; own: each process's user and system time; with what it started: and that of the fossil, sandboxes and other programs it started):`)
  for (const k of [...split.byKind].sort((a, b) => b.cpu - a.cpu)) {
    if (k.processes === 0) continue
    const names = k.names.map(([n, c, p]) => `${n} ${c.toFixed(1)} s/${p}`).join(", ")
    const started = k.inclusive > k.cpu + 0.05 ? `, with what it started ${s(k.inclusive)}` : ""
    console.log(`  ${s(k.cpu).padStart(8)} ${pct(k.cpu)} ${String(k.processes).padStart(6)} processes, ${(1000 * k.cpu / k.processes).toFixed(0).padStart(5)} ms each (${(k.cpu / k.processes / node).toFixed(1)} bare Node starts; truncated: up to ${s(0.02 * k.processes)} more)  ${k.kind}${started}: ${names}`)
  }
  console.log(`  fossil by who started it: ${split.fossilBy.map(([k, c]) => `${k.replace(/ \(.*$/, "")} ${s(c)}`).join(", ")}`)
  console.log(`  ${s(split.unaccounted).padStart(8)} ${pct(split.unaccounted)} in no process's record: the kernel's records are truncated to 10 ms, each process's user and system time (up to 20 ms a process, ${s(0.02 * split.processes)} for these ${split.processes}), and a process whose parent was not seen`)
}

const main = async () => {
  const out = Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-suite-cost-")), "cost.jsonl")
  let accounting: Accounting | undefined
  let node: number
  try {
    node = median(Array.from({ length: 10 }, bareNodeCpu))
    accounting = start(Path.dirname(out))
  } catch (e) {
    console.log(`the suite's CPU is the machine's, not split by program: ${e instanceof Error ? e.message : String(e)}`)
    node = median(Array.from({ length: 10 }, bareNode))
  }
  const stopAccounting = () => accounting?.abandon()
  process.once("SIGINT", () => (stopAccounting(), process.exit(130)))
  process.once("SIGTERM", () => (stopAccounting(), process.exit(143)))
  console.log(`suite: ${workers === 1 ? "one test file at a time" : `${workers} test files at once`}${filters.length === 0 ? "" : `, ${filters.join(" ")}`}; load average at the start ${load()}`)
  const busy0 = machineBusySeconds()
  const suite0 = accounting?.usage() ?? 0
  const t0 = Date.now()
  const argv = [process.execPath, Path.join(project, "node_modules", "vitest", "vitest.mjs"), "run", "--dir", "test", "--config", "bench/support/suiteCost.config.ts", "--reporter=dot", ...filters]
  const vitest = await runVitest(accounting?.wrap(argv) ?? argv, {
    ...process.env, ...accounting?.env, OCX2_TEST_WORKERS: String(workers), OCX2_SUITE_COST: out,
    ...(accounting === undefined ? {} : { OCX2_SUITE_CPU: accounting.usageFile })
  })
  const wall = (Date.now() - t0) / 1000
  const machine = machineBusySeconds() - busy0
  const split = accounting?.finish()
  const cpu = split === undefined ? machine : split.total - suite0
  // a bare start costs more CPU on a loaded machine: measured again at the end, the ratio is to the mean of both
  const nodeAfter = median(Array.from({ length: 10 }, accounting === undefined ? bareNode : bareNodeCpu))
  const nodeBefore = node
  node = (nodeBefore + nodeAfter) / 2
  const costs: Array<Cost> = Fs.existsSync(out) ? Fs.readFileSync(out, "utf8").trim().split("\n").map((l) => JSON.parse(l) as Cost) : []
  Fs.rmSync(Path.dirname(out), { recursive: true, force: true })
  const summary = vitest.stdout.split("\n").filter((l) => /Test Files|Tests /.test(l)).map((l) => l.trim()).join("; ")
  const cores = Os.availableParallelism()
  if (costs.length === 0) {
    console.log(`no test file ran${filters.length === 0 ? "" : ` (none matches ${filters.join(" ")})`}; vitest exited ${String(vitest.status)}:`)
    console.log(`${vitest.stdout}${vitest.stderr}`.trim())
    process.exit(1)
  }
  if (workers === 1) {
    const byCpu = [...costs].sort((a, b) => b.cpu - a.cpu)
    console.log(`each file alone, the costliest first (CPU: the suite's while the file ran, every process it started; worker: its vitest worker's own):`)
    for (const c of byCpu.slice(0, 25)) {
      console.log(`  ${s(c.cpu).padStart(8)} CPU ${s(c.wall).padStart(8)} wall ${s(c.worker).padStart(7)} worker  ${Path.relative(project, c.file)}`)
    }
    const rest = byCpu.slice(25)
    if (rest.length > 0) console.log(`  ${s(rest.reduce((a, c) => a + c.cpu, 0)).padStart(8)} CPU in the other ${rest.length} files`)
    const top = byCpu.slice(0, 10).reduce((a, c) => a + c.cpu, 0)
    console.log(`the 10 costliest files: ${s(top)} of CPU, ${((100 * top) / Math.max(cpu, 1e-9)).toFixed(0)} % of the suite's`)
  }
  const ownCpu = costs.reduce((a, c) => a + c.worker, 0)
  console.log(`${costs.length} files: wall ${s(wall)}, CPU ${s(cpu)} (${split === undefined ? "the machine's" : `the suite's own; the machine's meanwhile ${s(machine)}`}), of which the vitest workers' own during the files ${s(ownCpu)}; ${summary}`)
  console.log(`floor on this machine's ${cores} cores, every core busy all the time: ${s(cpu / cores)} (CPU ${s(cpu)} / ${cores}); without the vitest workers' own: ${s((cpu - ownCpu) / cores)}`)
  console.log(`a bare Node start here (node -e 0): ${(node * 1000).toFixed(0)} ms of CPU (${(nodeBefore * 1000).toFixed(0)} before the suite, ${(nodeAfter * 1000).toFixed(0)} after); the suite's CPU is ${(cpu / node).toFixed(0)} of them; load average at the end ${load()}`)
  if (split !== undefined) printSplit(split, node)
  if (vitest.status !== 0) {
    console.log(`vitest exited ${String(vitest.status)}:\n${vitest.stdout.split("\n").slice(-40).join("\n")}\n${vitest.stderr}`)
    process.exit(1)
  }
}

await main()
