import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as CareDirectoryFs from "../../layers/CareDirectoryFs.js"
import { CareDirectory } from "../../services/CareDirectory.js"
import { appendWithinBound } from "../../src/node/Deliveries.js"
import { followInbox, givenFile, type InboxEntry } from "../../src/watcher/Inbox.js"
import { waitUntil } from "../support/world.js"

// Issue 13 item 4: what a session has not read waits in its inbox on disk, up to the disk bound
// (ROOT/settings/delivery-disk-bound). The rounds append nothing past it: a delivery that would
// pass it is never given, and the run's log names it; once the process has read, deliveries are
// appended again.

const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-inbox-bound-"))
const run = "a".repeat(64)
beforeAll(() => {
  Fs.mkdirSync(Path.join(root, "settings"), { recursive: true })
  Fs.writeFileSync(Path.join(root, "settings", "delivery-disk-bound"), "400\n")
})
afterAll(() => Fs.rmSync(root, { recursive: true, force: true }))

const care = CareDirectoryFs.layer({ root })
const line = (i: number) => JSON.stringify({ deliver: `${String(i).padStart(4, "0")}${"b".repeat(60)}`, line: `{"n":${i},"pad":"${"x".repeat(20)}"}` })
const inboxSize = () => Fs.statSync(Path.join(root, "care", `${run}.inbox`)).size

describe("a session's inbox on disk", () => {
  it.effect("holds no more than the disk bound its process has not read; what would pass it is not given, and the log names it", () =>
    Effect.gen(function*() {
      const appended: Array<boolean> = []
      for (let i = 0; i < 8; i++) appended.push(yield* appendWithinBound(root, run, line(i), `hash${i}`))
      const fits = Math.floor(400 / (Buffer.byteLength(line(0)) + 1))
      expect(appended).toEqual(Array.from({ length: 8 }, (_, i) => i < fits))
      expect(inboxSize()).toBeLessThanOrEqual(400)
      const log = yield* Effect.flatMap(CareDirectory, (c) => c.readLog(run))
      for (let i = fits; i < 8; i++) expect(log).toContain(`delivery hash${i} not given`)
      expect(log).toContain("would pass the disk bound of 400")
    }).pipe(Effect.provide(care)))

  // real time: the inbox is followed every 50 ms; the follower is interrupted when the test's scope closes
  it.scopedLive("takes deliveries again once the watcher has given what waited", () =>
    Effect.gen(function*() {
      const given: Array<string> = []
      yield* Effect.forkScoped(followInbox(run, (e: InboxEntry) => Effect.sync(() => {
        if (e._tag === "Deliver") given.push(e.hash)
      }), "50 millis"))
      const reached = () => {
        try {
          return Number(Fs.readFileSync(givenFile(Path.join(root, "care"), run), "utf8")) === inboxSize()
        } catch {
          return false
        }
      }
      const deadline = Date.now() + 10_000
      yield* waitUntil(reached, 10_000, 20)
      expect(reached()).toBe(true)
      expect(yield* appendWithinBound(root, run, line(100), "hash100")).toBe(true)
      yield* waitUntil(() => given.length >= 4, deadline - Date.now(), 20)
      expect(given.at(-1)).toBe(`0100${"b".repeat(60)}`)
    }).pipe(Effect.provide(care)))
})
