/**
 * Every OCX message of a repository file in one short read transaction: the posts and
 * ticket changes whose text holds one (2.0), each with its place in server order, its time,
 * its sender and where it is. This is what the runs list is made of; it reads every post
 * once, by two queries in all (no query per post), since a list of 10,000 runs reads about
 * 40,000 posts (the runs, their started, ended and kept logs).
 */
import type BetterSqlite3 from "better-sqlite3"
import { readMessage, type Message } from "../protocol/Envelope.js"
import { contentOfRow } from "./Content.js"
import { parsePostCards } from "./PostCards.js"
import { stmt, user as readUser } from "./Read.js"

type Db = BetterSqlite3.Database

export interface MessageRow {
  readonly hash: string
  readonly rid: number
  readonly rcvid: number
  /** when the served repository received it (milliseconds); on a clone, the time its writer gave */
  readonly time: number
  /** the login the served repository received it from; undefined on a clone, or when not known */
  readonly sender: string | undefined
  /** the U card: who the writer says wrote it (proves nothing) */
  readonly user: string
  readonly place: { readonly _tag: "Thread"; readonly root: string; readonly title: string | undefined } | { readonly _tag: "Ticket"; readonly ticket: string }
  /** a private artifact (Fossil's private table): only a viewer holding x sees it */
  readonly private: boolean
  readonly message: Message
}

/** Fossil's times are Julian days */
export const julianToMs = (jd: number): number => Math.round((jd - 2440587.5) * 86_400_000)

