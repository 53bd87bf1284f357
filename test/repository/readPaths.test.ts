/**
 * The two ways a read after a cursor is made (few artifacts arrived: looked up by rid;
 * many: one pass over each table) give the same batches, for every cursor and limit,
 * on a real repository holding every kind of item: web posts, a reply, an edit (which
 * makes the original a delta), a post held for moderation (private), pushed posts,
 * ticket changes, a check-in and a tag. Batches read one after another give the
 * whole read, and a thread gives the posts the whole read gives for it.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import BetterSqlite3 from "better-sqlite3"
import * as Path from "node:path"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { type Cursor, type Item, Repository, startCursor } from "../../services/Repository.js"
import { composeForumPost } from "../../src/fossil/Artifact.js"
import * as Read from "../../src/fossil/Read.js"
import {
  cloneAs, fossil, pushArtifacts, type RunningServer, webEdit,
  webEditTicket, webLogin, webNewThread, webNewTicket, webReply
} from "../support/fossilServer.js"
import { makeWorld, type World } from "../support/world.js"

const users = [
  { login: "alice", capabilities: "gio234nrwcy", password: "pw-alice" },
  { login: "bob", capabilities: "gio234nrwcy", password: "pw-bob" },
  { login: "carol", capabilities: "gjo23", password: "pw-carol" } // web posts held for moderation
]

let world: World | undefined
let dir: string
let server: RunningServer
let repo: string
let root: string
let moderated: string

beforeAll(async () => {
  world = await makeWorld({ prefix: "ocx2-test-", users, checkin: {} })
  ;({ dir, server, repository: repo } = world)
  const alice = await webLogin(server.url, "alice", "pw-alice")
  const bob = await webLogin(server.url, "bob", "pw-bob")
  root = await webNewThread(server, alice, { title: "Web run", text: "a long text. ".repeat(30) })
  const reply = await webReply(server, bob, { to: root, text: "a reply" })
  await webEdit(server, alice, { of: root, title: "Web run (edited)", text: "a long text. ".repeat(30) + "edited" })
  moderated = await webNewThread(server, await webLogin(server.url, "carol", "pw-carol"), { title: "Held", text: "held" })
  const ticket = await webNewTicket(alice, { title: "A ticket", icomment: "opened" })
  await webEditTicket(bob, { ticket, icomment: "more" })
  const clone = await cloneAs(server.url, "alice", "pw-alice", Path.join(dir, "alice.fossil"))
  await pushArtifacts(clone, "alice", [
    composeForumPost({ user: "bob", date: new Date("2026-02-01T00:00:00Z"), root, replyTo: reply, text: "pushed one" }),
    composeForumPost({ user: "alice", date: new Date("2026-02-01T00:00:01Z"), title: "Pushed thread", text: "pushed two" })
  ])
  const checkin = (await fossil(["sql", "-R", repo, "SELECT uuid FROM blob JOIN event ON objid = rid WHERE type = 'ci'"])).trim().replace(/'/g, "")
  await Effect.runPromise(Effect.scoped(Effect.flatMap(Repository, (r) => r.tag({ user: "alice", checkin, name: "ci", value: "passed" }))
    .pipe(Effect.provide(FossilRepository.layer({ path: repo })))))
}, 120_000)

afterAll(async () => {
  await world?.close()
})

const few: Read.ReadOptions = { senders: true }
const many: Read.ReadOptions = { senders: true, fewArtifacts: 0 }

describe("reading after a cursor, by rid or by table", () => {
  it("gives the same batches both ways, for every cursor and limit", () => {
    const db = new BetterSqlite3(repo, { readonly: true, fileMustExist: true })
    try {
      const all = Read.readAfter(db, startCursor, 1000, few)
      expect(Read.readAfter(db, startCursor, 1000, many)).toEqual(all)
      const kinds = new Set(all.items.map((i) => i._tag))
      expect([...kinds].sort()).toEqual(["Checkin", "Post", "TagArtifact", "TicketChange"])
      expect(all.items.map((i) => i.hash)).not.toContain(moderated)
      expect(all.more).toBe(false)
      // the edit made the original a delta
      expect(db.prepare("SELECT 1 FROM delta WHERE rid = (SELECT rid FROM blob WHERE uuid = ?)").get(root)).toBeDefined()

      // cursors: the start, every item, and one inside a receipt between two artifacts
      const cursors: Array<Cursor> = [startCursor, ...all.items.map((i) => ({ rcvid: i.rcvid, rid: i.rid })), { rcvid: all.items[1]!.rcvid, rid: all.items[1]!.rid - 1 }]
      for (const cursor of cursors) {
        for (const limit of [1, 2, 3, 1000]) {
          const a = Read.readAfter(db, cursor, limit, few)
          expect(Read.readAfter(db, cursor, limit, many)).toEqual(a)
          const expected = all.items.filter((i) => i.rcvid > cursor.rcvid || (i.rcvid === cursor.rcvid && i.rid > cursor.rid))
          expect(a.items).toEqual(expected.slice(0, limit))
          expect(a.more).toBe(expected.length > limit)
        }
      }
      // past the end: nothing, and the cursor stays
      expect(Read.readAfter(db, all.cursor, 10, few)).toEqual({ items: [], cursor: all.cursor, more: false })
      expect(Read.readAfter(db, all.cursor, 10, many)).toEqual({ items: [], cursor: all.cursor, more: false })
    } finally {
      db.close()
    }
  })

  it("batches read one after another give the whole read; a thread gives its posts", async () => {
    const db = new BetterSqlite3(repo, { readonly: true, fileMustExist: true })
    const all = (() => {
      try {
        return Read.readAfter(db, startCursor, 1000, few)
      } finally {
        db.close()
      }
    })()
    const { batches, thread } = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const repository = yield* Repository
      const seen: Array<Item> = []
      let cursor = startCursor
      let batches = 0
      for (;;) {
        const batch = yield* repository.readAfter(cursor, 2)
        seen.push(...batch.items)
        cursor = batch.cursor
        batches++
        if (!batch.more) break
      }
      expect(cursor).toEqual(all.cursor)
      expect(seen).toEqual(all.items)
      return { batches, thread: yield* repository.thread(root) }
    }).pipe(Effect.provide(FossilRepository.layer({ path: repo })))))
    expect(batches).toBeGreaterThan(3)
    expect(thread).toEqual(all.items.filter((i) => i._tag === "Post" && i.root === root))
    expect(thread.map((p) => p.editOf)).toContain(root)
    // the web form trims the text; the original is a delta against its edit and still reads whole
    expect(thread.find((p) => p.hash === root)?.text).toBe("a long text. ".repeat(30).trim())
  })
})
