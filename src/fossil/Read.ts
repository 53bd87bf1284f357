/**
 * Reads of one repository file, each a short read transaction (a long one blocks
 * Fossil's commits in rollback-journal mode). Everything is ordered by server order:
 * blob.rcvid, then blob.rid. Functions here are synchronous and may throw; the
 * repository layer turns throws into typed errors.
 */
import type BetterSqlite3 from "better-sqlite3"
import { cardValue, parseArtifact, tagCards } from "./Artifact.js"
import { content, inflate as inflateStored } from "./Content.js"
import { fullcap, type SpecialUsers } from "./Fullcap.js"
import {
  type Checkin, type CheckinTags, type Codes, type Cursor, type Item, type Post, type ReadBatch, type Receipt,
  serverOrder, type TagArtifact, type TicketChange, type UnversionedFile, type User
} from "./Items.js"

type Db = BetterSqlite3.Database

const statements = new WeakMap<Db, Map<string, BetterSqlite3.Statement>>()
/** prepared once per connection: preparing costs more than a short read */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export const stmt = <P extends unknown[] | {} = unknown[], R = unknown>(db: Db, sql: string): BetterSqlite3.Statement<P, R> => {
  let cache = statements.get(db)
  if (cache === undefined) {
    cache = new Map()
    statements.set(db, cache)
  }
  let s = cache.get(sql)
  if (s === undefined) {
    s = db.prepare(sql)
    cache.set(sql, s)
  }
  return s as unknown as BetterSqlite3.Statement<P, R>
}

export interface ReadOptions {
  /** false on a clone: its receipts name only its pulls */
  readonly senders: boolean
}

// written so that the index on blob.rcvid bounds the scan: cost follows what arrived, not the size
const after = "b.rcvid >= @rcvid AND (b.rcvid > @rcvid OR b.rid > @rid) AND b.size >= 0"
const senderJoin = "LEFT JOIN rcvfrom r ON r.rcvid = b.rcvid LEFT JOIN user u ON u.uid = r.uid"

