/**
 * The closing line CI reads: a file that failed counts as a failure even when vitest reports its
 * tests only skipped (a beforeAll that threw), as a fresh machine's run once showed
 * "1016 passed, 0 failed, 10 skipped" over a failed file.
 */
import { afterEach, describe, expect, it, vi } from "vitest"
import type { TestModule } from "vitest/node"
import SummaryReporter from "../summary-reporter.js"

const moduleOf = (state: string, tests: ReadonlyArray<string>) =>
  ({ state: () => state, children: { allTests: () => tests.map((s) => ({ result: () => ({ state: s }) })) } }) as unknown as TestModule

const printedBy = async (modules: ReadonlyArray<TestModule>): Promise<ReadonlyArray<string>> => {
  let printed = ""
  vi.spyOn(process.stdout, "write").mockImplementation((chunk) => ((printed += String(chunk)), true))
  const reporter = new SummaryReporter()
  reporter.onTestRunEnd(modules, [])
  await reporter.onFinished()
  return printed.trim().split("\n")
}

/** the line CI reads: the last */
const lineOf = async (modules: ReadonlyArray<TestModule>): Promise<string> => (await printedBy(modules)).at(-1)!

describe("the summary line", () => {
  afterEach(() => {
    vi.restoreAllMocks()
  })

  it("counts passed, failed and skipped tests", async () => {
    expect(await lineOf([moduleOf("failed", ["passed", "failed", "skipped"]), moduleOf("passed", ["passed"])])).toBe("2 passed, 1 failed, 1 skipped")
  })

  it("counts a file whose set-up threw as one failure, its tests skipped", async () => {
    expect(await lineOf([moduleOf("failed", ["skipped", "skipped"]), moduleOf("passed", ["passed"])])).toBe("1 passed, 1 failed, 2 skipped")
  })

  it("counts a file that failed to import, with no tests, as one failure", async () => {
    expect(await lineOf([moduleOf("failed", [])])).toBe("0 passed, 1 failed")
  })

  it("prints the suite's health before it, never after", async () => {
    const lines = await printedBy([moduleOf("passed", ["passed"])])
    expect(lines.at(-1)).toBe("1 passed, 0 failed")
    expect(lines.slice(0, -1).some((l) => /^suite: wall \d+\.\d s; CPU /.test(l)), lines.join("\n")).toBe(true)
  })
})
