import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as LiveHosts from "../../layers/LiveHosts.js"
import { anySession, readSessionFiles, removeSessionFile, writeSessionFile } from "../../src/care/SessionFiles.js"
import { users } from "../../src/demo/LocalNode.js"
import { openDatabase } from "../../src/fossil/Sqlite.js"
import * as Read from "../../src/fossil/Read.js"
import { hookRound, servedHookRound, watcherOf } from "../../src/node/Round.js"
import { Hosts } from "../../services/Hosts.js"
import { Repository, type Cursor } from "../../services/Repository.js"
import { releasePaths } from "../../src/release/ReleasePaths.js"
import type { NodeConfig } from "../../src/root/NodeConfig.js"
import { cursorFileOf, readCursor, writeCursor, writeNode } from "../../src/root/HookFiles.js"
import { flockHeld } from "../../src/care/FlockHeld.js"
import { dist, makeWorld, type World } from "../support/world.js"
import { waitFor } from "./hookWorld.js"

// A reply read while Fossil's page is half-way through writing it: its artifact and receipt are
// committed, its forumpost row is not yet (src/node/ReceiptSettled.ts). In fast mode the poller
// runs the backoffice, and so the hook's round, as soon as the file changed, so a round can read
// that state. It passed the reply by and moved its cursor past it: the reply was never given; and
// once something read the arrivals again from an earlier cursor (sessions.test's feed case sets
// the node's cursor back, while the other cases run), it was given after the replies that
// followed it: the deliveries-start case once read "two" in its first process. The state is made
// here by holding the reply's forumpost row back, as the page does, and the round (or the hook's
// program) is run by hand (no hook is installed: nothing else reads or moves the cursor).

let world: World
let config: NodeConfig
beforeAll(async () => {
  world = await makeWorld({ prefix: "ocx2-halfpost-", checkin: {}, backoffice: false })
  writeNode(world.root, world.repository, { user: users.node.login, serverUrl: world.server.url })
  config = { root: world.root, repository: world.repository, nodeUser: users.node.login, serverUrl: world.server.url, passwordsFile: undefined }
}, 120_000)
afterAll(() => world?.close())

const db = () => openDatabase(world.repository, { fileMustExist: true })

const placeOf = (hash: string) => {
  const d = db()
  try {
    return d.prepare<[string], { rcvid: number; rid: number }>("SELECT rcvid, rid FROM blob WHERE uuid = ?").get(hash)!
  } finally {
    d.close()
  }
}

/**
 * When the server received the artifact (epoch ms): the read holds back only a post received in the
 * last 10 s, so a test reads "now" as a moment after it, whatever the machine's load made of the
 * time between the post and the read.
 */
const receivedAt = (hash: string): number => {
  const d = db()
  try {
    const jd = d.prepare<[string], { mtime: number }>("SELECT r.mtime FROM blob b JOIN rcvfrom r USING (rcvid) WHERE b.uuid = ?").get(hash)!.mtime
    return Math.round((jd - 2440587.5) * 86_400_000)
  } finally {
    d.close()
  }
}

/** The reply's forumpost row taken out (as before the page's crosslink); the returned function puts it back. */
const holdRow = (hash: string) => {
  const d = db()
  try {
    const { rid } = placeOf(hash)
    const row = d.prepare<[number], Record<string, unknown>>("SELECT * FROM forumpost WHERE fpid = ?").get(rid)!
    d.prepare("DELETE FROM forumpost WHERE fpid = ?").run(rid)
    return () => {
      const w = db()
      try {
        const names = Object.keys(row)
        w.prepare(`INSERT INTO forumpost (${names.join(", ")}) VALUES (${names.map((n) => `@${n}`).join(", ")})`).run(row)
      } finally {
        w.close()
      }
    }
  } finally {
    d.close()
  }
}

const round = () => servedHookRound(config).pipe(Effect.provide(LiveHosts.layer))

const delivered = (run: string): ReadonlyArray<string> => {
  const file = Path.join(releasePaths(world.root).care, `${run}.inbox`)
  if (!Fs.existsSync(file)) return []
  return Fs.readFileSync(file, "utf8").trim().split("\n").filter((l) => l !== "").map((l) => (JSON.parse(JSON.parse(l).line) as { text: string }).text)
}

