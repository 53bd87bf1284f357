import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import type { RollNeeds } from "../../src/node/RollKeeper.js"
import type { NodeEvent } from "../../src/node/supervisor/NodeEvents.js"
import { makeRoll } from "../../src/node/supervisor/Roll.js"
import type { NodeConfig } from "../../src/root/NodeConfig.js"

// The supervisor's decision on a run whose watcher ended can fail (from a clone's host, the server
// restarting: ECONNREFUSED). It used to be logged and dropped: the watcher gone and the cursor past
// the run, nothing decided it again before the node's next start (one run in 400 of a clone burst
// with the server restarted). Now the run's fiber has it decided again after a pause. The decision
// is given to the roll here (a pure stand-in): it fails as the unreachable server did, then lets it
// through; the test plays the supervisor's one fiber of work, taking the ends from the queue.

const dirs: Array<string> = []
afterEach(() => {
  for (const dir of dirs.splice(0)) Fs.rmSync(dir, { recursive: true, force: true })
})

const run = "a".repeat(64)
/** a pid no process has (above any pid_max): the watcher that held the lock is gone */
const gonePid = 99_999_999

const rollFailing = (failures: number) =>
  Effect.gen(function*() {
    const care = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-rollretry-"))
    dirs.push(care)
    // the run's lock names the watcher that held it
    Fs.writeFileSync(Path.join(care, `${run}.lock`), `${gonePid}\n`)
    const logged: Array<ReadonlyArray<string>> = []
    let calls = 0
    const queue = yield* Queue.unbounded<NodeEvent>()
    const roll = yield* makeRoll({
      config: { root: care, nodeUser: "lab" } as unknown as NodeConfig,
      care,
      queue,
      log: (entry) => Effect.sync(() => void logged.push(entry["did"] as ReadonlyArray<string>)),
      changed: Effect.void,
      watcherProgram: () => "/bin/false",
      decide: () => Effect.suspend(() => {
        calls++
        return calls <= failures
          ? Effect.fail(new Error("ServerUnreachable: connect ECONNREFUSED 127.0.0.1:1"))
          : Effect.succeed({ action: "answered lost: its watcher ended without writing ended", woke: undefined, user: undefined })
      })
    }).pipe(Effect.provide(Context.empty() as Context.Context<RollNeeds>))
    // the supervisor's one fiber of work, for the watchers' ends
    yield* Effect.forkScoped(Stream.runForEach(Stream.fromQueue(queue), (e) =>
      e._tag === "WatcherEnded" ? Effect.flatMap(roll.decideEnd(e.run, e.pid), e.answer) : Effect.void))
    return { roll, logged, calls: () => calls }
  })

const until = async (condition: () => boolean, ms: number) => {
  const deadline = Date.now() + ms
  while (!condition() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
  return condition()
}

describe("a supervisor's decision on a run whose watcher ended, when it fails", () => {
  it("is made again after a pause, until it succeeds, each failure logged with the pause", async () => {
    const scope = Effect.runSync(Scope.make())
    try {
      const k = await Effect.runPromise(Scope.extend(rollFailing(2), scope))
      await Effect.runPromise(k.roll.heard(`${run}.lock`))
      expect(await until(() => k.calls() === 1, 5000)).toBe(true)
      expect(await until(() => k.logged.length === 1, 5000)).toBe(true)
      expect(k.logged.at(-1)).toEqual(["failed: ServerUnreachable: connect ECONNREFUSED 127.0.0.1:1; decided again in 1 s"])
      const first = Date.now()
      expect(await until(() => k.logged.length === 2, 8000)).toBe(true)
      expect(Date.now() - first).toBeGreaterThanOrEqual(900)
      expect(k.logged.at(-1)).toEqual(["failed: ServerUnreachable: connect ECONNREFUSED 127.0.0.1:1; decided again in 2 s"])
      expect(await until(() => k.logged.length === 3, 8000)).toBe(true)
      expect(k.calls()).toBe(3)
      expect(k.logged.at(-1)?.[0]).toBe("answered lost: its watcher ended without writing ended")
      // decided: off the roll, and no more decisions
      expect(await Effect.runPromise(k.roll.snapshot)).toEqual({})
      expect(await until(() => k.calls() > 3, 1500)).toBe(false)
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }, 30_000)

  it("is not made again once the supervisor stops", async () => {
    const scope = Effect.runSync(Scope.make())
    const k = await Effect.runPromise(Scope.extend(rollFailing(1), scope))
    await Effect.runPromise(k.roll.heard(`${run}.lock`))
    expect(await until(() => k.logged.length === 1, 5000)).toBe(true)
    await Effect.runPromise(Scope.close(scope, Exit.void))
    expect(await until(() => k.calls() > 1, 1500)).toBe(false)
    expect(k.calls()).toBe(1)
  }, 30_000)
})
