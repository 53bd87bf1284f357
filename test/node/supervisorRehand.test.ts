import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { handsPerMinute, rehandWaitMs } from "../../src/node/RollKeeper.js"
import { hook } from "../../src/tools/hook.js"
import { webLogin, webNewThread, type WebSession } from "../support/fossilServer.js"
import { users } from "../support/nodeWorld.js"
import { closeHookWorld, countingRuns, makeHookWorld, waitFor, type HookWorld } from "./hookWorld.js"
import { startSupervisor, stopSupervisor, supervisorLog, withoutSpare, type RunningSupervisor } from "./supervisorWorld.js"

// A run whose every watcher dies before it answers the run (here: each SIGKILLs itself once it has
// set up the run's sandbox, before started) is handed to a new watcher at most 3 times a minute, and the supervisor's log says
// why each time. Before, the supervisor started a new watcher for it about once a second, for good
// (137 watchers in five minutes for one run, 65 to 75 MB each).

describe("how long a run handed on too often waits", () => {
  it("3 hand-offs in a minute are allowed; the 4th waits until the first is a minute old", () => {
    expect(handsPerMinute).toBe(3)
    expect(rehandWaitMs([], 100_000)).toBe(0)
    expect(rehandWaitMs([90_000, 95_000], 100_000)).toBe(0)
    expect(rehandWaitMs([90_000, 95_000, 99_000], 100_000)).toBe(50_000)
    // hand-offs older than a minute do not count
    expect(rehandWaitMs([10_000, 20_000, 95_000, 99_000], 100_000)).toBe(0)
    expect(rehandWaitMs([50_000, 60_000, 95_000, 99_000], 100_000)).toBe(20_000)
  })
})

let world: HookWorld
let alice: WebSession
let supervisor: RunningSupervisor | undefined
let restoreSpare: (() => void) | undefined
beforeAll(async () => {
  world = await makeHookWorld({ fastHooks: false })
  const installed = await world.call(hook, { node: users.node.login, root: world.root })
  expect(installed.stopped).toEqual({ reason: "completed" })
  alice = await webLogin(world.server.url, users.admin.login, users.admin.password)
  // every watcher started for a run by this supervisor dies holding it; a spare (which never crashes) would answer it
  restoreSpare = await withoutSpare(world.root)
  supervisor = await startSupervisor(world, { OCX2_CRASH_AT: "launched" })
}, 120_000)
afterAll(async () => {
  await stopSupervisor(supervisor)
  restoreSpare?.()
  await closeHookWorld(world)
})

const { counting } = countingRuns(() => world)

/** how many watchers held the run: each says so first in the run's log */
const watchersOf = (run: string): number => {
  try {
    return Fs.readFileSync(Path.join(world.root, "care", `${run}.log`), "utf8").split("\n").filter((l) => / in care: watcher \d+ holds the run/.test(l)).length
  } catch {
    return 0
  }
}

describe("a run whose watchers die before they answer it", () => {
  it("is handed on at most 3 times a minute, the supervisor's log saying why each time", async () => {
    const run = await webNewThread(world.server, alice, { title: "a run no watcher survives", text: world.runText(counting("true")) })
    const held = await waitFor(() => supervisorLog(world).find((l) => l.run === run && l.did.some((d) => /decided again in \d+ s$/.test(d))), 90_000, 100)
    expect(held, `the supervisor never held the run back; watchers so far: ${watchersOf(run)}`).toBeDefined()
    // the first watcher, and the three hand-offs the minute allows
    expect(watchersOf(run), JSON.stringify(supervisorLog(world).filter((l) => l.run === run || l.did.some((d) => d.includes(run))), null, 1)).toBeLessThanOrEqual(1 + handsPerMinute)
    expect(held!.did[0]).toMatch(/^its watcher ended without answering the run \(its last word: .*\); handed on 3 times in the last minute, so decided again in \d+ s$/)
    // each hand-off before it named the watcher's last word
    const handed = supervisorLog(world).filter((l) => l.run === run && l.did.some((d) => d.startsWith("its watcher ended without answering it; its last word: ")))
    expect(handed.length).toBeGreaterThanOrEqual(1)
  }, 150_000)
})