describe("a reply read half-written by a round", () => {
  it.live("is waited for, not passed by: a session is given it, and in the server's order when what arrived is read again", () => Effect.gen(function*() {
    const thread = yield* Effect.promise(() => world.post({ run: "x" }, { to: "nobody", title: "the session's thread" }))
    // a session in care on that thread, its started placed at the thread's post
    const run = "f".repeat(40)
    const at = placeOf(thread)
    Fs.mkdirSync(releasePaths(world.root).care, { recursive: true, mode: 0o700 })
    writeSessionFile(world.root, {
      run, processUser: "session-user", thread, checkins: [], hears: ["*"],
      started: { hash: thread, rcvid: at.rcvid, rid: at.rid }
    })
    const cursorFile = cursorFileOf(world.root, world.repository, users.node.login)
    writeCursor(cursorFile, at)

    const one = yield* Effect.promise(() => world.reply(users.admin.login, thread, "one"))
    const putBack = holdRow(one)
    const two = yield* Effect.promise(() => world.reply(users.admin.login, thread, "two"))
    const reading = yield* Effect.fork(round())
    // the page finishes its reply while the round may be reading: the round ends before that without the fix
    yield* Effect.raceFirst(Effect.asVoid(Fiber.await(reading)), Effect.sleep("1 second"))
    putBack()
    yield* Fiber.join(reading)
    // soft, so that without the wait the read again below shows the order it then gives: two, one
    expect.soft(delivered(run)).toEqual(["one", "two"])
    expect.soft(readCursor(cursorFile)).toEqual(placeOf(two))

    // what arrived read again from before the reply (the feed case's cursor set back): nothing given twice or out of order
    writeCursor(cursorFile, at)
    yield* round()
    expect(delivered(run)).toEqual(["one", "two"])
  }), 120_000)

  // The hook's first look, before any round: a run's post without its forumpost row looked like no
  // post, and with no session in care the hook moved its cursor past it without taking round.lock.
  // The run then waited for the node's next start (sessions.test's feed case once waited a minute
  // for a first line that never came). The row is put back once the hook's round holds round.lock,
  // or once the hook is over: without the fix, after it passed the run by.
  it.live("has the hook's first look go to the round, which waits for it, not pass it by", () => Effect.gen(function*() {
    // no session in care (the case above left one): with one, the hook reads every arrival in a round anyway
    for (const session of readSessionFiles(world.root)) removeSessionFile(world.root, session.run)
    expect(anySession(world.root)).toBe(false)
    const anchor = yield* Effect.promise(() => world.post({ process: "anchor" }, { to: "nobody", title: "before" }))
    const cursorFile = cursorFileOf(world.root, world.repository, users.node.login)
    writeCursor(cursorFile, placeOf(anchor))
    const run = yield* Effect.promise(() => world.post({}, { title: "a run caught half-written" }))
    const putBack = holdRow(run)
    const log = Path.join(world.dir, "half-hook.log")
    const hook = ChildProcess.spawn(process.execPath, [Path.join(dist, "ocx2-hook.mjs"), "--root", world.root, "--log", log, world.repository], { stdio: "ignore" })
    const exited = new Promise((resolve) => hook.once("exit", resolve))
    let over = false
    void exited.then(() => (over = true))
    const roundLock = Path.join(releasePaths(world.root).care, "round.lock")
    yield* Effect.promise(() => waitFor(() => over || flockHeld(roundLock) === "held" || undefined, 30_000, 50))
    putBack()
    yield* Effect.promise(() => exited)
    const entry = JSON.parse(Fs.readFileSync(log, "utf8").trim().split("\n").at(-1)!) as { did: ReadonlyArray<string>; to?: unknown }
    expect(entry.did.some((d) => d.startsWith(`${run}: `)), entry.did.join("; ")).toBe(true)
    expect(entry.to).toEqual(placeOf(run))
  }), 120_000)
})

/** The artifact's blob row taken out (as before the page wrote it) and its forumpost row: put back in two steps, as the page commits them. */
const holdWhole = (hash: string) => {
  const d = db()
  try {
    const { rid } = placeOf(hash)
    const blob = d.prepare<[number], Record<string, unknown>>("SELECT * FROM blob WHERE rid = ?").get(rid)!
    const row = d.prepare<[number], Record<string, unknown>>("SELECT * FROM forumpost WHERE fpid = ?").get(rid)!
    d.prepare("DELETE FROM forumpost WHERE fpid = ?").run(rid)
    d.prepare("DELETE FROM blob WHERE rid = ?").run(rid)
    const insert = (table: string, values: Record<string, unknown>) => () => {
      const w = db()
      try {
        const names = Object.keys(values)
        w.prepare(`INSERT INTO ${table} (${names.join(", ")}) VALUES (${names.map((n) => `@${n}`).join(", ")})`).run(values)
      } finally {
        w.close()
      }
    }
    // the page commits its blob now: its receipt is as young as a page's (the read holds back only
    // what was received in the last 10 s), however long the machine's load made the test so far
    const receivedNow = () => {
      const w = db()
      try {
        w.prepare("UPDATE rcvfrom SET mtime = julianday('now') WHERE rcvid = ?").run(blob["rcvid"])
      } finally {
        w.close()
      }
    }
    const writeBlob = insert("blob", blob)
    return {
      writeBlob: () => {
        receivedNow()
        writeBlob()
      },
      crosslink: insert("forumpost", row)
    }
  } finally {
    d.close()
  }
}

