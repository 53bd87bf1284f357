/**
 * The Repository and Receipts services on the server's host, against a real
 * `fossil server`: what the service writes is received from the named user and shown
 * by Fossil's own pages; what people write through the web forms and by pushing from
 * a clone is read back with the right sender, thread, ticket and order.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Path from "node:path"
import BetterSqlite3 from "better-sqlite3"
import * as FossilReceipts from "../../layers/FossilReceipts.js"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { Receipts } from "../../services/Receipts.js"
import { type Item, type Post, Repository, startCursor } from "../../services/Repository.js"
import { composeForumPost } from "../../src/fossil/Artifact.js"
import { readMessage } from "../../src/protocol/Envelope.js"
import {
  cloneAs, fossil, pushArtifacts, type RunningServer, webEdit,
  webEditTicket, webLogin, webNewThread, webNewTicket, webPage, webReply
} from "../support/fossilServer.js"
import { makeWorld, type World } from "../support/world.js"

const users = [
  { login: "alice", capabilities: "gio234nrwcy", password: "pw-alice" },
  { login: "bob", capabilities: "gio234nrwcy", password: "pw-bob" },
  { login: "carol", capabilities: "gjo23", password: "pw-carol" }, // web posts held for moderation
  { login: "mod", capabilities: "gox2345", password: "pw-mod" }
]

let world: World | undefined
let dir: string
let server: RunningServer
let repo: string

beforeAll(async () => {
  world = await makeWorld({ prefix: "ocx2-test-", users, checkin: {} })
  ;({ dir, server, repository: repo } = world)
}, 90_000)

afterAll(async () => {
  await world?.close()
})

const served = () =>
  Layer.merge(FossilRepository.layer({ path: repo }), FossilReceipts.layer({ path: repo }))

const run = <A, E>(effect: Effect.Effect<A, E, Repository | Receipts>) =>
  Effect.runPromise(Effect.scoped(effect.pipe(Effect.provide(served()))))

const posts = (items: ReadonlyArray<Item>) => items.filter((i): i is Post => i._tag === "Post")

describe("writes on the server's host", () => {
  it("a post written as alice is received from alice and shown by /forumpost", async () => {
    const text = '```json\n{"ocx": 2, "to": "lab", "run": {}}\n```'
    const { written, receipt } = await run(Effect.gen(function*() {
      const repository = yield* Repository
      const written = yield* repository.post({ user: "alice", title: "Run one", text })
      const [receipt] = yield* (yield* Receipts).receipts([written.hash])
      return { written, receipt }
    }))
    expect(written.sent).toBe(true)
    expect(written.receipt?.sender).toBe("alice")
    expect(receipt).toMatchObject({ _tag: "Received", sender: "alice", rid: written.receipt!.rid, rcvid: written.receipt!.rcvid })
    const page = await webPage(`${server.url}forumpost/${written.hash}`, await webLogin(server.url, "bob", "pw-bob"))
    expect(page.status).toBe(200)
    expect(page.text).toContain("Run one")
    expect(page.text).toContain("&quot;lab&quot;")
  })

  it("a reply lands in the right thread, answering the right post; a retry writes nothing", async () => {
    const result = await run(Effect.gen(function*() {
      const repository = yield* Repository
      const root = yield* repository.post({ user: "alice", title: "Thread A", text: "root A" })
      const other = yield* repository.post({ user: "alice", title: "Thread B", text: "root B" })
      const r1 = yield* repository.reply({ user: "bob", to: root.hash, text: "first answer" })
      const r2 = yield* repository.reply({ user: "alice", to: r1.hash.slice(0, 12), text: "answer to the answer" })
      const artifact = composeForumPost({ user: "bob", date: new Date("2026-01-02T03:04:05Z"), root: root.hash, replyTo: root.hash, text: "once" })
      const once = yield* repository.put("bob", artifact)
      const again = yield* repository.put("bob", artifact)
      const thread = yield* repository.thread(r2.hash)
      const otherThread = yield* repository.thread(other.hash)
      return { root, other, r1, r2, once, again, thread, otherThread }
    }))
    expect(result.r2.root).toBe(result.root.hash)
    expect(result.thread.map((p) => p.hash)).toEqual([result.root.hash, result.r1.hash, result.r2.hash, result.once.hash])
    expect(result.thread.map((p) => p.sender)).toEqual(["alice", "bob", "alice", "bob"])
    expect(result.thread[2]!.inReplyTo).toBe(result.r1.hash)
    expect(result.thread[1]!.title).toBeUndefined()
    expect(result.otherThread.map((p) => p.hash)).toEqual([result.other.hash])
    expect(result.once.sent).toBe(true)
    expect(result.again).toEqual({ ...result.once, sent: false })
    const bob = await webLogin(server.url, "bob", "pw-bob")
    // the source view of each reply, as Fossil's forum shows it
    expect((await webPage(`${server.url}forumpost/${result.r1.hash}?raw`, bob)).text).toContain("first answer")
    expect((await webPage(`${server.url}forumpost/${result.r2.hash}?raw`, bob)).text).toContain("answer to the answer")
  })

  it("ticket changes land in the right ticket and show on /tktview", async () => {
    const session = await webLogin(server.url, "alice", "pw-alice")
    const webTicket = await webNewTicket(session, { title: "Web ticket", icomment: "opened on the web" })
    await webEditTicket(await webLogin(server.url, "bob", "pw-bob"), { ticket: webTicket, icomment: "bob on the web" })
    const result = await run(Effect.gen(function*() {
      const repository = yield* Repository
      const change = yield* repository.ticketChange({ user: "alice", ticket: webTicket.slice(0, 10), fields: { icomment: "alice by the service" } })
      const fresh = yield* repository.ticketChange({ user: "bob", fields: { title: "Service ticket", status: "Open", icomment: "new by bob" } })
      return { change, fresh, changes: yield* repository.ticket(webTicket), freshChanges: yield* repository.ticket(fresh.ticket) }
    }))
    expect(result.change.ticket).toBe(webTicket)
    expect(result.changes.map((c) => [c.sender, c.text])).toEqual([
      ["alice", "opened on the web"], ["bob", "bob on the web"], ["alice", "alice by the service"]
    ])
    expect(result.freshChanges.map((c) => [c.sender, c.text, c.hash])).toEqual([["bob", "new by bob", result.fresh.hash]])
    const page = await webPage(`${server.url}tktview/${result.fresh.ticket}`, session)
    expect(page.text).toContain("Service ticket")
    expect(page.text).toContain("new by bob")
    const webPageOfWebTicket = await webPage(`${server.url}tktview/${webTicket}`, session)
    expect(webPageOfWebTicket.text).toContain("alice by the service")
  })

  it("a raw ci tag is visible to `fossil tag` and /info, with its sender", async () => {
    const checkin = (await fossil(["sql", "-R", repo, "SELECT uuid FROM blob JOIN event ON objid = rid WHERE type = 'ci'"])).trim().replace(/'/g, "")
    const result = await run(Effect.gen(function*() {
      const repository = yield* Repository
      const written = yield* repository.tag({ user: "bob", checkin: checkin.slice(0, 10), name: "ci", value: "pass: tests ok (against abc)" })
      return { written, tags: yield* repository.tags(checkin) }
    }))
    expect(result.written.receipt?.sender).toBe("bob")
    expect(result.tags.current).toContainEqual({ name: "ci", value: "pass: tests ok (against abc)", source: result.written.hash })
    expect(result.tags.history.map((t) => [t.sender, t.tags])).toEqual([
      ["bob", [{ op: "+", name: "ci", target: checkin, value: "pass: tests ok (against abc)" }]]
    ])
    expect(await fossil(["tag", "list", "--raw", checkin, "-R", repo])).toContain("ci=pass: tests ok (against abc)")
    const info = await webPage(`${server.url}info/${result.written.hash}`, await webLogin(server.url, "alice", "pw-alice"))
    expect(info.text).toContain("Add &quot;ci&quot; with value &quot;pass: tests ok (against abc)&quot;")
  })

  it("an unversioned file is visible to `fossil uv` and the web, received from its writer", async () => {
    const result = await run(Effect.gen(function*() {
      const repository = yield* Repository
      const written = yield* repository.putUnversioned({ user: "alice", name: "reports/run1.json", content: '{"ok":true}' })
      const again = yield* repository.putUnversioned({ user: "alice", name: "reports/run1.json", content: '{"ok":true}' })
      return { written, again, list: yield* repository.unversioned(), file: yield* repository.readUnversioned("reports/run1.json") }
    }))
    expect(result.written.sender).toBe("alice")
    expect(result.again.rcvid).toBe(result.written.rcvid)
    expect(result.list.map((f) => [f.name, f.sender])).toEqual([["reports/run1.json", "alice"]])
    expect(result.file.content.toString()).toBe('{"ok":true}')
    expect(await fossil(["uv", "list", "-R", repo])).toContain("reports/run1.json")
    expect(await fossil(["uv", "cat", "reports/run1.json", "-R", repo])).toBe('{"ok":true}')
    const page = await webPage(`${server.url}uv/reports/run1.json`, await webLogin(server.url, "bob", "pw-bob"))
    expect(page.text).toBe('{"ok":true}')
  })
})

describe("reading what people wrote", () => {
  it("the cursor sees web posts, edits (deltas), pushes and ticket changes once each, in server order, private posts skipped", async () => {
    const start = await run(Effect.gen(function*() {
      return (yield* (yield* Repository).readAfter(startCursor)).cursor
    }))
    const alice = await webLogin(server.url, "alice", "pw-alice")
    const bob = await webLogin(server.url, "bob", "pw-bob")
    const long = "no json here. ".repeat(40).trim()
    const root = await webNewThread(server, alice, { title: "Web run", text: long })
    const reply = await webReply(server, bob, { to: root, text: '```json\n{"ocx": 2, "re": "broken\n```' })
    const edit = await webEdit(server, alice, { of: root, title: "Web run (edited)", text: long + "edited" })
    const moderated = await webNewThread(server, await webLogin(server.url, "carol", "pw-carol"), { title: "Held", text: "waiting for a moderator" })
    // a clone push of two posts: one receipt; the first claims to be by bob
    const clone = await cloneAs(server.url, "alice", "pw-alice", Path.join(dir, "alice.fossil"))
    const claimed = composeForumPost({ user: "bob", date: new Date("2026-02-01T00:00:00Z"), root, replyTo: root, text: "pushed, claiming bob" })
    const second = composeForumPost({ user: "alice", date: new Date("2026-02-01T00:00:01Z"), root, replyTo: reply, text: "pushed second" })
    await pushArtifacts(clone, "alice", [claimed, second])

    const seen: Array<Item> = []
    const batches = await run(Effect.gen(function*() {
      const repository = yield* Repository
      let cursor = start
      let count = 0
      for (;;) {
        const batch = yield* repository.readAfter(cursor, 2)
        seen.push(...batch.items)
        cursor = batch.cursor
        count++
        if (!batch.more) break
      }
      const last = yield* repository.readAfter(cursor)
      return { count, last }
    }))
    expect(batches.count).toBeGreaterThan(2)
    expect(batches.last.items).toEqual([])
    const hashes = seen.map((i) => i.hash)
    expect(new Set(hashes).size).toBe(hashes.length)
    expect(hashes).toEqual([root, reply, edit, claimed.hash, second.hash].filter((h) => hashes.includes(h)))
    expect(hashes).toEqual(expect.arrayContaining([root, reply, edit, claimed.hash, second.hash]))
    expect(hashes).not.toContain(moderated)
    const byHash = new Map(posts(seen).map((p) => [p.hash, p]))
    expect(byHash.get(root)).toMatchObject({ sender: "alice", root, title: "Web run", text: long, inReplyTo: undefined })
    expect(byHash.get(edit)).toMatchObject({ sender: "alice", root, editOf: root, title: "Web run (edited)", text: long + "edited" })
    expect(byHash.get(claimed.hash)).toMatchObject({ sender: "alice", user: "bob", root, inReplyTo: root })
    expect(byHash.get(claimed.hash)!.rcvid).toBe(byHash.get(second.hash)!.rcvid)
    expect(byHash.get(second.hash)!.rid).toBeGreaterThan(byHash.get(claimed.hash)!.rid)

    // the edit made the original a delta; it is still read whole
    const db = new BetterSqlite3(repo, { readonly: true })
    const delta = db.prepare("SELECT 1 FROM delta WHERE rid = (SELECT rid FROM blob WHERE uuid = ?)").get(root)
    db.close()
    expect(delta).toBeDefined()
    const thread = await run(Effect.flatMap(Repository, (r) => r.thread(reply)))
    expect(thread.find((p) => p.hash === root)?.text).toBe(long)

    // texts with no JSON or broken JSON come back as written; the envelope reader classifies them
    expect(readMessage(byHash.get(root)!.text)._tag).toBe("NoMessage")
    expect(byHash.get(reply)!.text).toBe('```json\n{"ocx": 2, "re": "broken\n```')
    expect(["NoMessage", "Malformed"]).toContain(readMessage(byHash.get(reply)!.text)._tag)

    // the receipt of the pushed post names who pushed it, not its U card
    const answers = await run(Effect.flatMap(Receipts, (r) => r.receipts([claimed.hash, moderated])))
    expect(answers[0]).toMatchObject({ _tag: "Received", sender: "alice" })
    expect(answers[1]).toMatchObject({ _tag: "Received", sender: "carol" })
    const hidden = await run(Effect.flatMap(Receipts, (r) => r.receipts([claimed.hash, moderated], { caller: "carol" })))
    expect(hidden.map((a) => a._tag)).toEqual(["Received", "NotReceived"])
    const asModerator = await run(Effect.flatMap(Receipts, (r) => r.receipts([moderated], { caller: "mod" })))
    expect(asModerator[0]!._tag).toBe("Received")
  }, 90_000)

  it("users' capabilities are Fossil's fullcap()", async () => {
    await fossil(["user", "capabilities", "developer", "dei", "-R", repo])
    await fossil(["user", "new", "vee", "v@example.com", "pw", "-R", repo])
    await fossil(["user", "capabilities", "vee", "vu", "-R", repo])
    await fossil(["user", "capabilities", "anonymous", "hmnc2", "-R", repo])
    const expected = (await fossil(["sql", "-R", repo, "SELECT login || ' ' || fullcap(cap) FROM user ORDER BY login"]))
      .trim().split("\n").map((l) => l.replace(/'/g, "").split(" ")) as Array<[string, string?]>
    const actual = await run(Effect.gen(function*() {
      const repository = yield* Repository
      return yield* Effect.forEach(expected, ([login]) => repository.user(login))
    }))
    expect(actual.map((u) => [u!.login, u!.fullcap])).toEqual(expected.map(([l, c]) => [l, c ?? ""]))
    expect(actual.find((u) => u?.login === "vee")?.fullcap).toContain("d")
    const codes = await run(Effect.flatMap(Repository, (r) => r.codes()))
    expect(codes.projectCode).toMatch(/^[0-9a-f]{40}$/)
    expect(codes.serverCode).toMatch(/^[0-9a-f]{40}$/)
    expect(await run(Effect.flatMap(Repository, (r) => r.user("nosuch")))).toBeUndefined()
  })
})
