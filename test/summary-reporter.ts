import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import type { Reporter, SerializedError, TestModule } from "vitest/node"

// Prints the closing line `N passed, N failed` that CI reads; vitest's own summary has another form.
//
// Before it, the suite's health, on every run (so a doubling is seen the day it happens): its wall
// time, the machine's CPU time meanwhile (every process, from /proc/stat: the programs and servers
// the tests start, not only vitest; on a shared machine others' work too), the load average, and
// the ten test files that took longest (each file's time as it ran beside the others: its import,
// collect and tests). .ci/run adds the CPU time of the suite's own process tree.
//
// With OCX2_TYPECHECK=1 (npm test) it also runs the typecheck beside the tests, `tsc -b` (no
// emit, incremental: tsconfig.json), instead of before them: tsc is one process on one core, most
// of a minute on a clean checkout, and the tests' first minutes leave a core to spare while they
// wait on servers and sandboxes. A failed typecheck prints tsc's output and counts as one failure
// in the line.
//
// The project's gate (package.json), which the suite's staging tests run on this same checkout,
// typechecks it too, into the same incremental record (tsconfig.json's tsBuildInfoFile). Both take
// the lock beside that record and run tsc in build mode (-b), so the second finds the first one's
// record newer than every source and is done in under a second (a plain incremental check parses
// every file again, about 7 s of CPU), instead of both checking everything at once.
const typecheck = (): Promise<{ readonly code: number | null; readonly output: string }> =>
  new Promise((resolve) => {
    const project = Path.join(import.meta.dirname, "..")
    const tsc = Path.join(project, "node_modules", "typescript", "bin", "tsc")
    Fs.mkdirSync(Path.join(project, "node_modules", ".cache"), { recursive: true })
    const child = ChildProcess.spawn("flock", ["node_modules/.cache/ocx2.tsc.lock", process.execPath, tsc, "-b"], {
      cwd: project,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (c: Buffer) => (output += c.toString()))
    child.stderr.on("data", (c: Buffer) => (output += c.toString()))
    child.once("error", (e) => resolve({ code: null, output: `tsc did not start: ${e.message}` }))
    child.once("close", (code) => resolve({ code, output }))
  })

/** CPU seconds the whole machine spent busy since it booted: user, nice, system, irq, softirq (clock ticks of 1/100 s) */
const machineBusySeconds = (): number => {
  try {
    const f = Fs.readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number)
    return (f[0]! + f[1]! + f[2]! + f[5]! + f[6]!) / 100
  } catch {
    return Number.NaN
  }
}

const seconds = (x: number) => `${x.toFixed(1)} s`

export default class SummaryReporter implements Reporter {
  private began = Date.now()
  private busyAtStart = machineBusySeconds()
  private files: ReadonlyArray<{ readonly file: string; readonly seconds: number; readonly state: string }> = []
  private line = "0 passed, 1 failed" // if onTestRunEnd never ran, the run did not finish
  private passed = 0
  private failed = 1
  private skipped = 0
  private typechecked: ReturnType<typeof typecheck> | undefined

  onInit() {
    this.began = Date.now()
    this.busyAtStart = machineBusySeconds()
    if (process.env.OCX2_TYPECHECK === "1") this.typechecked = typecheck()
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<SerializedError>) {
    let passed = 0
    let failed = unhandledErrors.length
    let skipped = 0
    for (const module of modules) {
      let testsFailed = 0
      for (const test of module.children.allTests()) {
        const state = test.result().state
        if (state === "passed") passed++
        else if (state === "failed") testsFailed++
        else skipped++
      }
      // a file that failed with none of its tests failed: an import or collect error, or a
      // beforeAll that threw, whose tests vitest then reports skipped
      failed += testsFailed > 0 ? testsFailed : module.state() === "failed" ? 1 : 0
    }
    const project = Path.join(import.meta.dirname, "..")
    // a module a test of this reporter makes has no diagnostic: its time is then unknown, not a throw
    this.files = modules.map((module) => {
      const d = typeof module.diagnostic === "function" ? module.diagnostic() : undefined
      const seconds = d === undefined ? 0 : (d.setupDuration + d.collectDuration + d.duration) / 1000
      return { file: typeof module.moduleId === "string" ? Path.relative(project, module.moduleId) : "(unnamed)", seconds, state: module.state() }
    }).sort((a, b) => b.seconds - a.seconds)
    this.passed = passed
    this.failed = failed
    this.skipped = skipped
    this.line = this.summary()
  }

  private summary() {
    return `${this.passed} passed, ${this.failed} failed${this.skipped > 0 ? `, ${this.skipped} skipped` : ""}`
  }

  /** the suite's wall and CPU time, its load, and the ten files that took longest: lines printed before the last */
  private health(): string {
    const wall = (Date.now() - this.began) / 1000
    const cpu = machineBusySeconds() - this.busyAtStart
    const cores = Os.availableParallelism()
    const lines = [
      `suite: wall ${seconds(wall)}; CPU ${seconds(cpu)} of the machine's (every process, /proc/stat), ${(cpu / Math.max(wall, 1e-9)).toFixed(2)} of its ${cores} cores busy; ` +
        `${this.files.length} files; load average at the end ${Os.loadavg().map((l) => l.toFixed(1)).join(" ")}`,
      `the ten test files that took longest (each as it ran beside the others; ${seconds(this.files.reduce((a, f) => a + f.seconds, 0))} in all files):`,
      ...this.files.slice(0, 10).map((f) => `  ${seconds(f.seconds).padStart(8)}  ${f.file}${f.state === "passed" ? "" : ` (${f.state})`}`)
    ]
    return `${lines.join("\n")}\n`
  }

  // vitest reports onTestRunEnd and onFinished together; the default reporter prints in onFinished
  async onFinished() {
    if (this.typechecked !== undefined) {
      const { code, output } = await this.typechecked
      if (code !== 0) {
        process.stdout.write(`\ntypecheck (tsc -b) failed, exit ${String(code)}:\n${output}\n`)
        this.failed++
        this.line = this.summary()
        process.exitCode = 1
      }
    }
    process.stdout.write(`\n${this.health()}`)
    process.stdout.write(`${this.line}\n`)
  }
}
