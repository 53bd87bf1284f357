/**
 * What a name means in a repository file, and the parts of the record `read` shows: a ticket by
 * its id, an artifact by its hash (a forum post, a check-in, a ticket change, or another
 * artifact), a check-in's files from its manifest (a delta manifest over its baseline), a file's
 * bytes. Synchronous and throwing, as Read.ts; the read tool turns throws into refusals.
 */
import type BetterSqlite3 from "better-sqlite3"
import { type Card, parseArtifact } from "./Artifact.js"
import { content } from "./Content.js"
import { defossilize } from "./Fossilize.js"
import { hasTable, stmt } from "./Read.js"
import { julianToMs } from "./ReadMessages.js"

type Db = BetterSqlite3.Database

export type Named =
  | { readonly _tag: "Post"; readonly rid: number; readonly hash: string; readonly root: number }
  | { readonly _tag: "Checkin"; readonly rid: number; readonly hash: string }
  | { readonly _tag: "Ticket"; readonly ticket: string; readonly change?: string }
  | { readonly _tag: "Other"; readonly rid: number; readonly hash: string; readonly what: string }
  | { readonly _tag: "None" }
  | { readonly _tag: "Ambiguous"; readonly what: string }

const eventWords: Record<string, string> = { w: "a wiki page's version", g: "a tag artifact", e: "a technote", t: "a ticket change" }

/** What `name` (a hash, a prefix of one, or a ticket id) names. */
export const resolveName = (db: Db, name: string): Named => {
  const tickets = stmt<[string, string], { id: string }>(db,
    "SELECT tkt_uuid AS id FROM ticket WHERE tkt_uuid = ? OR tkt_uuid GLOB ? || '*' LIMIT 2").all(name, name)
  const blobs = stmt<[string, string], { rid: number; hash: string; size: number }>(db,
    "SELECT rid, uuid AS hash, size FROM blob WHERE uuid = ? OR uuid GLOB ? || '*' LIMIT 2").all(name, name)
  const exact = blobs.find((b) => b.hash === name)
  if (exact === undefined && tickets.length + blobs.length > 1) return { _tag: "Ambiguous", what: tickets.length > 0 && blobs.length > 0 ? "ticket or artifact" : tickets.length > 1 ? "ticket" : "artifact" }
  if (exact === undefined && tickets.length === 1) return { _tag: "Ticket", ticket: tickets[0]!.id }
  const blob = exact ?? blobs[0]
  if (blob === undefined || blob.size < 0) return { _tag: "None" }
  // Fossil makes its forumpost table with the forum's first post: a repository without one has no posts
  const post = hasTable(db, "forumpost") ? stmt<[number], { froot: number }>(db, "SELECT froot FROM forumpost WHERE fpid = ?").get(blob.rid) : undefined
  if (post !== undefined) return { _tag: "Post", rid: blob.rid, hash: blob.hash, root: post.froot }
  const change = stmt<[number], { id: string }>(db,
    "SELECT t.tkt_uuid AS id FROM ticketchng c JOIN ticket t ON t.tkt_id = c.tkt_id WHERE c.tkt_rid = ?").get(blob.rid)
  if (change !== undefined) return { _tag: "Ticket", ticket: change.id, change: blob.hash }
  const event = stmt<[number], { type: string }>(db, "SELECT type FROM event WHERE objid = ?").get(blob.rid)
  if (event?.type === "ci") return { _tag: "Checkin", rid: blob.rid, hash: blob.hash }
  const isFile = stmt(db, "SELECT 1 FROM mlink WHERE fid = ? LIMIT 1").get(blob.rid) !== undefined
  const what = isFile ? "a file's content (read it by its path at a check-in)" : eventWords[event?.type ?? ""] ?? "an artifact that is no post, ticket or check-in"
  return { _tag: "Other", rid: blob.rid, hash: blob.hash, what }
}

export const isPrivate = (db: Db, rid: number): boolean => stmt(db, "SELECT 1 FROM private WHERE rid = ?").get(rid) !== undefined

export interface CheckinView {
  readonly hash: string
  readonly rid: number
  readonly time: number
  readonly user: string
  readonly sender: string | undefined
  readonly comment: string
  readonly branch: string | undefined
  readonly parents: ReadonlyArray<string>
  readonly tags: ReadonlyArray<{ readonly name: string; readonly value: string | undefined }>
  readonly files: ReadonlyArray<{ readonly path: string; readonly hash: string }>
}

/** The F cards of a manifest, over its baseline's when it is a delta manifest (its B card). */
const manifestFiles = (db: Db, rid: number): Map<string, string> => {
  const bytes = content(db, rid)
  if (bytes === undefined) throw new Error(`the check-in's manifest (rid ${rid}) is a phantom`)
  const cards = parseArtifact(bytes).cards
  const fileCards = (list: ReadonlyArray<Card>) => list.filter((c) => c.letter === "F")
  const baseline = cards.find((c) => c.letter === "B")?.args[0]
  const files = new Map<string, string>()
  if (baseline !== undefined) {
    const base = stmt<[string], { rid: number }>(db, "SELECT rid FROM blob WHERE uuid = ?").get(baseline)
    if (base === undefined) throw new Error(`the check-in's baseline manifest ${baseline} is not in the repository`)
    for (const [path, hash] of manifestFiles(db, base.rid)) files.set(path, hash)
  }
  for (const card of fileCards(cards)) {
    const path = defossilize(card.args[0] ?? "")
    const hash = card.args[1]
    // in a delta manifest an F card without a hash removes the file
    if (hash === undefined || hash === "") files.delete(path)
    else files.set(path, hash)
  }
  return files
}

