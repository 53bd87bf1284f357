// Whether what arrived after the cursor is readable as the node reads it. Fossil's web pages
// write without one enclosing transaction: a forum post's artifact (blob, rcvfrom, even its event)
// is committed before its crosslink makes its forumpost row (and, for the repository's first post,
// the forumpost table itself). The hook never sees that state, since Fossil calls it after the
// page is done; the supervisor, woken by the first write, can. A round then would pass the post by
// and move its cursor past it for good. So the supervisor waits, a little, for every artifact
// after its cursor that is written as a forum post or ticket change mentioning "ocx" to have its
// row, and reads only then (or once the receipt is old enough that nothing more will come).
// The hook's round waits the same way under round.lock: in fast mode Fossil's backoffice, which
// calls the hook, is run by the poller as soon as the file changed, so it too can land between
// the page's statements. While a session is in care every post counts, not only those mentioning
// ocx: a reply passed by that way was never given, or (once something read the arrivals again from
// an earlier cursor) given after the replies that followed it.

import type BetterSqlite3 from "better-sqlite3"
import * as Zlib from "node:zlib"
import type { Cursor } from "../root/HookFiles.js"

export interface Unsettled {
  /** artifacts after the cursor written as a post or ticket change that holds "ocx", with no row of theirs yet */
  readonly count: number
  /** how long ago the newest of them was received (ms) */
  readonly youngestMs: number
}

const tableExists = (db: BetterSqlite3.Database, name: string) =>
  db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined

/** A forum post (W card, neither wiki's L nor a tech-note's E) or a ticket change (K card) that mentions ocx (or any, with everyPost). */
const postOrTicketChange = (text: string, everyPost: boolean): boolean => {
  if (!everyPost && !text.includes("ocx")) return false
  const cards = new Set(text.split("\n").map((line) => line.slice(0, 2)))
  return (cards.has("W ") && !cards.has("L ") && !cards.has("E ")) || cards.has("K ")
}

/** Whether a stored artifact (Fossil's 4-byte size, then zlib) opens as a post or ticket change can: a D card, or a clear-signed one. */
const mayBeControlArtifact = (content: Buffer): boolean => {
  let opening: string
  try {
    opening = Zlib.inflateSync(content.subarray(4, 4 + 256), { finishFlush: Zlib.constants.Z_SYNC_FLUSH }).toString("latin1", 0, 16)
  } catch {
    return true // read whole below, which says
  }
  return opening.startsWith("D ") || opening.startsWith("-----BEGIN")
}

/** How long a receipt is waited for to have its row: a page that died half-way is not waited for longer. */
export const settleMs = 10_000

export const unsettledAfter = (
  db: BetterSqlite3.Database,
  cursor: Cursor,
  now = Date.now(),
  /** every post and ticket change, not only those mentioning ocx: a session in care may be given any */
  options?: { readonly everyPost?: boolean }
): Unsettled => {
  const forum = tableExists(db, "forumpost")
  const tickets = tableExists(db, "ticketchng")
  const hasRow = [
    ...(forum ? ["EXISTS (SELECT 1 FROM forumpost f WHERE f.fpid = b.rid)"] : []),
    ...(tickets ? ["EXISTS (SELECT 1 FROM ticketchng c WHERE c.tkt_rid = b.rid)"] : [])
  ]
  // its receipt row may come in a later statement too: a blob without one is as young as can be
  const rows = db.prepare<[number, number, number], { content: Buffer | null; mtime: number | null; delta: number }>(
    `SELECT b.content, r.mtime, EXISTS (SELECT 1 FROM delta d WHERE d.rid = b.rid) AS delta
     FROM blob b LEFT JOIN rcvfrom r ON r.rcvid = b.rcvid
     WHERE b.rcvid >= ? AND (b.rcvid > ? OR b.rid > ?) AND b.size >= 0 ${hasRow.length > 0 ? `AND NOT (${hasRow.join(" OR ")})` : ""}`
  ).all(cursor.rcvid, cursor.rcvid, cursor.rid)
  let count = 0
  let youngestMs = Number.POSITIVE_INFINITY
  for (const row of rows) {
    // a delta is an edit of something already crosslinked, or a check-in: not waited for
    if (row.content === null || row.delta !== 0) continue
    // a post or ticket change opens with its D card: a pushed check-in's files are passed by on
    // their first bytes, not inflated whole (the hook asks this on every receipt)
    if (!mayBeControlArtifact(row.content)) continue
    let text: string
    try {
      text = Zlib.inflateSync(row.content.subarray(4)).toString("latin1")
    } catch {
      continue
    }
    if (!postOrTicketChange(text, options?.everyPost === true)) continue
    count++
    youngestMs = Math.min(youngestMs, row.mtime === null ? 0 : now - (row.mtime - 2440587.5) * 86_400_000)
  }
  return { count, youngestMs }
}
