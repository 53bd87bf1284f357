import BetterSqlite3 from "better-sqlite3"
import * as Zlib from "node:zlib"
import { describe, expect, it } from "vitest"
import { readArrivals } from "../../src/node/HookFast.js"
import { writeMessage } from "../../src/protocol/Envelope.js"

// The hook's cheap question (and the supervisor's): of what arrived after the cursor, what may hold
// a message the round acts on. The node's own replies, a run for another node and a post that only
// mentions ocx are not; a run for this node, a stop, a publish, a ticket change mentioning ocx and
// anything not at hand cheaply (a delta) are. Artifacts stored as Fossil stores them (a 4-byte
// size, then zlib) in the tables the question reads.

const run = "a".repeat(64)
const node = "lab"

const stored = (text: string) => {
  const bytes = Buffer.from(text, "utf8")
  const size = Buffer.alloc(4)
  size.writeUInt32BE(bytes.length)
  return Buffer.concat([size, Zlib.deflateSync(bytes)])
}

const postArtifact = (text: string) =>
  `D 2026-12-04T08:00:00.000\nG ${run}\nI ${run}\nU lab\nW ${Buffer.byteLength(text)}\n${text}\nZ 0123\n`

type Stored = { readonly post?: string; readonly ticket?: string; readonly delta?: boolean; readonly file?: string }

const repository = (artifacts: ReadonlyArray<Stored>) => {
  const db = new BetterSqlite3(":memory:")
  db.exec(`CREATE TABLE blob (rid INTEGER PRIMARY KEY, rcvid INTEGER, size INTEGER, uuid TEXT, content BLOB);
    CREATE TABLE delta (rid INTEGER PRIMARY KEY, srcid INTEGER);
    CREATE TABLE forumpost (fpid INTEGER PRIMARY KEY);
    CREATE TABLE ticketchng (tkt_rid INTEGER);`)
  artifacts.forEach((a, i) => {
    const rid = i + 1
    const text = a.post !== undefined ? postArtifact(a.post) : a.ticket !== undefined ? `D 2026-12-04T08:00:00.000\nJ icomment ${a.ticket.replace(/ /g, "\\s").replace(/\n/g, "\\n")}\nK ${"b".repeat(40)}\nU alice\nZ 0123\n` : a.file!
    db.prepare("INSERT INTO blob VALUES (?, 1, ?, ?, ?)").run(rid, text.length, `h${rid}`, stored(text))
    if (a.post !== undefined) db.prepare("INSERT INTO forumpost VALUES (?)").run(rid)
    if (a.ticket !== undefined) db.prepare("INSERT INTO ticketchng VALUES (?)").run(rid)
    if (a.delta === true) db.prepare("INSERT INTO delta VALUES (?, 1)").run(rid)
  })
  return db
}

const maybeOf = (artifacts: ReadonlyArray<Stored>) => {
  const db = repository(artifacts)
  try {
    return readArrivals(db, { rcvid: 0, rid: 0 }, node)
  } finally {
    db.close()
  }
}

describe("readArrivals", () => {
  it("passes the node's own replies, a run for another node, a malformed block and a post that only mentions ocx", () => {
    const arrivals = maybeOf([
      { post: writeMessage({ ocx: 2, re: run, started: { node } }, "Started.") },
      { post: writeMessage({ ocx: 2, re: run, report: { stdout: "{\"run\": 1, \"stop\": 2}" } }) },
      { post: writeMessage({ ocx: 2, re: run, ended: { outcome: "exited", exit: 0 } }) },
      { post: writeMessage({ ocx: 2, to: "lab2", run: { objective: "x" } }) },
      { post: writeMessage({ ocx: 2, re: run, stop: {}, publish: {} }) },
      { post: "What is ocx? A plain question." },
      { file: "a pushed file that mentions ocx and a W card\nW 3\nocx\n" }
    ])
    expect(arrivals).toEqual({ count: 7, newest: { rcvid: 1, rid: 7 }, maybe: 0 })
  })

  it("counts a run for this node, a stop, a publish, a ticket change mentioning ocx and a post stored as a delta", () => {
    expect(maybeOf([{ post: writeMessage({ ocx: 2, to: node, run: { objective: "x" } }, "A run.") }]).maybe).toBe(1)
    expect(maybeOf([{ post: writeMessage({ ocx: 2, re: run, stop: {} }) }]).maybe).toBe(1)
    expect(maybeOf([{ post: writeMessage({ ocx: 2, re: run, publish: { files: ["a"] } }) }]).maybe).toBe(1)
    expect(maybeOf([{ ticket: writeMessage({ ocx: 2, re: run, started: {} }) }]).maybe).toBe(1)
    expect(maybeOf([{ ticket: "a ticket about something else" }]).maybe).toBe(0)
    expect(maybeOf([{ post: writeMessage({ ocx: 2, re: run, ended: {} }), delta: true }]).maybe).toBe(1)
  })

  it("reads a key spelled with an escape as the round reads it: a run for this node", () => {
    const text = "```json\n{\"ocx\": 2, \"to\": \"lab\", \"\\u0072un\": {\"objective\": \"x\"}}\n```\n"
    expect(maybeOf([{ post: text }]).maybe).toBe(1)
  })
})
