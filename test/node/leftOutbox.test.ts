import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as CareDirectoryFs from "../../layers/CareDirectoryFs.js"
import * as TestReceipts from "../../layers/TestReceipts.js"
import * as TestRepository from "../../layers/TestRepository.js"
import { CareDirectory } from "../../services/CareDirectory.js"
import { finishLeftOutboxes } from "../../src/node/Recovery.js"
import { recording } from "../../src/operations/Operations.js"
import { outboxFile } from "../../src/watcher/Outbox.js"

// The node's start sends what dead watchers left in their outboxes. It looks at each outbox before
// it takes the run's lock; a watcher ending just then (its ended written, the node started again
// at once) may send the rest itself and let the lock go in between. The node then finds nothing
// left under the lock, and that is no decision of its own: restart.test once saw its third start
// answer "sent what its watcher left in its outbox: " with nothing after the colon.

const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-left-outbox-"))
afterAll(() => Fs.rmSync(root, { recursive: true, force: true }))

const run = "a".repeat(64)
const report = "b".repeat(64)

describe("what a watcher left in its outbox", () => {
  it.live("sent by the watcher between the node's look and its lock is no decision, and the settled outbox goes", () =>
    Effect.gen(function*() {
      const careDir = Path.join(root, "care")
      Fs.mkdirSync(careDir, { recursive: true, mode: 0o700 })
      const file = outboxFile(careDir, run)
      Fs.writeFileSync(file, `${JSON.stringify({ keep: { kind: "report", hash: report, user: "lab", bytes: Buffer.from("kept logs").toString("base64") } })}\n`)
      // the watcher sends it as the node goes for the lock
      const care = Layer.effect(CareDirectory, Effect.map(CareDirectoryFs.make({ root }), (live) => ({
        ...live,
        lockRun: (r: string) => Effect.zipRight(Effect.sync(() => Fs.appendFileSync(file, `${JSON.stringify({ sent: report })}\n`)), live.lockRun(r))
      })))
      const act = recording(false)
      const decisions = yield* finishLeftOutboxes(act).pipe(
        Effect.provide(Layer.mergeAll(care, TestRepository.layer(), TestReceipts.layer()))
      )
      expect(decisions).toEqual([])
      expect(Fs.existsSync(file)).toBe(false)
    }))
})
