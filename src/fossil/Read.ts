/**
 * Reads of one repository file, each a short read transaction (a long one blocks
 * Fossil's commits in rollback-journal mode). Everything is ordered by server order:
 * blob.rcvid, then blob.rid. Functions here are synchronous and may throw; the
 * repository layer turns throws into typed errors.
 */
import type BetterSqlite3 from "better-sqlite3"
import { cardValue, parseArtifact, tagCards } from "./Artifact.js"
import { content, contentOfRow, inflate as inflateStored } from "./Content.js"
import { fullcap, type SpecialUsers } from "./Fullcap.js"
import { parsePostCards } from "./PostCards.js"
import { awaitsItsRow, julianDayBefore, settleMs } from "./Unsettled.js"
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
  /** how many artifacts after a cursor are still read by rid (default fewArtifacts); tests set it to prove both ways agree */
  readonly fewArtifacts?: number
}

// Fossil has no index on blob.rcvid: the filter is one pass over blob reading rcvid
// (about 0.1 µs an artifact); everything else a read costs follows what arrived after
// the cursor, not the repository's size
const after = "b.rcvid >= @rcvid AND (b.rcvid > @rcvid OR b.rid > @rid) AND b.size >= 0"
const senderJoin = "LEFT JOIN rcvfrom r ON r.rcvid = b.rcvid LEFT JOIN user u ON u.uid = r.uid"

