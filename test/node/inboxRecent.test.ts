import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as CareDirectoryFs from "../../layers/CareDirectoryFs.js"
import * as TestReceipts from "../../layers/TestReceipts.js"
import * as TestRepository from "../../layers/TestRepository.js"
import { CareDirectory } from "../../services/CareDirectory.js"
import { deliverArrivals } from "../../src/node/Deliveries.js"
import type { Arrival } from "../../src/protocol/Subscriptions.js"

// Issue 42: a round's time grows with what arrived, not with the session's thread. A round asks a
// session's inbox which of its arrivals a round that died before moving its cursor appended
// already; that read went over the whole inbox, a line per post the thread ever had. Now it reads
// back from the inbox's end only as far as this round's arrivals go: a repeated round appends
// nothing twice, a new arrival once, and an inbox of 3,000 earlier deliveries is not read whole
// (the read began at offset 0 before this change).

const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-inbox-recent-"))
afterAll(() => Fs.rmSync(root, { recursive: true, force: true }))

const run = "c".repeat(64)
const thread = "d".repeat(64)
const hashOf = (i: number) => `${String(i).padStart(8, "0")}${"e".repeat(56)}`
const arrival = (i: number): Arrival => ({ _tag: "Post", hash: hashOf(i), thread, text: `post ${i}`, sender: "alice", order: { rcvid: 10 + i, rid: 100 + i } })
const config = { root, repository: Path.join(root, "served.fossil"), nodeUser: "lab", serverUrl: undefined, passwordsFile: undefined }

/** the real care directory, each inbox read's offset noted */
const offsets: Array<number> = []
const care = Layer.effect(CareDirectory, Effect.map(CareDirectoryFs.make({ root }), (real) => ({
  ...real,
  readInbox: (r: string, offset: number) => Effect.sync(() => offsets.push(offset)).pipe(Effect.zipRight(real.readInbox(r, offset)))
})))
const layers = Layer.mergeAll(care, TestRepository.layer(), TestReceipts.layer())

describe("a round's look at a session's inbox", () => {
  it.effect("reads back only as far as this round's arrivals: a repeated round appends nothing twice, a new arrival once", () =>
    Effect.gen(function*() {
      const dir = yield* CareDirectory
      yield* dir.writeSession({ run, processUser: "session-user", thread, checkins: [], hears: ["*"], started: { hash: thread, rcvid: 1, rid: 1 } })
      // a long session: 3,000 posts given before, then a round that appended two of its three and died
      const earlier = Array.from({ length: 3000 }, (_, i) => arrival(i))
      yield* deliverArrivals(config, earlier)
      yield* deliverArrivals(config, [arrival(3000), arrival(3001)])
      const inbox = Path.join(root, "care", `${run}.inbox`)
      const size = Fs.statSync(inbox).size
      offsets.length = 0
      const did = yield* deliverArrivals(config, [arrival(3000), arrival(3001), arrival(3002)])
      expect(did).toEqual([`${run}: 1 delivery to its inbox`])
      const lines = Fs.readFileSync(inbox, "utf8").trim().split("\n").map((l) => (JSON.parse(l) as { deliver: string }).deliver)
      expect(lines.length).toBe(3003)
      expect(lines.slice(-3)).toEqual([hashOf(3000), hashOf(3001), hashOf(3002)])
      expect(new Set(lines).size).toBe(3003)
      // the inbox is read from near its end, not from its start
      expect(offsets.length).toBeGreaterThan(0)
      expect(Math.min(...offsets), `offsets read from, of an inbox of ${size} bytes`).toBeGreaterThan(size / 2)
    }).pipe(Effect.provide(layers)))
})
