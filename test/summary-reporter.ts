import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { Reporter, SerializedError, TestModule } from "vitest/node"

// Prints the closing line `N passed, N failed` that CI reads; vitest's own summary has another form.
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

export default class SummaryReporter implements Reporter {
  private line = "0 passed, 1 failed" // if onTestRunEnd never ran, the run did not finish
  private passed = 0
  private failed = 1
  private skipped = 0
  private typechecked: ReturnType<typeof typecheck> | undefined

  onInit() {
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
    this.passed = passed
    this.failed = failed
    this.skipped = skipped
    this.line = this.summary()
  }

  private summary() {
    return `${this.passed} passed, ${this.failed} failed${this.skipped > 0 ? `, ${this.skipped} skipped` : ""}`
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
    process.stdout.write(`${this.line}\n`)
  }
}
