import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Deferred from "effect/Deferred"
import * as Queue from "effect/Queue"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { feed, listen, NodeEvent, namesWritten, signals } from "../../src/node/supervisor/NodeEvents.js"

// The supervisor's event sources (src/node/supervisor/NodeEvents.ts) are scoped streams: what they
// hear reaches the node's queue while its scope is open, and the fs.watch or signal listener they
// registered is let go when it closes (a supervisor stopped leaves nothing listening behind); each
// listens before the supervisor goes on (a SIGUSR1 before its listener would end the process).

const dirs: Array<string> = []
afterEach(() => {
  for (const dir of dirs.splice(0)) Fs.rmSync(dir, { recursive: true, force: true })
})

const fsWatches = () => process.getActiveResourcesInfo().filter((r) => r === "FSEventWrap").length

describe("the supervisor's event sources", () => {
  it("a directory's written names reach the queue as events, and the watch is closed with the scope", async () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-events-"))
    dirs.push(dir)
    const before = fsWatches()
    const heard = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const queue = yield* Queue.unbounded<NodeEvent>()
      yield* feed(queue, namesWritten(dir, () => Effect.void), (name) => (name.endsWith(".lock") ? NodeEvent.CareChanged({ name }) : undefined))
      // feed returns once the watch listens
      expect(fsWatches()).toBe(before + 1)
      Fs.writeFileSync(Path.join(dir, "r1.lock"), "1\n")
      Fs.writeFileSync(Path.join(dir, "ignored.txt"), "")
      Fs.writeFileSync(Path.join(dir, "r2.lock"), "2\n")
      const names = new Set<string>()
      while (!(names.has("r1.lock") && names.has("r2.lock"))) {
        for (const e of Chunk.toReadonlyArray(yield* Queue.takeBetween(queue, 1, 100))) {
          if (e._tag === "CareChanged") names.add(e.name)
        }
      }
      return names
    }).pipe(Effect.timeout("10 seconds"))))
    expect([...heard].sort()).toEqual(["r1.lock", "r2.lock"])
    await new Promise((resolve) => setTimeout(resolve, 50)) // a closed watch leaves the loop's list on its next turn
    expect(fsWatches()).toBe(before)
  }, 30_000)

  it("a watch that cannot be made fails its feed with the error (the supervisor ends at its start); one that fails later is said", async () => {
    const said: Array<string> = []
    const fed = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const queue = yield* Queue.unbounded<NodeEvent>()
      return yield* feed(queue, namesWritten("/nonexistent-ocx2-dir", (e) => Effect.sync(() => void said.push(e.message))), () => undefined)
    })).pipe(Effect.timeout("5 seconds"), Effect.either))
    // fs.watch on a missing directory throws at once: a failure of the feed, not a defect, and not said as a later failure
    expect(fed._tag).toBe("Left")
    expect(fed._tag === "Left" ? String(fed.left) : "").toMatch(/ENOENT/)
    expect(said).toEqual([])
  }, 30_000)

  it("a signal is heard while the stream is read, and its listener removed with the scope", async () => {
    const before = process.listenerCount("SIGUSR2")
    const got = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const heard = yield* Deferred.make<NodeJS.Signals>()
      yield* listen(signals("SIGUSR2"), (signal) => Deferred.succeed(heard, signal))
      // listen returns once the listener is there
      expect(process.listenerCount("SIGUSR2")).toBe(before + 1)
      process.kill(process.pid, "SIGUSR2")
      return yield* Deferred.await(heard)
    }).pipe(Effect.timeout("10 seconds"))))
    expect(got).toBe("SIGUSR2")
    expect(process.listenerCount("SIGUSR2")).toBe(before)
  }, 30_000)
})