const readAfter = (cursor: Cursor, options: Read.ReadOptions = { senders: true }, now?: number) => {
  const d = openDatabase(world.repository, { readonly: true, fileMustExist: true })
  try {
    return Read.readAfter(d, cursor, 1000, options, now)
  } finally {
    d.close()
  }
}

// Issue 37, 2: the cursor passes only what was read whole. A post whose blob is committed and whose
// forumpost row is not yet is, in that snapshot, no post; a cursor moved past it never comes back.
describe("the read after a cursor, in a snapshot holding a post's blob without its row", () => {
  it("stops before the post, and reads it with its row once the row is written", async () => {
    const root = await world.post({ run: "z" }, { to: "nobody", title: "a thread read whole" })
    const before = placeOf(root)
    const one = await world.reply(users.admin.login, root, "read whole one")
    const two = await world.reply(users.admin.login, root, "read whole two")
    const putBack = holdRow(one)
    // what an earlier case's runs add meanwhile (their nodes' replies) may come before or after
    // them: the posts of this thread are what is looked at, and where the cursor stands
    const ours = (hashes: ReadonlyArray<string>) => hashes.filter((h) => h === one || h === two)
    const before1 = (c: Cursor, p: Cursor) => c.rcvid < p.rcvid || (c.rcvid === p.rcvid && c.rid < p.rid)
    // both ways of reading (by rid when few arrived, by one pass when many) stop there
    for (const fewArtifacts of [2000, 0]) {
      const batch = readAfter(before, { senders: true, fewArtifacts }, receivedAt(two) + 1000)
      expect(ours(batch.items.map((i) => i.hash)), `fewArtifacts ${fewArtifacts}`).toEqual([])
      expect(before1(batch.cursor, placeOf(one)) && !before1(batch.cursor, before), `fewArtifacts ${fewArtifacts}: ${JSON.stringify(batch.cursor)}`).toBe(true)
      expect(batch.unread, `fewArtifacts ${fewArtifacts}`).toEqual(placeOf(one))
    }
    putBack()
    const batch = readAfter(before)
    expect(ours(batch.items.map((i) => i.hash))).toEqual([one, two])
    expect(before1(batch.cursor, placeOf(two)), JSON.stringify(batch.cursor)).toBe(false)
    expect(batch.unread).toBeUndefined()
  }, 120_000)

  // The round's interleaving: its wait for rows finds no half-written post (the page has not written
  // the blob yet), the page commits the blob before the round's read and the row right after it, so
  // a look after the read finds every row in place. The real read and the real round, with the
  // repository's readAfter wrapped to let the page write at those two moments, once.
  it.live("has the round give a session the post whose row landed just after its read, in the server's order", () => Effect.gen(function*() {
    const root = yield* Effect.promise(() => world.post({ run: "y" }, { to: "nobody", title: "another session's thread" }))
    const run = "e".repeat(40)
    const at = placeOf(root)
    Fs.mkdirSync(releasePaths(world.root).care, { recursive: true, mode: 0o700 })
    for (const session of readSessionFiles(world.root)) removeSessionFile(world.root, session.run)
    writeSessionFile(world.root, {
      run, processUser: "session-user", thread: root, checkins: [], hears: ["*"],
      started: { hash: root, rcvid: at.rcvid, rid: at.rid }
    })
    const cursorFile = cursorFileOf(world.root, world.repository, users.node.login)
    writeCursor(cursorFile, at)
    const one = yield* Effect.promise(() => world.reply(users.admin.login, root, "landed late"))
    const two = yield* Effect.promise(() => world.reply(users.admin.login, root, "after it"))
    const page = holdWhole(one)
    let first = true
    const interleaved = Layer.effect(Repository, Effect.map(Repository, (real) => ({
      ...real,
      readAfter: (cursor: Cursor, limit?: number) => {
        if (!first) return real.readAfter(cursor, limit)
        first = false
        return Effect.sync(page.writeBlob).pipe(
          Effect.zipRight(real.readAfter(cursor, limit)),
          Effect.tap(() => Effect.sync(page.crosslink))
        )
      }
    })))
    yield* Effect.flatMap(Hosts, (hosts) =>
      hookRound(config, { watcherProgram: watcherOf(config.root) }).pipe(
        Effect.provide(interleaved),
        Effect.provide(hosts.served(config))
      )).pipe(Effect.provide(LiveHosts.layer))
    expect(first).toBe(false)
    expect(delivered(run)).toEqual(["landed late", "after it"])
    // past both (an earlier case's run may have been answered meanwhile, after them)
    const cursor = readCursor(cursorFile)!
    expect(cursor.rcvid > placeOf(two).rcvid || (cursor.rcvid === placeOf(two).rcvid && cursor.rid >= placeOf(two).rid), JSON.stringify(cursor)).toBe(true)
  }), 120_000)
})