export const hasTable = (db: Db, name: string): boolean =>
  stmt(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined

const columns = (db: Db, table: string): Set<string> =>
  new Set(stmt<[], { name: string }>(db, `PRAGMA table_info(${table})`).all().map((c) => c.name))

/**
 * One query per batch reads each post whole: its row, sender, stored content and
 * delta source (no query per post). The posts are put in server order first by their
 * keys alone, then their content is joined (SQLite keeps the inner order for the
 * outer ORDER BY, no second sort): sorting rows that carry their content costs more.
 * The content comes as hex: SQLite's hex() and Buffer.from(hex) into node's buffer
 * pool cost less than a Buffer per row made by the driver. Thread, reply and edit
 * links come from the G, I and P cards, which are what Fossil made forumpost.froot,
 * firt and fprev from.
 */
type PostRow = [rid: number, hash: string, rcvid: number, sender: string | null, content: string | null, size: number, srcid: number | null]
const postSelect = (from: string, filter: string, limit: string) => `SELECT k.rid, c.uuid, k.rcvid, u.login, hex(c.content), c.size, d.srcid
  FROM (SELECT b.rid, b.rcvid FROM ${from}
    WHERE NOT EXISTS (SELECT 1 FROM private p WHERE p.rid = f.fpid) AND ${filter}
    ORDER BY b.rcvid, b.rid ${limit}) k
  CROSS JOIN blob c ON c.rid = k.rid LEFT JOIN delta d ON d.rid = k.rid
  LEFT JOIN rcvfrom r ON r.rcvid = k.rcvid LEFT JOIN user u ON u.uid = r.uid
  ORDER BY k.rcvid, k.rid`
// after a cursor, CROSS JOIN keeps blob the outer loop: blob.rcvid has no index, and
// filtering it in one pass over blob is cheaper than a lookup in blob per forumpost row
const postsAfter = postSelect("blob b CROSS JOIN forumpost f ON f.fpid = b.rid", after, "LIMIT @limit")
// the same when few artifacts arrived after the cursor: only those, by rid
const fresh = "json_each(@rids) j CROSS JOIN blob b ON b.rid = j.value"
const postsAfterFew = postSelect(`${fresh} CROSS JOIN forumpost f ON f.fpid = b.rid`, after, "LIMIT @limit")
const freshEvents = `${fresh} CROSS JOIN event e ON e.objid = b.rid`
// a thread: its posts by the forumthread index (froot)
const postsOfThread = postSelect("forumpost f JOIN blob b ON b.rid = f.fpid", "f.froot = ? AND b.size >= 0", "")

/** a statement returning rows as arrays: no object per row */
const rawStmt = <P extends unknown[] | object, R>(db: Db, sql: string): BetterSqlite3.Statement<P, R> => {
  const s = stmt<P, R>(db, sql)
  return (s.reader ? s.raw(true) : s) as unknown as BetterSqlite3.Statement<P, R>
}

/**
 * One instance of each repeated string of a batch (thread roots, posts answered,
 * users, senders, mimetypes): the copies made while reading die young, and a batch
 * of many posts keeps (and the garbage collector copies) a third less.
 */
const interner = (): ((s: string | undefined) => string | undefined) => {
  const seen = new Map<string, string>()
  return (s) => {
    if (s === undefined) return undefined
    const known = seen.get(s)
    if (known !== undefined) return known
    seen.set(s, s)
    return s
  }
}

const toPost = (db: Db, row: PostRow, o: ReadOptions, intern = interner()): Post | undefined => {
  const [rid, hash, rcvid, sender, hex, size, srcid] = row
  const bytes = contentOfRow(db, rid, hex, size, srcid)
  if (bytes === undefined) return undefined
  const cards = parsePostCards(bytes)
  return {
    _tag: "Post", hash, rid, rcvid,
    sender: o.senders ? intern(sender ?? undefined) : undefined,
    root: intern(cards.root) ?? hash, inReplyTo: intern(cards.inReplyTo), editOf: cards.editOf,
    title: cards.title, text: cards.text ?? "",
    mimetype: intern(cards.mimetype) ?? "text/x-fossil-wiki", user: intern(cards.user) ?? ""
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
const checkinFrom = (from: string) => `SELECT b.rid, b.uuid AS hash, b.rcvid, u.login AS sender,
  (SELECT x.value FROM tagxref x JOIN tag g ON g.tagid = x.tagid
    WHERE x.rid = e.objid AND g.tagname = 'branch' AND x.tagtype > 0) AS branch,
  coalesce(e.ecomment, e.comment) AS comment, coalesce(e.euser, e.user) AS user
  FROM ${from} ${senderJoin} WHERE e.type = 'ci'`

interface TagRow { rid: number; hash: string; rcvid: number; sender: string | null }
const tagFrom = (from: string) => `SELECT b.rid, b.uuid AS hash, b.rcvid, u.login AS sender
  FROM ${from} ${senderJoin} WHERE e.type = 'g'`

const events = "event e JOIN blob b ON b.rid = e.objid"
const checkinSelect = checkinFrom(events)
const tagSelect = tagFrom(events)

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
 * Up to this many artifacts after the cursor are read by rid (json_each), each kind
 * of item looked up for them alone; more are read by one pass over each table. The
 * pass over blob that finds them is the one cost that follows the repository's size
 * (Fossil has no index on blob.rcvid).
 */
export const fewArtifacts = 2000

/**
 * The first artifact after `from`, up to `to`, that this read's snapshot holds as a blob that may
 * be a post or ticket change (any, not only those mentioning ocx: a session may be given any) and
 * has no row of its own yet: its page has committed the artifact and not yet its crosslink
 * (Unsettled.ts). Only receipts younger than settleMs (or with no receipt row yet) are looked at,
 * so a page that died half-way holds nothing back for longer. A check-in's crosslinked file
 * (mlink), a check-in or tag (event) and a delta are no such post, and are not inflated.
 *
 * When few arrived, only those the read did not make items of (`known` have their rows) are
 * looked at, by rid: no second pass over blob (which took a read of 10 posts after a cursor from
 * 0.19 to 0.45 of fossil sql's time, bench/repository). When many arrived, one pass over blob asks
 * each young one for its rows in SQLite. ticketchng has no index on tkt_rid: it is asked last, of a
 * blob already found to read as a post or ticket change, not of every check-in's file.
 */
const firstAwaitingRow = (
  db: Db, from: Cursor, to: Cursor, now: number, known: ReadonlySet<number>,
  arrived: ReadonlyArray<readonly [rid: number, rcvid: number]> | undefined
): Cursor | undefined => {
  const young = julianDayBefore(now, settleMs)
  const rowless = [
    "(r.mtime >= @young OR (r.mtime IS NULL AND b.rcvid > 0))",
    ...(hasTable(db, "forumpost") ? ["NOT EXISTS (SELECT 1 FROM forumpost f WHERE f.fpid = b.rid)"] : []),
    ...(hasTable(db, "mlink") ? ["NOT EXISTS (SELECT 1 FROM mlink m WHERE m.fid = b.rid)"] : []),
    ...(hasTable(db, "event") ? ["NOT EXISTS (SELECT 1 FROM event e WHERE e.objid = b.rid AND e.type IN ('ci', 'g'))"] : [])
  ].join(" AND ")
  type Key = { rid: number; rcvid: number; delta: number }
  const columns = "b.rid, b.rcvid, EXISTS (SELECT 1 FROM delta d WHERE d.rid = b.rid) AS delta"
  let rows: ReadonlyArray<Key>
  if (arrived !== undefined) {
    const unknown: Array<number> = []
    for (const [rid, rcvid] of arrived) {
      if (!known.has(rid) && (rcvid < to.rcvid || (rcvid === to.rcvid && rid <= to.rid))) unknown.push(rid)
    }
    if (unknown.length === 0) return undefined
    rows = stmt<{ rids: string; young: number }, Key>(db,
      `SELECT ${columns} FROM json_each(@rids) j CROSS JOIN blob b ON b.rid = j.value LEFT JOIN rcvfrom r ON r.rcvid = b.rcvid
       WHERE ${rowless} ORDER BY b.rcvid, b.rid`
    ).all({ rids: JSON.stringify(unknown), young })
  } else {
    rows = stmt<{ rcvid: number; rid: number; toRcvid: number; toRid: number; young: number }, Key>(db,
      `SELECT ${columns} FROM blob b LEFT JOIN rcvfrom r ON r.rcvid = b.rcvid
       WHERE ${after} AND (b.rcvid < @toRcvid OR (b.rcvid = @toRcvid AND b.rid <= @toRid)) AND ${rowless}
       ORDER BY b.rcvid, b.rid`
    ).all({ rcvid: from.rcvid, rid: from.rid, toRcvid: to.rcvid, toRid: to.rid, young })
  }
  // every statement done before the next is asked (a connection runs one at a time); each content is
  // read as it is looked at, a large one (an attachment) alone
  const tickets = hasTable(db, "ticketchng")
  for (const row of rows) {
    const stored = stmt<[number], { content: Buffer | null }>(db, "SELECT content FROM blob WHERE rid = ?").get(row.rid)
    if (!awaitsItsRow(stored?.content ?? null, row.delta !== 0, true)) continue
    if (tickets && stmt<[number]>(db, "SELECT 1 FROM ticketchng c WHERE c.tkt_rid = ?").get(row.rid) !== undefined) continue
    return { rcvid: row.rcvid, rid: row.rid }
  }
  return undefined
}

/** The last artifact after `from` and before `held` in server order, or `from` when there is none. */
const lastBefore = (db: Db, from: Cursor, held: Cursor): Cursor => {
  const end = stmt<{ rcvid: number; rid: number; heldRcvid: number; heldRid: number }, { rcvid: number | null; rid: number | null }>(db,
    `SELECT b.rcvid, b.rid, max(b.rcvid * 4294967296 + b.rid) FROM blob b
     WHERE ${after} AND (b.rcvid < @heldRcvid OR (b.rcvid = @heldRcvid AND b.rid < @heldRid))`
  ).get({ rcvid: from.rcvid, rid: from.rid, heldRcvid: held.rcvid, heldRid: held.rid })
  return end?.rcvid == null || end.rid == null ? from : { rcvid: end.rcvid, rid: end.rid }
}

/**
 * Everything received after the cursor, in server order: posts (private ones
 * skipped), ticket changes, check-ins and tag artifacts. At most `limit` items;
 * the returned cursor is past every artifact looked at and read whole. One read
 * transaction: a blob that may be a post and has no row in that same snapshot
 * stops the read before it (`unread`), so that no cursor ever passes a post read
 * as no post; the next read after the returned cursor reads it with its row.
 */
export const readAfter = (db: Db, cursor: Cursor, limit: number, o: ReadOptions, now = Date.now()): ReadBatch => {
  const p = { rcvid: cursor.rcvid, rid: cursor.rid, limit: limit + 1 } // one more tells whether more are left
  const tail = ` AND ${after} ORDER BY b.rcvid, b.rid LIMIT @limit`
  return db.transaction((): ReadBatch => {
    // every artifact after the cursor (messages or not), if few: unordered, so that
    // the pass over blob stops as soon as they are known to be many
    const arrived = rawStmt<typeof p & { few: number }, [rid: number, rcvid: number]>(db,
      `SELECT b.rid, b.rcvid FROM blob b WHERE ${after} LIMIT @few`
    ).all({ ...p, few: (o.fewArtifacts ?? fewArtifacts) + 1 })
    if (arrived.length === 0) return { items: [], cursor, more: false }
    const few = arrived.length <= (o.fewArtifacts ?? fewArtifacts)
    if (few) arrived.sort((a, b) => a[1] - b[1] || a[0] - b[0])
    const q: typeof p & { rids?: string } = few ? { ...p, rids: JSON.stringify(arrived.map((r) => r[0])) } : p
    // an item in server order: a post already decoded, another kind made (decoded) only if it is in the batch
    type Row = { rcvid: number; rid: number; item?: Item | undefined; make?: () => Item | undefined }
    const others: Array<Row> = []
    if (hasTable(db, "ticketchng")) {
      const filter = few ? " WHERE c.tkt_rid IN (SELECT value FROM json_each(@rids))" : " WHERE 1"
      for (const row of stmt<typeof q, TicketRow>(db, ticketSelect(db) + filter + tail).all(q))
        others.push({ rcvid: row.rcvid, rid: row.rid, make: () => toTicketChange(row, o) })
    }
    for (const row of stmt<typeof q, CheckinRow>(db, (few ? checkinFrom(freshEvents) : checkinSelect) + tail).all(q)) {
      others.push({
        rcvid: row.rcvid, rid: row.rid, make: (): Checkin => ({
          _tag: "Checkin", hash: row.hash, rid: row.rid, rcvid: row.rcvid,
          sender: o.senders ? row.sender ?? undefined : undefined,
          branch: row.branch ?? undefined, comment: row.comment ?? "", user: row.user ?? ""
        })
      })
    }
    for (const row of stmt<typeof q, TagRow>(db, (few ? tagFrom(freshEvents) : tagSelect) + tail).all(q))
      others.push({ rcvid: row.rcvid, rid: row.rid, make: () => toTagArtifact(db, row, o) })
    others.sort(serverOrder)
    const rows: Array<Row> = []
    if (hasTable(db, "forumpost")) {
      // Posts are decoded as their rows come (iterate, all within this short
      // transaction), so a row's stored text dies young instead of being held for the
      // whole batch; only posts among the first limit + 1 items of the batch are read.
      let before = 0 // other items before the current post in server order
      const intern = interner()
      for (const row of rawStmt<typeof q, PostRow>(db, few ? postsAfterFew : postsAfter).iterate(q)) {
        const at = { rcvid: row[2], rid: row[0] }
        while (before < others.length && serverOrder(others[before]!, at) < 0) before++
        if (rows.length + before > limit) break
        rows.push({ rcvid: at.rcvid, rid: at.rid, item: toPost(db, row, o, intern) })
      }
    }
    for (const other of others) rows.push(other)
    rows.sort(serverOrder)
    const more = rows.length > limit
    const taken = rows.slice(0, limit)
    let next: Cursor
    if (more) {
      const last = taken[taken.length - 1]!
      next = { rcvid: last.rcvid, rid: last.rid }
    } else if (few) {
      // past every artifact received so far, messages or not (file contents, private posts)
      const last = arrived[arrived.length - 1]!
      next = { rcvid: last[1], rid: last[0] }
    } else {
      // the same, when many arrived: the last artifact in server order (it is after the
      // cursor), as the row holding the greatest (rcvid, rid), by SQLite's bare columns
      // of max() (exact while rcvid < 2^31)
      const end = stmt<typeof p, { rcvid: number | null; rid: number | null }>(db,
        `SELECT b.rcvid, b.rid, max(b.rcvid * 4294967296 + b.rid) FROM blob b WHERE ${after}`
      ).get(p)
      next = end?.rcvid == null || end.rid == null ? cursor : { rcvid: end.rcvid, rid: end.rid }
    }
    // what the read made items of has its rows: asked of the others alone, when few arrived
    const known = new Set<number>()
    if (few) for (const r of rows) known.add(r.rid)
    const unread = firstAwaitingRow(db, cursor, next, now, known, few ? arrived : undefined)
    if (unread !== undefined) {
      const before = taken.filter((r) => serverOrder(r, unread) < 0)
      return { items: before.map((r) => (r.make === undefined ? r.item : r.make())).filter(defined), cursor: lastBefore(db, cursor, unread), more: false, unread }
    }
    return { items: taken.map((r) => (r.make === undefined ? r.item : r.make())).filter(defined), cursor: next, more }
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
    const intern = interner()
    return rawStmt<[number], PostRow>(db, postsOfThread)
      .all(root.froot).map((row) => toPost(db, row, o, intern)).filter(defined)
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
