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
// an earlier cursor) given after the replies that followed it. The wait spares reading again; it
// cannot keep a cursor honest by itself (the page may write between the wait and the read): the
// read after a cursor stops before such a post in its own snapshot (src/fossil/Read.ts).

import type BetterSqlite3 from "better-sqlite3"
import { awaitsItsRow, receivedMsAgo, settleMs } from "../fossil/Unsettled.js"
import type { Cursor } from "../root/HookFiles.js"

export { settleMs }

export interface Unsettled {
  /** artifacts after the cursor written as a post or ticket change that holds "ocx", with no row of theirs yet */
  readonly count: number
  /** how long ago the newest of them was received (ms) */
  readonly youngestMs: number
}

const tableExists = (db: BetterSqlite3.Database, name: string) =>
  db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined

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
    if (!awaitsItsRow(row.content, row.delta !== 0, options?.everyPost === true)) continue
    count++
    youngestMs = Math.min(youngestMs, receivedMsAgo(row.mtime, now))
  }
  return { count, youngestMs }
}
