import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { RollKeeper, type RollKeeperHost } from "../../src/node/RollKeeper.js"
import type { NodeConfig } from "../../src/root/NodeConfig.js"

// The supervisor's decision on a run whose watcher ended can fail (from a clone's host, the server
// restarting: ECONNREFUSED). It used to be logged and dropped: the watcher gone and the cursor past
// the run, nothing decided it again before the node's next start (one run in 400 of a clone burst
// with the server restarted). Now it is decided again after a pause. The decision's effect is the
// host's to run; this host fails it as the unreachable server did, then lets it through.

const dirs: Array<string> = []
afterEach(() => {
  for (const dir of dirs.splice(0)) Fs.rmSync(dir, { recursive: true, force: true })
})

const run = "a".repeat(64)

const keeperFailing = (failures: number) => {
  const care = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-rollretry-"))
  dirs.push(care)
  // the run's lock names the watcher that held it (it is gone: pid 4242's start time matches none)
  Fs.writeFileSync(Path.join(care, `${run}.lock`), "4242\n")
  const logged: Array<ReadonlyArray<string>> = []
  let calls = 0
  let woken = 0
  const host: RollKeeperHost = {
    config: { root: care, nodeUser: "lab" } as unknown as NodeConfig,
    care,
    run: (() => {
      calls++
      return calls <= failures
        ? Promise.reject(new Error("ServerUnreachable: connect ECONNREFUSED 127.0.0.1:1"))
        : Promise.resolve({ action: "answered lost: its watcher ended without writing ended", woke: undefined, user: undefined })
    }) as RollKeeperHost["run"],
    log: (entry) => void logged.push(entry["did"] as ReadonlyArray<string>),
    changed: () => {},
    wake: () => void woken++,
    watcherProgram: () => "/bin/false"
  }
  const keeper = new RollKeeper(host)
  return { keeper, logged, calls: () => calls, woken: () => woken }
}

const until = async (condition: () => boolean, ms: number) => {
  const deadline = Date.now() + ms
  while (!condition() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
  return condition()
}

describe("a supervisor's decision on a run whose watcher ended, when it fails", () => {
  it("is made again after a pause, until it succeeds, each failure logged with the pause", async () => {
    const k = keeperFailing(2)
    try {
      k.keeper.ended.set(run, 4242)
      await k.keeper.decideEnded()
      expect(k.logged.at(-1)).toEqual(["failed: ServerUnreachable: connect ECONNREFUSED 127.0.0.1:1; decided again in 1 s"])
      expect(k.keeper.pending).toBe(false)
      // the timer wakes the host with the run queued again
      expect(await until(() => k.woken() === 1 && k.keeper.pending, 5000)).toBe(true)
      await k.keeper.decideEnded()
      expect(k.logged.at(-1)).toEqual(["failed: ServerUnreachable: connect ECONNREFUSED 127.0.0.1:1; decided again in 2 s"])
      expect(await until(() => k.woken() === 2 && k.keeper.pending, 8000)).toBe(true)
      await k.keeper.decideEnded()
      expect(k.calls()).toBe(3)
      expect(k.logged.at(-1)?.[0]).toBe("answered lost: its watcher ended without writing ended")
      expect(k.keeper.pending).toBe(false)
    } finally {
      k.keeper.stop()
    }
  }, 30_000)

  it("is not made again once the supervisor stops", async () => {
    const k = keeperFailing(1)
    k.keeper.ended.set(run, 4242)
    await k.keeper.decideEnded()
    k.keeper.stop()
    expect(await until(() => k.woken() > 0, 1500)).toBe(false)
    expect(k.calls()).toBe(1)
  }, 30_000)
})
