import type { Reporter, SerializedError, TestModule } from "vitest/node"

// Prints the closing line `N passed, N failed` that CI reads; vitest's own summary has another form.
export default class SummaryReporter implements Reporter {
  private line = "0 passed, 1 failed" // if onTestRunEnd never ran, the run did not finish

  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<SerializedError>) {
    let passed = 0
    let failed = unhandledErrors.length
    let skipped = 0
    for (const module of modules) {
      let tests = 0
      for (const test of module.children.allTests()) {
        tests++
        const state = test.result().state
        if (state === "passed") passed++
        else if (state === "failed") failed++
        else skipped++
      }
      if (tests === 0 && module.state() === "failed") failed++ // an import or collect error
    }
    this.line = `${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ""}`
  }

  // vitest reports onTestRunEnd and onFinished together; the default reporter prints in onFinished
  onFinished() {
    process.stdout.write(`${this.line}\n`)
  }
}
