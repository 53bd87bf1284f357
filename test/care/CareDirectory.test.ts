import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { make } from "../../layers/CareDirectoryFs.js"

const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-care-"))
afterAll(() => Fs.rmSync(root, { recursive: true, force: true }))

/** another real process taking a lock the way a watcher does: flock on an inherited fd, then living on */
const holdInChild = (file: string) =>
  new Promise<ChildProcess.ChildProcess>((resolve, reject) => {
    const script = `
      const fs = require("node:fs"), cp = require("node:child_process")
      const fd = fs.openSync(${JSON.stringify(file)}, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o600)
      const r = cp.spawnSync("flock", ["--exclusive", "--nonblock", "--conflict-exit-code", "75", "3"], { stdio: ["ignore", "ignore", "inherit", fd] })
      if (r.status !== 0) { console.log("busy"); process.exit(1) }
      fs.ftruncateSync(fd, 0); fs.writeSync(fd, process.pid + "\\n", 0)
      console.log("locked")
      setInterval(() => {}, 1000)`
    const child = ChildProcess.spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] })
    child.stdout!.once("data", (b: Buffer) => (b.toString().startsWith("locked") ? resolve(child) : reject(new Error(b.toString()))))
    child.once("error", reject)
  })

const killAndWait = (child: ChildProcess.ChildProcess) =>
  new Promise<void>((resolve) => {
    child.once("exit", () => resolve())
    child.kill("SIGKILL")
  })

