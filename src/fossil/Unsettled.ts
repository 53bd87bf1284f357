// Which received artifacts may still be waiting for their rows. Fossil's web pages write without
// one enclosing transaction: a forum post's artifact (blob, rcvfrom, even its event) is committed
// before its crosslink makes its forumpost row (and, for the repository's first post, the
// forumpost table itself). A reader that looks in between sees a blob that is no post. Shared by
// the read after a cursor (Read.ts), which stops before such a blob, and the node's wait for rows
// (src/node/ReceiptSettled.ts).

import * as Zlib from "node:zlib"

/** How long a receipt is waited for to have its row: a page that died half-way is not waited for longer. */
export const settleMs = 10_000

/** The Julian day (rcvfrom.mtime's unit) `ms` before `now`: receipts after it are young. */
export const julianDayBefore = (now: number, ms: number): number => (now - ms) / 86_400_000 + 2440587.5

/** How long ago a receipt of Julian day `mtime` was made (ms); no receipt row yet: as young as can be. */
export const receivedMsAgo = (mtime: number | null, now: number): number =>
  mtime === null ? 0 : now - (mtime - 2440587.5) * 86_400_000

/** A forum post (W card, neither wiki's L nor a tech-note's E) or a ticket change (K card) that mentions ocx (or any, with everyPost). */
export const postOrTicketChange = (text: string, everyPost: boolean): boolean => {
  if (!everyPost && !text.includes("ocx")) return false
  const cards = new Set(text.split("\n").map((line) => line.slice(0, 2)))
  return (cards.has("W ") && !cards.has("L ") && !cards.has("E ")) || cards.has("K ")
}

/** Whether a stored artifact (Fossil's 4-byte size, then zlib) opens as a post or ticket change can: a D card, or a clear-signed one. */
export const mayBeControlArtifact = (content: Buffer): boolean => {
  let opening: string
  try {
    opening = Zlib.inflateSync(content.subarray(4, 4 + 256), { finishFlush: Zlib.constants.Z_SYNC_FLUSH }).toString("latin1", 0, 16)
  } catch {
    return true // read whole by the caller, which says
  }
  return opening.startsWith("D ") || opening.startsWith("-----BEGIN")
}

/**
 * Whether a stored blob with no forumpost or ticketchng row is a post or ticket change whose row
 * may still come. A delta is an edit of something already crosslinked, or a check-in's file: not.
 * A pushed check-in's files are passed by on their first bytes, not inflated whole.
 */
export const awaitsItsRow = (content: Buffer | null, delta: boolean, everyPost: boolean): boolean => {
  if (content === null || delta) return false
  if (!mayBeControlArtifact(content)) return false
  let text: string
  try {
    text = Zlib.inflateSync(content.subarray(4)).toString("latin1")
  } catch {
    return false
  }
  return postOrTicketChange(text, everyPost)
}
