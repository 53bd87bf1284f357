/**
 * The suite's settings. Much of a test file's time is waiting (a fossil server's hooks, a
 * sandboxed process, a watcher's retries), so files run side by side even on a 2-core machine:
 * vitest's default of one worker per core less one gives such a machine a single worker, idle
 * while its file waits. Every file has its own ports (free ones, asked of the kernel) and its own
 * temporary directories, and ends only the processes it started, by id, so files do not meet.
 */
import { BaseSequencer, type TestSpecification } from "vitest/node"
import { defineConfig } from "vitest/config"

/**
 * The files that take longest, started first so that none of them starts last and alone; on a
 * checkout with vitest's cache of earlier runs its recorded durations order the rest. The release
 * test stages this checkout, whose gate typechecks it: the gate waits on the lock of the typecheck
 * npm test runs beside the tests (test/summary-reporter.ts) and then finds its incremental record
 * written, rather than typechecking from nothing at the same time.
 */
const longest = [
  "test/node/clone.test.ts",
  "test/tools/runPage.test.ts",
  "test/shipped/release.test.ts",
  "test/node/supervisorCrash.test.ts",
  "test/node/cloneOutage.test.ts",
  "test/node/spare.test.ts",
  "test/tools/tools.test.ts",
  "test/node/sessions.test.ts",
  "test/watcher/crash.test.ts",
  "test/node/sessionLoad.test.ts",
  "test/tools/watch.test.ts",
  "test/adapters/browser.test.ts"
]

class LongestFirst extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const sorted = await super.sort(files)
    const rank = (spec: TestSpecification) => {
      const i = longest.findIndex((name) => spec.moduleId.endsWith(`/${name}`))
      return i === -1 ? longest.length : i
    }
    // a stable sort: the rest keep the order the base sequencer gave them
    return sorted.map((spec, i) => ({ spec, i })).sort((a, b) => rank(a.spec) - rank(b.spec) || a.i - b.i).map(({ spec }) => spec)
  }
}

/**
 * OCX2_TEST_WORKERS: how many files run at once (4 by default). A file spends much of its time
 * waiting (on a server's hooks, a sandbox, a watcher's retries), so on 2 cores two workers kept
 * 1.55 of them busy on average (283 s), three 1.83 (235 s) and four 1.92 (218 s), every case
 * passing each time (three passed at a load of 17 to 20 from others too). Every wait in the suite
 * is on a condition, with a limit far above its time on a loaded machine; one that is not is a
 * fault of its test.
 */
const workers = Number(process.env.OCX2_TEST_WORKERS ?? "4")

export default defineConfig({
  test: {
    pool: "forks",
    // A worker keeps its imported modules from one file to the next: importing the product's
    // modules and vitest's own took about 80 s of the suite's 430 (its "collect"), done again for
    // each of 120 files. Every file already keeps to its own ports, directories and processes, and
    // none mocks a module or changes process-wide state it does not restore, so nothing a file
    // leaves in a module reaches the next.
    isolate: false,
    maxWorkers: workers,
    // fewer kept than started: a --no-isolate run (npm run gate) fails on a worker ended under it
    minWorkers: workers,
    sequence: { sequencer: LongestFirst },
    globalSetup: ["test/support/sharedBundles.ts", "test/support/childEnvironment.ts", "test/support/fossilConfiguration.ts"],
    // a bare wait that ran out prints what the open worlds saw then, in a test that fails
    setupFiles: ["test/support/failedWaits.ts"],
    // A limit is for a test that hangs, never a measure of speed: a file beside three others on
    // a slow 2-core machine took twice its quiet time and more (tools.test's cases 15 s quiet, 30 s
    // there), so no limit is below 90 s, and each a test names is at least twice its loaded time.
    testTimeout: 90_000,
    hookTimeout: 120_000
  }
})