describe("CareDirectory on the filesystem", () => {
  it.live("a run is alive while another process holds its lock, and gone once that process is SIGKILLed", () =>
    Effect.gen(function*() {
      const care = yield* make({ root })
      expect(care.path).toBe(Path.join(root, "care"))
      expect(yield* care.probe("r1")).toBe("absent")
      const child = yield* Effect.promise(() => holdInChild(Path.join(care.path, "r1.lock")))
      expect(yield* care.probe("r1")).toBe("alive")
      expect(yield* care.holder("r1")).toEqual(Option.some(child.pid))
      const busy = yield* Effect.scoped(care.lockRun("r1")).pipe(Effect.flip)
      expect(busy._tag).toBe("RunBusy")
      if (busy._tag === "RunBusy") expect(busy.holder).toBe(child.pid)
      yield* Effect.promise(() => killAndWait(child))
      expect(yield* care.probe("r1")).toBe("gone")
      // now ours: held for the scope, busy even for a second lock in this same process
      yield* Effect.scoped(
        Effect.gen(function*() {
          const lock = yield* care.lockRun("r1")
          expect(lock.lockPath).toBe(Path.join(care.path, "r1.lock"))
          expect(yield* care.holder("r1")).toEqual(Option.some(process.pid))
          expect(yield* care.probe("r1")).toBe("alive")
          const again = yield* Effect.scoped(care.lockRun("r1")).pipe(Effect.exit)
          expect(Exit.isFailure(again)).toBe(true)
        })
      )
      expect(yield* care.probe("r1")).toBe("gone")
      expect(yield* care.listRuns).toEqual(["r1"])
    }))

  it.live("round.lock lets one round in at a time, and a bounded wait fails RoundBusy", () =>
    Effect.gen(function*() {
      const care = yield* make({ root })
      const spans: Array<[number, number]> = []
      const round = care.withRoundLock(
        Effect.gen(function*() {
          const start = Date.now()
          yield* Effect.sleep("150 millis")
          spans.push([start, Date.now()])
        })
      )
      yield* Effect.all([round, round, round], { concurrency: "unbounded" })
      spans.sort((a, b) => a[0] - b[0])
      expect(spans).toHaveLength(3)
      for (let i = 1; i < spans.length; i++) expect(spans[i]![0]).toBeGreaterThanOrEqual(spans[i - 1]![1])

      const child = yield* Effect.promise(() => holdInChild(Path.join(care.path, "round.lock")))
      const started = Date.now()
      const busy = yield* care.withRoundLock(Effect.succeed("ran"), { wait: "300 millis" }).pipe(Effect.flip)
      expect(busy._tag).toBe("RoundBusy")
      expect(Date.now() - started).toBeGreaterThanOrEqual(250)
      // a waiter gets in the moment the holder dies
      const waiting = yield* Effect.fork(care.withRoundLock(Effect.succeed("ran"), { wait: "5 seconds" }))
      yield* Effect.sleep("100 millis")
      yield* Effect.promise(() => killAndWait(child))
      expect(yield* Fiber.join(waiting)).toBe("ran")
    }))

  it.live("an interrupted waiter leaves round.lock free", () =>
    Effect.gen(function*() {
      const care = yield* make({ root })
      const gate = yield* Effect.fork(care.withRoundLock(Effect.sleep("400 millis")))
      yield* Effect.sleep("50 millis")
      const waiter = yield* Effect.fork(care.withRoundLock(Effect.succeed(1), { wait: "5 seconds" }))
      yield* Effect.sleep("50 millis")
      yield* Fiber.interrupt(waiter)
      yield* Fiber.join(gate)
      expect(yield* care.withRoundLock(Effect.succeed(2), { wait: "200 millis" })).toBe(2)
    }))

  it.live("inbox lines are read from an offset, whole lines only; workspace and log round-trip", () =>
    Effect.gen(function*() {
      const care = yield* make({ root })
      expect(yield* care.readInbox("r2", 0)).toEqual({ lines: [], nextOffset: 0 })
      yield* care.appendInbox("r2", '{"post":"a"}')
      yield* care.appendInbox("r2", '{"post":"b"}')
      const first = yield* care.readInbox("r2", 0)
      expect(first.lines).toEqual(['{"post":"a"}', '{"post":"b"}'])
      Fs.appendFileSync(Path.join(care.path, "r2.inbox"), '{"post":"c')
      yield* care.appendInbox("r2", "x").pipe(Effect.ignore)
      const second = yield* care.readInbox("r2", first.nextOffset)
      expect(second.lines).toEqual(['{"post":"cx'])
      expect(yield* care.readInbox("r2", second.nextOffset)).toEqual({ lines: [], nextOffset: second.nextOffset })
      expect((yield* care.appendInbox("r2", "two\nlines").pipe(Effect.flip))._tag).toBe("CareDirError")

      expect(yield* care.readWorkspace("r2")).toEqual(Option.none())
      yield* care.writeWorkspace("r2", "/srv/ocx/ws/r2")
      expect(yield* care.readWorkspace("r2")).toEqual(Option.some("/srv/ocx/ws/r2"))
      yield* care.appendLog("r2", "launched")
      yield* care.appendLog("r2", "ended\n")
      expect(yield* care.readLog("r2")).toBe("launched\nended\n")
    }))

  it.live("looking whether a run or a process user is held never refuses a watcher taking that lock in the same instant", () =>
    Effect.gen(function*() {
      // a flock that takes its time, as a spawned one does on a loaded machine: it writes down the
      // file it locked, then stays 3 s; a look that takes the lock to see would hold it so long
      const slow = Path.join(root, "slow-flock")
      const marks = Path.join(root, "slow-marks")
      Fs.writeFileSync(slow, `#!/bin/sh\nflock "$@"; s=$?\nreadlink /proc/$$/fd/3 >> ${marks}\nsleep 3\nexit $s\n`, { mode: 0o755 })
      const looker = yield* make({ root, flock: slow })
      const watcher = yield* make({ root })
      const cases = [
        { file: "r9.lock", look: looker.probe("r9").pipe(Effect.asVoid), take: watcher.lockRun("r9").pipe(Effect.asVoid, Effect.mapError(String)) },
        {
          file: "~builder.lock", look: looker.userBusy("builder").pipe(Effect.asVoid),
          take: watcher.lockUser("builder").pipe(Effect.mapError(String), Effect.flatMap((held) => Option.isSome(held) ? Effect.void : Effect.fail("busy")))
        }
      ]
      for (const { file, look, take } of cases) {
        // the lock file exists, as after an earlier run
        yield* Effect.scoped(take)
        const looking = yield* Effect.fork(look)
        // wait until the look is over, or is holding this file
        const lockedByLook = () => Fs.existsSync(marks) && Fs.readFileSync(marks, "utf8").split("\n").some((l) => l.endsWith(`/${file}`))
        while (looking.unsafePoll() === null && !lockedByLook()) yield* Effect.sleep("10 millis")
        // a watcher takes the lock now: free, since nobody runs
        const taken = yield* Effect.scoped(take).pipe(Effect.exit)
        expect(Exit.isSuccess(taken), `${file}: ${String(taken)}`).toBe(true)
        yield* Fiber.join(looking)
      }
    }), 90_000)

  it.live("names that are not run names are refused before any file is touched", () =>
    Effect.gen(function*() {
      const care = yield* make({ root })
      for (const bad of ["../x", "round", "", "a/b", ".hidden"]) {
        const e = yield* care.probe(bad).pipe(Effect.flip)
        expect(e._tag).toBe("InvalidRunName")
      }
    }))
})