const hasTable = (db: Db, name: string): boolean =>
  stmt(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined

type PostRow = [rid: number, hash: string, rcvid: number, sender: string | null, received: number | null, written: number | null,
  content: string | null, size: number, srcid: number | null, priv: number]
// hex(): SQLite's hex and Buffer.from(hex) cost less than a Buffer per row made by the driver (Read.ts)
const postsSql = (filter: string) => `SELECT b.rid, b.uuid, b.rcvid, u.login, r.mtime, f.fmtime, hex(b.content), b.size, d.srcid,
    EXISTS (SELECT 1 FROM private p WHERE p.rid = b.rid)
  FROM forumpost f CROSS JOIN blob b ON b.rid = f.fpid LEFT JOIN delta d ON d.rid = b.rid
  LEFT JOIN rcvfrom r ON r.rcvid = b.rcvid LEFT JOIN user u ON u.uid = r.uid
  WHERE b.size >= 0${filter}`

/** A forum post as a reader shows it: its place, time, sender and text. */
export interface PostView {
  readonly hash: string
  readonly rid: number
  readonly rcvid: number
  /** milliseconds: when received (served), or the time its writer gave (clone) */
  readonly time: number
  readonly sender: string | undefined
  readonly user: string
  readonly root: string
  readonly inReplyTo: string | undefined
  readonly editOf: string | undefined
  readonly title: string | undefined
  readonly mimetype: string
  readonly text: string
  readonly private: boolean
}

/** Each post the filter keeps (`AND ...` on f and b), decoded, in no set order. */
const eachPost = (db: Db, filter: string, params: ReadonlyArray<unknown>, o: { readonly senders: boolean }, use: (post: PostView) => void): void => {
  const query = stmt<Array<unknown>, PostRow>(db, postsSql(filter))
  const raw = (query.reader ? query.raw(true) : query) as unknown as BetterSqlite3.Statement<Array<unknown>, PostRow>
  for (const row of raw.all(...params)) {
    const [rid, hash, rcvid, sender, received, written, hex, size, srcid, priv] = row
    const bytes = contentOfRow(db, rid, hex, size, srcid)
    if (bytes === undefined) continue
    const cards = parsePostCards(bytes)
    const time = o.senders && received !== null ? received : written ?? received ?? 0
    use({
      hash, rid, rcvid, time: julianToMs(time),
      sender: o.senders ? sender ?? undefined : undefined,
      user: cards.user ?? "", root: cards.root ?? hash, inReplyTo: cards.inReplyTo, editOf: cards.editOf,
      title: cards.title, mimetype: cards.mimetype ?? "text/x-fossil-wiki", text: cards.text ?? "", private: priv === 1
    })
  }
}

/** Every post of the thread whose first post is `root` (rid), in server order. */
export const threadPosts = (db: Db, root: number, o: { readonly senders: boolean }): ReadonlyArray<PostView> =>
  db.transaction(() => {
    const posts: Array<PostView> = []
    eachPost(db, " AND f.froot = ?", [root], o, (post) => posts.push(post))
    return posts.sort((a, b) => a.rcvid - b.rcvid || a.rid - b.rid)
  })()

/** The messages among posts, as the runs list and a run's page read them. */
export const postMessage = (post: PostView): MessageRow | undefined => {
  const message = messageIn(post.text)
  return message === undefined ? undefined : {
    hash: post.hash, rid: post.rid, rcvid: post.rcvid, time: post.time, sender: post.sender, user: post.user,
    place: { _tag: "Thread", root: post.root, title: post.title }, private: post.private, message
  }
}

interface TicketRow {
  rid: number; hash: string; rcvid: number; sender: string | null; received: number | null; written: number | null
  ticket: string; text: string | null; user: string | null; priv: number
}

/** A cheap look before the parse: every OCX message is a fenced block naming "ocx". */
const mayHoldMessage = (text: string): boolean => text.includes("```") && text.includes("ocx")

const messageIn = (text: string): Message | undefined => {
  if (!mayHoldMessage(text)) return undefined
  const reading = readMessage(text)
  return reading._tag === "Message" ? reading : undefined
}

/** Where a read stood: every artifact at or before it in server order was read. */
export interface ReadCursor {
  readonly rcvid: number
  readonly rid: number
}

/**
 * What would make messages read before a cursor read differently now: an artifact made private or
 * public (a moderated post approved), shunned or removed, or the artifacts renumbered. New
 * arrivals change none of it; they come after the cursor.
 */
export const messagesFingerprint = (db: Db, cursor: ReadCursor): string => {
  const row = stmt<[number], { priv: number; privSum: number; blobs: number }>(db,
    `SELECT (SELECT count(*) FROM private) AS priv, (SELECT total(rid) FROM private) AS privSum,
       (SELECT count(*) FROM blob WHERE rid <= ?) AS blobs`).get(cursor.rid)
  const shun = hasTable(db, "shun") ? stmt<[], { n: number }>(db, "SELECT count(*) AS n FROM shun").get()?.n ?? 0 : 0
  return JSON.stringify([row?.priv ?? 0, row?.privSum ?? 0, row?.blobs ?? 0, shun])
}

export interface MessagesRead {
  readonly rows: ReadonlyArray<MessageRow>
  /** the last artifact in server order when they were read */
  readonly cursor: ReadCursor
  readonly fingerprint: string
}

/**
 * The messages after `after` (every one without it), in server order, with where the read stood,
 * in one read transaction. `senders`: false on a clone, whose receipts name only its pulls (the
 * sender is then undefined and the time is the writer's).
 */
export const readMessagesAfter = (db: Db, o: { readonly senders: boolean }, after: ReadCursor | undefined): MessagesRead =>
  db.transaction((): MessagesRead => {
    const last = stmt<[], { rcvid: number; rid: number }>(db,
      "SELECT rcvid, rid FROM blob WHERE size >= 0 ORDER BY rcvid DESC, rid DESC LIMIT 1").get()
    const cursor = last === undefined ? { rcvid: 0, rid: 0 } : { rcvid: last.rcvid, rid: last.rid }
    const rows = readMessagesIn(db, o, after)
    return { rows, cursor, fingerprint: messagesFingerprint(db, cursor) }
  })()

/** Every message of the file, in server order (see readMessagesAfter). */
export const readMessages = (db: Db, o: { readonly senders: boolean }): ReadonlyArray<MessageRow> => readMessagesIn(db, o, undefined)

const afterFilter = " AND (b.rcvid > ? OR (b.rcvid = ? AND b.rid > ?))"

const readMessagesIn = (db: Db, o: { readonly senders: boolean }, after: ReadCursor | undefined): Array<MessageRow> =>
  db.transaction((): Array<MessageRow> => {
    const rows: Array<MessageRow> = []
    const filter = after === undefined ? "" : afterFilter
    const params = after === undefined ? [] : [after.rcvid, after.rcvid, after.rid]
    if (hasTable(db, "forumpost")) {
      eachPost(db, filter, params, o, (post) => {
        const row = postMessage(post)
        if (row !== undefined) rows.push(row)
      })
    }
    if (hasTable(db, "ticketchng") && hasTable(db, "ticket")) {
      const columns = new Set(stmt<[], { name: string }>(db, "PRAGMA table_info(ticketchng)").all().map((c) => c.name))
      if (columns.has("icomment")) {
        const tickets = stmt<Array<unknown>, TicketRow>(db, `SELECT b.rid, b.uuid AS hash, b.rcvid, u.login AS sender, r.mtime AS received,
            c.tkt_mtime AS written, t.tkt_uuid AS ticket, c.icomment AS text, c.tkt_user AS user,
            EXISTS (SELECT 1 FROM private p WHERE p.rid = b.rid) AS priv
          FROM ticketchng c JOIN ticket t ON t.tkt_id = c.tkt_id JOIN blob b ON b.rid = c.tkt_rid
          LEFT JOIN rcvfrom r ON r.rcvid = b.rcvid LEFT JOIN user u ON u.uid = r.uid
          WHERE b.size >= 0 AND c.icomment LIKE '%ocx%'${filter}`).all(...params)
        for (const row of tickets) {
          const message = messageIn(row.text ?? "")
          if (message === undefined) continue
          const time = o.senders && row.received !== null ? row.received : row.written ?? row.received ?? 0
          rows.push({
            hash: row.hash, rid: row.rid, rcvid: row.rcvid, time: julianToMs(time),
            sender: o.senders ? row.sender ?? undefined : undefined,
            user: row.user ?? "",
            place: { _tag: "Ticket", ticket: row.ticket },
            private: row.priv === 1,
            message
          })
        }
      }
    }
    rows.sort((a, b) => a.rcvid - b.rcvid || a.rid - b.rid)
    return rows
  })()

/** Each login's effective capabilities (fullcap), read once per login. */
export const capabilitiesReader = (db: Db): ((login: string) => string) => {
  const known = new Map<string, string>()
  return (login) => {
    let caps = known.get(login)
    if (caps === undefined) {
      caps = readUser(db, login)?.fullcap ?? ""
      known.set(login, caps)
    }
    return caps
  }
}
