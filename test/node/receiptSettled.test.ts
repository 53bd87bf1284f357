import BetterSqlite3 from "better-sqlite3"
import * as Zlib from "node:zlib"
import { describe, expect, it } from "vitest"
import { unsettledAfter } from "../../src/node/ReceiptSettled.js"

// What a round (and the hook's first look) waits for: posts and ticket changes after the cursor that
// have no row yet. Artifacts stored as Fossil stores them (a 4-byte size, then zlib) in the tables
// the question reads.

const stored = (text: string) => {
  const bytes = Buffer.from(text, "latin1")
  const size = Buffer.alloc(4)
  size.writeUInt32BE(bytes.length)
  return Buffer.concat([size, Zlib.deflateSync(bytes)])
}

const repository = (artifacts: ReadonlyArray<{ readonly text: string; readonly row?: boolean }>) => {
  const db = new BetterSqlite3(":memory:")
  db.exec(`CREATE TABLE blob (rid INTEGER PRIMARY KEY, rcvid INTEGER, size INTEGER, uuid TEXT, content BLOB);
    CREATE TABLE rcvfrom (rcvid INTEGER PRIMARY KEY, mtime DATETIME);
    CREATE TABLE delta (rid INTEGER PRIMARY KEY, srcid INTEGER);
    CREATE TABLE forumpost (fpid INTEGER PRIMARY KEY);
    INSERT INTO rcvfrom VALUES (1, julianday('now'));`)
  artifacts.forEach((a, i) => {
    db.prepare("INSERT INTO blob VALUES (?, 1, ?, ?, ?)").run(i + 1, a.text.length, `h${i}`, stored(a.text))
    if (a.row === true) db.prepare("INSERT INTO forumpost VALUES (?)").run(i + 1)
  })
  return db
}

const post = "D 2026-12-03T08:00:00.000\nH a\\srun\nU alice\nW 20\n```json\n{\"ocx\": 2}\n```\nZ 0123\n"

describe("unsettledAfter", () => {
  it("counts a post without its row, not one with it, and not a file whose lines look like cards", () => {
    const db = repository([
      { text: post },
      { text: post.replace("H a", "H b"), row: true },
      // a pushed file that holds a W line and mentions ocx: no artifact opens that way
      { text: `notes\nW 20\nocx is here\n${"x".repeat(100_000)}` }
    ])
    try {
      expect(unsettledAfter(db, { rcvid: 0, rid: 0 }).count).toBe(1)
    } finally {
      db.close()
    }
  })

  it("counts a clear-signed post without its row", () => {
    const db = repository([{ text: `-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\n${post}` }])
    try {
      expect(unsettledAfter(db, { rcvid: 0, rid: 0 }).count).toBe(1)
    } finally {
      db.close()
    }
  })
})