const hasTable = (db: Db, name: string): boolean =>
  stmt(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined

const columns = (db: Db, table: string): Set<string> =>
  new Set(stmt<[], { name: string }>(db, `PRAGMA table_info(${table})`).all().map((c) => c.name))

interface PostRow {
  rid: number; hash: string; rcvid: number; sender: string | null
  root: string | null; inReplyTo: string | null; editOf: string | null
}
const postSelect = `SELECT b.rid, b.uuid AS hash, b.rcvid, u.login AS sender,
  (SELECT uuid FROM blob WHERE rid = f.froot) AS root,
  (SELECT uuid FROM blob WHERE rid = f.firt) AS inReplyTo,
  (SELECT uuid FROM blob WHERE rid = f.fprev) AS editOf
  FROM forumpost f JOIN blob b ON b.rid = f.fpid ${senderJoin}
  WHERE NOT EXISTS (SELECT 1 FROM private p WHERE p.rid = f.fpid)`

const toPost = (db: Db, row: PostRow, o: ReadOptions): Post | undefined => {
  const bytes = content(db, row.rid)
  if (bytes === undefined) return undefined
  const parsed = parseArtifact(bytes)
  return {
    _tag: "Post", hash: row.hash, rid: row.rid, rcvid: row.rcvid,
    sender: o.senders ? row.sender ?? undefined : undefined,
    root: row.root ?? row.hash, inReplyTo: row.inReplyTo ?? undefined, editOf: row.editOf ?? undefined,
    title: cardValue(parsed, "H"), text: parsed.wiki ?? "",
    mimetype: cardValue(parsed, "N") ?? "text/x-fossil-wiki", user: cardValue(parsed, "U") ?? ""
  }
}

interface TicketRow {
  rid: number; hash: string; rcvid: number; sender: string | null
  ticket: string; text: string | null; mimetype: string | null; user: string | null
}
const ticketSelect = (db: Db) => {
  const cols = columns(db, "ticketchng")
  const text = cols.has("icomment") ? "c.icomment" : "NULL"
  const mimetype = cols.has("mimetype") ? "c.mimetype" : "NULL"
  return `SELECT b.rid, b.uuid AS hash, b.rcvid, u.login AS sender, t.tkt_uuid AS ticket,
    ${text} AS text, ${mimetype} AS mimetype, c.tkt_user AS user
    FROM ticketchng c JOIN ticket t ON t.tkt_id = c.tkt_id JOIN blob b ON b.rid = c.tkt_rid ${senderJoin}`
}
const toTicketChange = (row: TicketRow, o: ReadOptions): TicketChange => ({
  _tag: "TicketChange", hash: row.hash, rid: row.rid, rcvid: row.rcvid,
  sender: o.senders ? row.sender ?? undefined : undefined,
  ticket: row.ticket, text: row.text ?? "", mimetype: row.mimetype ?? undefined, user: row.user ?? ""
})

interface CheckinRow {
  rid: number; hash: string; rcvid: number; sender: string | null
  branch: string | null; comment: string | null; user: string | null
}
const checkinSelect = `SELECT b.rid, b.uuid AS hash, b.rcvid, u.login AS sender,
  (SELECT x.value FROM tagxref x JOIN tag g ON g.tagid = x.tagid
    WHERE x.rid = e.objid AND g.tagname = 'branch' AND x.tagtype > 0) AS branch,
  coalesce(e.ecomment, e.comment) AS comment, coalesce(e.euser, e.user) AS user
  FROM event e JOIN blob b ON b.rid = e.objid ${senderJoin} WHERE e.type = 'ci'`

interface TagRow { rid: number; hash: string; rcvid: number; sender: string | null }
const tagSelect = `SELECT b.rid, b.uuid AS hash, b.rcvid, u.login AS sender
  FROM event e JOIN blob b ON b.rid = e.objid ${senderJoin} WHERE e.type = 'g'`

const toTagArtifact = (db: Db, row: TagRow, o: ReadOptions): TagArtifact | undefined => {
  const bytes = content(db, row.rid)
  if (bytes === undefined) return undefined
  const parsed = parseArtifact(bytes)
  return {
    _tag: "TagArtifact", hash: row.hash, rid: row.rid, rcvid: row.rcvid,
    sender: o.senders ? row.sender ?? undefined : undefined,
    tags: tagCards(parsed), date: cardValue(parsed, "D") ?? "", user: cardValue(parsed, "U") ?? ""
  }
}

const defined = <A>(a: A | undefined): a is A => a !== undefined

/**
 * Everything received after the cursor, in server order: posts (private ones
 * skipped), ticket changes, check-ins and tag artifacts. At most `limit` items;
 * the returned cursor is past every artifact looked at.
 */
export const readAfter = (db: Db, cursor: Cursor, limit: number, o: ReadOptions): ReadBatch => {
  const p = { rcvid: cursor.rcvid, rid: cursor.rid, limit: limit + 1 } // one more tells whether more are left
  const tail = ` AND ${after} ORDER BY b.rcvid, b.rid LIMIT @limit`
  return db.transaction((): ReadBatch => {
    const rows: Array<{ rcvid: number; rid: number; make: () => Item | undefined }> = []
    if (hasTable(db, "forumpost")) {
      for (const row of stmt<typeof p, PostRow>(db, postSelect + tail).all(p))
        rows.push({ rcvid: row.rcvid, rid: row.rid, make: () => toPost(db, row, o) })
    }
    if (hasTable(db, "ticketchng")) {
      for (const row of stmt<typeof p, TicketRow>(db, ticketSelect(db) + " WHERE 1" + tail).all(p))
        rows.push({ rcvid: row.rcvid, rid: row.rid, make: () => toTicketChange(row, o) })
    }
    for (const row of stmt<typeof p, CheckinRow>(db, checkinSelect + tail).all(p)) {
      rows.push({
        rcvid: row.rcvid, rid: row.rid, make: (): Checkin => ({
          _tag: "Checkin", hash: row.hash, rid: row.rid, rcvid: row.rcvid,
          sender: o.senders ? row.sender ?? undefined : undefined,
          branch: row.branch ?? undefined, comment: row.comment ?? "", user: row.user ?? ""
        })
      })
    }
    for (const row of stmt<typeof p, TagRow>(db, tagSelect + tail).all(p))
      rows.push({ rcvid: row.rcvid, rid: row.rid, make: () => toTagArtifact(db, row, o) })
    rows.sort(serverOrder)
    const more = rows.length > limit
    const taken = rows.slice(0, limit)
    let next: Cursor
    if (more) {
      const last = taken[taken.length - 1]!
      next = { rcvid: last.rcvid, rid: last.rid }
    } else {
      // past every artifact received so far, messages or not (file contents, private posts)
      const end = stmt<[], { rcvid: number | null; rid: number | null }>(db, 
        "SELECT max(rcvid) AS rcvid, (SELECT max(rid) FROM blob WHERE rcvid = (SELECT max(rcvid) FROM blob WHERE size >= 0) AND size >= 0) AS rid FROM blob WHERE size >= 0"
      ).get()
      const endCursor = { rcvid: end?.rcvid ?? 0, rid: end?.rid ?? 0 }
      next = serverOrder(endCursor, cursor) > 0 ? endCursor : cursor
    }
    return { items: taken.map((r) => r.make()).filter(defined), cursor: next, more }
  })()
}

/** Rows of a hash or unique prefix; throws AmbiguousHash via the returned marker. */
export type Resolved = { readonly rid: number; readonly hash: string; readonly size: number } | "none" | "ambiguous"

export const resolveHash = (db: Db, hashOrPrefix: string): Resolved => {
  const rows = stmt<[string, string], { rid: number; hash: string; size: number }>(db, 
    "SELECT rid, uuid AS hash, size FROM blob WHERE uuid = ? OR uuid GLOB ? || '*' LIMIT 2"
  ).all(hashOrPrefix, hashOrPrefix)
  const exact = rows.find((r) => r.hash === hashOrPrefix)
  if (exact !== undefined) return exact
  if (rows.length === 0) return "none"
  if (rows.length > 1) return "ambiguous"
  return rows[0]!
}

/** Every post of the thread the post `rid` belongs to, in server order. */
export const thread = (db: Db, rid: number, o: ReadOptions): ReadonlyArray<Post> | undefined =>
  db.transaction(() => {
    const root = stmt<[number], { froot: number }>(db, "SELECT froot FROM forumpost WHERE fpid = ?").get(rid)
    if (root === undefined) return undefined
    return stmt<[number], PostRow>(db, `${postSelect} AND f.froot = ? AND b.size >= 0 ORDER BY b.rcvid, b.rid`)
      .all(root.froot).map((row) => toPost(db, row, o)).filter(defined)
  })()

export const isForumPost = (db: Db, rid: number): boolean =>
  hasTable(db, "forumpost") && stmt(db, "SELECT 1 FROM forumpost WHERE fpid = ?").get(rid) !== undefined

export const isPrivate = (db: Db, rid: number): boolean =>
  stmt(db, "SELECT 1 FROM private WHERE rid = ?").get(rid) !== undefined

/** The ticket ids matching an id or prefix. */
export const ticketIds = (db: Db, idOrPrefix: string): ReadonlyArray<string> =>
  stmt<[string, string], { id: string }>(db, 
    "SELECT tkt_uuid AS id FROM ticket WHERE tkt_uuid = ? OR tkt_uuid GLOB ? || '*' LIMIT 2"
  ).all(idOrPrefix, idOrPrefix).map((r) => r.id)

export const ticket = (db: Db, id: string, o: ReadOptions): ReadonlyArray<TicketChange> =>
  stmt<[string], TicketRow>(db, `${ticketSelect(db)} WHERE t.tkt_uuid = ? AND b.size >= 0 ORDER BY b.rcvid, b.rid`)
    .all(id).map((row) => toTicketChange(row, o))

export const isCheckin = (db: Db, rid: number): boolean =>
  stmt(db, "SELECT 1 FROM event WHERE objid = ? AND type = 'ci'").get(rid) !== undefined

export const checkinTags = (db: Db, rid: number, hash: string, o: ReadOptions): CheckinTags =>
  db.transaction(() => {
    const current = stmt<[number], { name: string; value: string | null; source: string | null }>(db, 
      `SELECT g.tagname AS name, x.value, (SELECT uuid FROM blob WHERE rid = x.srcid) AS source
       FROM tagxref x JOIN tag g ON g.tagid = x.tagid WHERE x.rid = ? AND x.tagtype > 0 ORDER BY g.tagname`
    ).all(rid).map((r) => ({ name: r.name, value: r.value ?? undefined, source: r.source ?? undefined }))
    const history = stmt<[], TagRow>(db, `${tagSelect} AND b.size >= 0 ORDER BY b.rcvid, b.rid`).all()
      .map((row) => toTagArtifact(db, row, o)).filter(defined)
      .map((t) => ({ ...t, tags: t.tags.filter((c) => c.target === hash) }))
      .filter((t) => t.tags.length > 0)
    return { checkin: hash, current, history }
  })()

const specialUsers = (db: Db): SpecialUsers => {
  const cap = (login: string) =>
    stmt<[string], { cap: string | null }>(db, "SELECT cap FROM user WHERE login = ?").get(login)?.cap ?? ""
  return { nobody: cap("nobody"), anonymous: cap("anonymous"), reader: cap("reader"), developer: cap("developer") }
}

export const user = (db: Db, login: string): User | undefined =>
  db.transaction(() => {
    const row = stmt<[string], { login: string; cap: string | null }>(db, "SELECT login, cap FROM user WHERE login = ?").get(login)
    if (row === undefined) return undefined
    const own = row.cap ?? ""
    return { login: row.login, capabilities: own, fullcap: fullcap(own, specialUsers(db)) }
  })()

export const codes = (db: Db): Codes => {
  const rows = stmt<[], { name: string; value: string }>(db, 
    "SELECT name, value FROM config WHERE name IN ('project-code', 'server-code')"
  ).all()
  const get = (n: string) => String(rows.find((r) => r.name === n)?.value ?? "")
  return { projectCode: get("project-code"), serverCode: get("server-code") }
}

interface UvRow { name: string; hash: string | null; sz: number; mtime: number; rcvid: number; sender: string | null }
const uvSelect = `SELECT v.name, v.hash, v.sz, v.mtime, v.rcvid, u.login AS sender FROM unversioned v
  LEFT JOIN rcvfrom r ON r.rcvid = v.rcvid LEFT JOIN user u ON u.uid = r.uid`
const toUv = (row: UvRow, o: ReadOptions): UnversionedFile => ({
  name: row.name, hash: row.hash ?? undefined, size: row.sz, mtime: row.mtime, rcvid: row.rcvid,
  sender: o.senders ? row.sender ?? undefined : undefined
})

export const unversionedList = (db: Db, o: ReadOptions): ReadonlyArray<UnversionedFile> =>
  hasTable(db, "unversioned") ? stmt<[], UvRow>(db, `${uvSelect} ORDER BY v.name`).all().map((r) => toUv(r, o)) : []

export const unversionedFile = (db: Db, name: string, o: ReadOptions):
  { readonly file: UnversionedFile; readonly content: Buffer } | undefined => {
  if (!hasTable(db, "unversioned")) return undefined
  const row = stmt<[string], UvRow & { encoding: number; content: Buffer | null }>(db, 
    `SELECT v.name, v.hash, v.sz, v.mtime, v.rcvid, u.login AS sender, v.encoding, v.content FROM unversioned v
     LEFT JOIN rcvfrom r ON r.rcvid = v.rcvid LEFT JOIN user u ON u.uid = r.uid WHERE v.name = ?`
  ).get(name)
  if (row === undefined || row.hash === null) return undefined
  const raw = row.content ?? Buffer.alloc(0)
  const bytes = row.encoding === 1 ? inflateStored(raw) : raw
  return { file: toUv(row, o), content: bytes }
}


/** The receipt of one artifact: undefined when not received (absent, phantom, or no sender known). */
export const receipt = (db: Db, hash: string): (Receipt & { readonly private: boolean }) | undefined => {
  const row = stmt<[string], { rid: number; rcvid: number; sender: string | null; priv: number }>(db, 
    `SELECT b.rid, b.rcvid, u.login AS sender, EXISTS (SELECT 1 FROM private p WHERE p.rid = b.rid) AS priv
     FROM blob b ${senderJoin} WHERE b.uuid = ? AND b.size >= 0`
  ).get(hash)
  if (row === undefined || row.sender === null) return undefined
  return { hash, rid: row.rid, rcvid: row.rcvid, sender: row.sender, private: row.priv === 1 }
}

export const unversionedReceipt = (db: Db, name: string): { readonly hash: string; readonly rcvid: number; readonly sender: string | undefined } | undefined => {
  if (!hasTable(db, "unversioned")) return undefined
  const row = stmt<[string], { hash: string | null; rcvid: number; sender: string | null }>(db, 
    `SELECT v.hash, v.rcvid, u.login AS sender FROM unversioned v LEFT JOIN rcvfrom r ON r.rcvid = v.rcvid
     LEFT JOIN user u ON u.uid = r.uid WHERE v.name = ?`
  ).get(name)
  return row === undefined || row.hash === null ? undefined : { hash: row.hash, rcvid: row.rcvid, sender: row.sender ?? undefined }
}