export const checkinView = (db: Db, rid: number, hash: string, o: { readonly senders: boolean }): CheckinView =>
  db.transaction((): CheckinView => {
    const row = stmt<[number], { mtime: number; user: string | null; comment: string | null; sender: string | null }>(db,
      `SELECT e.mtime, coalesce(e.euser, e.user) AS user, coalesce(e.ecomment, e.comment) AS comment, u.login AS sender
       FROM event e JOIN blob b ON b.rid = e.objid LEFT JOIN rcvfrom r ON r.rcvid = b.rcvid LEFT JOIN user u ON u.uid = r.uid
       WHERE e.objid = ?`).get(rid)
    const tags = stmt<[number], { name: string; value: string | null }>(db,
      `SELECT g.tagname AS name, x.value FROM tagxref x JOIN tag g ON g.tagid = x.tagid WHERE x.rid = ? AND x.tagtype > 0 ORDER BY g.tagname`).all(rid)
    const parents = stmt<[number], { hash: string }>(db,
      "SELECT b.uuid AS hash FROM plink p JOIN blob b ON b.rid = p.pid WHERE p.cid = ? ORDER BY p.isprim DESC").all(rid)
    const files = [...manifestFiles(db, rid)].map(([path, fileHash]) => ({ path, hash: fileHash })).sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
    return {
      hash, rid, time: julianToMs(row?.mtime ?? 0), user: row?.user ?? "", sender: o.senders ? row?.sender ?? undefined : undefined,
      comment: row?.comment ?? "",
      branch: tags.find((t) => t.name === "branch")?.value ?? undefined,
      parents: parents.map((p) => p.hash),
      tags: tags.filter((t) => t.name.startsWith("sym-") || !["branch", "comment", "user", "date"].includes(t.name))
        .map((t) => ({ name: t.name, value: t.value ?? undefined })),
      files
    }
  })()

/** A file's bytes by its hash; undefined for a phantom. */
export const fileBytes = (db: Db, hash: string): Buffer | undefined => {
  const row = stmt<[string], { rid: number }>(db, "SELECT rid FROM blob WHERE uuid = ?").get(hash)
  return row === undefined ? undefined : content(db, row.rid)
}

export interface TicketView {
  readonly ticket: string
  readonly fields: Readonly<Record<string, string>>
  readonly changes: ReadonlyArray<{
    readonly hash: string
    readonly rid: number
    readonly rcvid: number
    readonly time: number
    readonly sender: string | undefined
    readonly user: string
    readonly text: string
    readonly private: boolean
  }>
}

/** A ticket: its current fields (the ticket table's, Fossil's own columns left out) and every change, in server order. */
export const ticketView = (db: Db, id: string, o: { readonly senders: boolean }): TicketView =>
  db.transaction((): TicketView => {
    const row = stmt<[string], Record<string, unknown>>(db, "SELECT * FROM ticket WHERE tkt_uuid = ?").get(id) ?? {}
    const fields: Record<string, string> = {}
    for (const [key, value] of Object.entries(row)) {
      if (key.startsWith("tkt_") || value === null || value === undefined) continue
      fields[key] = String(value)
    }
    const columns = new Set(stmt<[], { name: string }>(db, "PRAGMA table_info(ticketchng)").all().map((c) => c.name))
    const text = columns.has("icomment") ? "c.icomment" : "''"
    const changes = stmt<[string], { hash: string; rid: number; rcvid: number; received: number | null; written: number | null; sender: string | null; user: string | null; text: string | null; priv: number }>(db,
      `SELECT b.uuid AS hash, b.rid, b.rcvid, r.mtime AS received, c.tkt_mtime AS written, u.login AS sender, c.tkt_user AS user,
         ${text} AS text, EXISTS (SELECT 1 FROM private p WHERE p.rid = b.rid) AS priv
       FROM ticketchng c JOIN ticket t ON t.tkt_id = c.tkt_id JOIN blob b ON b.rid = c.tkt_rid
       LEFT JOIN rcvfrom r ON r.rcvid = b.rcvid LEFT JOIN user u ON u.uid = r.uid
       WHERE t.tkt_uuid = ? AND b.size >= 0 ORDER BY b.rcvid, b.rid`).all(id)
    return {
      ticket: id,
      fields,
      changes: changes.map((c) => ({
        hash: c.hash, rid: c.rid, rcvid: c.rcvid,
        time: julianToMs(o.senders && c.received !== null ? c.received : c.written ?? c.received ?? 0),
        sender: o.senders ? c.sender ?? undefined : undefined, user: c.user ?? "", text: c.text ?? "", private: c.priv === 1
      }))
    }
  })()

/** The ci verdicts written against a run (2.16's raw tag whose value ends "(against RUN)"), with their check-in. */
export const verdictsAgainst = (db: Db, run: string): ReadonlyArray<{ readonly checkin: string; readonly value: string }> =>
  stmt<[string], { checkin: string; value: string }>(db,
    `SELECT b.uuid AS checkin, x.value FROM tagxref x JOIN tag t ON t.tagid = x.tagid JOIN blob b ON b.rid = x.rid
     WHERE t.tagname IN ('ci', 'sym-ci') AND x.tagtype > 0 AND x.value LIKE '%(against ' || ? || ')'`).all(run)

/** An unversioned file's name, hash, size and time, when the repository holds it. */
export const unversionedEntry = (db: Db, name: string): { readonly name: string; readonly hash: string; readonly size: number; readonly time: number } | undefined => {
  if (stmt(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'unversioned'").get() === undefined) return undefined
  const row = stmt<[string], { name: string; hash: string | null; sz: number; mtime: number }>(db,
    "SELECT name, hash, sz, mtime FROM unversioned WHERE name = ?").get(name)
  return row === undefined || row.hash === null ? undefined : { name: row.name, hash: row.hash, size: row.sz, time: row.mtime * 1000 }
}
