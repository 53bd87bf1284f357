/** ~USER.waiting: a run written down and taken out again (its watcher took the lock after all). */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { appendWaitingOnce, readWaiting, removeWaiting, takeNextWaiting } from "../../src/care/ProcessUserFiles.js"

const care = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-waiting-"))
afterAll(() => Fs.rmSync(care, { recursive: true, force: true }))

describe("removeWaiting", () => {
  it("takes one run out and leaves the others in the server's order; a run not there, or no file, changes nothing", () => {
    removeWaiting(care, "builder", "r0")
    expect(readWaiting(care, "builder")).toEqual([])
    appendWaitingOnce(care, "builder", { run: "r3", at: [3, 30] })
    appendWaitingOnce(care, "builder", { run: "r1", at: [1, 10] })
    appendWaitingOnce(care, "builder", { run: "r2", at: [2, 20], personStart: true })
    removeWaiting(care, "builder", "r1")
    expect(readWaiting(care, "builder").map((w) => w.run)).toEqual(["r2", "r3"])
    removeWaiting(care, "builder", "r9")
    expect(readWaiting(care, "builder")).toEqual([{ run: "r2", at: [2, 20], personStart: true }, { run: "r3", at: [3, 30] }])
    expect(takeNextWaiting(care, "builder").next?.run).toBe("r2")
    expect(Fs.readdirSync(care).filter((n) => n.endsWith(".part") || n.endsWith(".taken"))).toEqual([])
  })
})
