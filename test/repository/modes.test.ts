/**
 * Reading works with the repository in WAL and in rollback-journal mode, including
 * while Fossil writes; and the in-memory test layers behave as the real ones.
 *
 * The journal-mode cases make their repository with createRepository, not the test world: they
 * need a repository file alone, and the world's (the same file, in either mode) comes with a
 * server and a node's ROOT they never use, measured at about 40% more CPU for this file.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as FossilReceipts from "../../layers/FossilReceipts.js"
import * as FossilRepository from "../../layers/FossilRepository.js"
import * as TestReceipts from "../../layers/TestReceipts.js"
import * as TestRepository from "../../layers/TestRepository.js"
import { Receipts } from "../../services/Receipts.js"
import { Repository, startCursor } from "../../services/Repository.js"
import { applyDelta } from "../../src/fossil/Delta.js"
import { createRepository, fossil, makeTempDir } from "../support/fossilServer.js"

const modes = [{ name: "rollback journal", wal: false }, { name: "WAL", wal: true }] as const

describe("journal modes", () => {
  for (const mode of modes) {
    it.live(`reads and writes in ${mode.name} mode, with Fossil committing between reads`, () =>
      Effect.gen(function*() {
        const dir = makeTempDir()
        yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true })))
        const repo = yield* Effect.promise(() =>
          createRepository(Path.join(dir, "r.fossil"), [{ login: "alice", capabilities: "gio234", password: "pw" }], { wal: mode.wal }))
        const journal = (yield* Effect.promise(() => fossil(["sql", "-R", repo, "PRAGMA journal_mode"]))).trim().replace(/'/g, "")
        expect(journal).toBe(mode.wal ? "wal" : "delete")
        yield* Effect.gen(function*() {
          const repository = yield* Repository
          const first = yield* repository.post({ user: "alice", title: "one", text: "1" })
          const batch1 = yield* repository.readAfter(startCursor)
          // Fossil commits while our connection stays open
          yield* Effect.promise(() => fossil(["ticket", "add", "title", "t", "icomment", "from the cli", "-R", repo, "-U", "alice"], "alice"))
          const second = yield* repository.reply({ user: "alice", to: first.hash, text: "2" })
          const batch2 = yield* repository.readAfter(batch1.cursor)
          expect(batch1.items.map((i) => i.hash)).toContain(first.hash)
          expect(batch2.items.map((i) => [i._tag, i.sender])).toEqual([["TicketChange", "alice"], ["Post", "alice"]])
          expect(batch2.items[1]!.hash).toBe(second.hash)
          const receipts = yield* (yield* Receipts).receipts([first.hash, second.hash])
          expect(receipts.map((r) => r._tag)).toEqual(["Received", "Received"])
        }).pipe(Effect.provide(FossilRepository.layer({ path: repo })), Effect.provide(FossilReceipts.layer({ path: repo })))
      }).pipe(Effect.scoped), 30_000)
  }
})

describe("delta decoding", () => {
  it("applies copy and literal commands and refuses a broken delta", () => {
    const source = Buffer.from("hello world, hello fossil")
    // "12\n" header (decimal 12 = "C" in Fossil's base 64), copy 6@0, literal 6:"fossil", end
    const delta = Buffer.from("C\n6@0,6:fossil1;")
    expect(applyDelta(source, delta).toString()).toBe("hello fossil")
    expect(() => applyDelta(source, Buffer.from("C\n6@99,"))).toThrow(/out of range/)
  })
})

describe("test layers", () => {
  it.effect("TestRepository: writes are received from the writer, in order; replies join the thread", () =>
    Effect.gen(function*() {
      const repository = yield* Repository
      const root = yield* repository.post({ user: "alice", title: "run", text: "go" })
      const reply = yield* repository.reply({ user: "lab", to: root.hash, text: "started" })
      const refused = yield* Effect.either(repository.post({ user: "mallory", title: "x", text: "y" }))
      const batch = yield* repository.readAfter(startCursor)
      expect(batch.items.map((i) => [i.hash, i.sender])).toEqual([[root.hash, "alice"], [reply.hash, "lab"]])
      expect((yield* repository.thread(reply.hash)).map((p) => p.hash)).toEqual([root.hash, reply.hash])
      expect(Either.isLeft(refused) && refused.left._tag).toBe("WriteRefused")
      expect((yield* repository.readAfter(batch.cursor)).items).toEqual([])
      expect((yield* repository.user("alice"))?.fullcap).toBe("io2")
    }).pipe(Effect.provide(TestRepository.layer({ users: { alice: "io", lab: "oi", nobody: "2" } }))))

  it.effect("TestReceipts: hides from callers without o, private artifacts from callers without x; can be down", () =>
    Effect.gen(function*() {
      const h = "a".repeat(64)
      const p = "b".repeat(64)
      const receipts = yield* Receipts
      expect((yield* receipts.receipts([h, p])).map((r) => r._tag)).toEqual(["Received", "Received"])
      expect((yield* receipts.receipts([h, p], { caller: "reader" })).map((r) => r._tag)).toEqual(["Received", "NotReceived"])
      expect((yield* receipts.receipts([h], { caller: "guest" })).map((r) => r._tag)).toEqual(["NotReceived"])
      const bad = yield* Effect.either(receipts.receipts(["abc"]))
      expect(Either.isLeft(bad) && bad.left._tag).toBe("InvalidHash")
      const down = yield* Effect.either(Effect.flatMap(Receipts, (r) => r.receipts([h])).pipe(
        Effect.provide(TestReceipts.layer({ unreachable: true }))))
      expect(Either.isLeft(down) && down.left._tag).toBe("ServerUnreachable")
    }).pipe(Effect.provide(TestReceipts.layer({
      receipts: [{ hash: "a".repeat(64), sender: "alice", rcvid: 1, rid: 2 }, { hash: "b".repeat(64), sender: "carol", rcvid: 2, rid: 3, private: true }],
      users: { alice: "io", carol: "o3", reader: "o", guest: "2" }
    }))))
})
