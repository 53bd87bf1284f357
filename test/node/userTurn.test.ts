/**
 * A process user's turn passed on (src/care/UserTurn.ts) never hands a waiting run whose watcher
 * still holds it: that watcher wrote the run down (its user held) and has not let it go yet, and a
 * second watcher handed the run would meet its lock and drop it, its line gone and its hand-off
 * noted, every run after it waiting behind nobody (issue 13 item 2). Locks, not timing: the run's
 * lock is held by a process of the test's while the turn is passed.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as CareDirectoryFs from "../../layers/CareDirectoryFs.js"
import { appendWaitingOnce, handedLately, readWaiting } from "../../src/care/ProcessUserFiles.js"
import { passTurn } from "../../src/care/UserTurn.js"
import { holdLock } from "../support/heldLock.js"

const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-turn-"))
const care = Path.join(root, "care")
afterAll(() => {
  Fs.rmSync(root, { recursive: true, force: true })
})

const pass = (user: string) => passTurn(user).pipe(Effect.provide(CareDirectoryFs.layer({ root })))

describe("passing a process user's turn on", () => {
  // real processes: the run's lock is held by a process of the test's
  it.scopedLive("leaves the first waiting run waiting while a watcher still holds it, and hands it once that watcher let it go", () =>
    Effect.gen(function*() {
      Fs.mkdirSync(care, { recursive: true })
      const [first, second] = ["a".repeat(40), "b".repeat(40)]
      appendWaitingOnce(care, "builder", { run: second!, at: [2, 20] })
      appendWaitingOnce(care, "builder", { run: first!, at: [1, 10] })
      // the watcher that wrote the first run down is still finishing: it holds the run's lock
      const letGo = yield* Effect.acquireRelease(Effect.promise(() => holdLock(Path.join(care, `${first}.lock`))), (letGo) => Effect.promise(letGo))
      const whileHeld = yield* pass("builder")
      expect(whileHeld.next).toBeUndefined()
      expect(readWaiting(care, "builder").map((w) => w.run)).toEqual([first, second])
      expect(handedLately(care, "builder")).toBeUndefined()
      // it let the run go (its watcher then passes the turn on itself): the first run goes first
      yield* Effect.promise(letGo)
      const after = yield* pass("builder")
      expect(after.next?.run).toBe(first)
      expect(handedLately(care, "builder")).toBe(first)
      expect(readWaiting(care, "builder").map((w) => w.run)).toEqual([second])
    }), 90_000)
})
