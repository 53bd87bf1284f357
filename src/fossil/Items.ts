/**
 * What reading a repository gives: each item carries its place in server order
 * (rcvid, then rid) and its sender, the login the repository received it from.
 * On a clone the sender is undefined: a clone's receipts name only its pulls, so the
 * caller asks the server (Receipts).
 */

/** Where a reader stands: everything at or before (rcvid, rid) has been read. */
export interface Cursor {
  readonly rcvid: number
  readonly rid: number
}

export const startCursor: Cursor = { rcvid: 0, rid: 0 }

export const isAfter = (item: { readonly rcvid: number; readonly rid: number }, cursor: Cursor): boolean =>
  item.rcvid > cursor.rcvid || (item.rcvid === cursor.rcvid && item.rid > cursor.rid)

export const serverOrder = (a: { rcvid: number; rid: number }, b: { rcvid: number; rid: number }): number =>
  a.rcvid - b.rcvid || a.rid - b.rid

interface Received {
  /** the artifact's full hash */
  readonly hash: string
  readonly rid: number
  readonly rcvid: number
  /** login of the user the repository received it from; undefined on a clone */
  readonly sender: string | undefined
}

/** A forum post: a thread's first post, a reply, or an edit of either. */
export interface Post extends Received {
  readonly _tag: "Post"
  /** hash of the thread's first post (the post itself for a first post) */
  readonly root: string
  /** hash of the post answered (I card); undefined for a first post and its edits */
  readonly inReplyTo: string | undefined
  /** hash of the version this post replaces (P card); undefined unless an edit */
  readonly editOf: string | undefined
  /** H card; undefined for replies */
  readonly title: string | undefined
  readonly text: string
  readonly mimetype: string
  /** U card: who the writer says wrote it (proves nothing) */
  readonly user: string
}

/** A ticket change; text is its icomment (for a +icomment change, the appended text). */
export interface TicketChange extends Received {
  readonly _tag: "TicketChange"
  /** the ticket's id (40 hex) */
  readonly ticket: string
  readonly text: string
  readonly mimetype: string | undefined
  readonly user: string
}

export interface Checkin extends Received {
  readonly _tag: "Checkin"
  /** the branch as Fossil's timeline shows it */
  readonly branch: string | undefined
  readonly comment: string
  /** the check-in's user (U card) */
  readonly user: string
}

/** One T card of a tag artifact. */
export interface TagSet {
  readonly op: "+" | "*" | "-"
  readonly name: string
  readonly target: string
  readonly value: string | undefined
}

/** A tag artifact (raw tags such as ci and audited, branch and symbolic tags). */
export interface TagArtifact extends Received {
  readonly _tag: "TagArtifact"
  readonly tags: ReadonlyArray<TagSet>
  /** D card, as the writer chose it (ISO 8601) */
  readonly date: string
  readonly user: string
}

export type Item = Post | TicketChange | Checkin | TagArtifact

export interface ReadBatch {
  readonly items: ReadonlyArray<Item>
  /** pass it to the next readAfter; it is past every artifact looked at, items or not */
  readonly cursor: Cursor
  /** true when limit stopped the read: read again from cursor for more */
  readonly more: boolean
  /**
   * a blob after `cursor` that may be a post or ticket change and had no row in the read's
   * snapshot (its page had not finished writing it): the read stopped before it, and `cursor`
   * is before it; read again soon. Absent when nothing was held back.
   */
  readonly unread?: Cursor
}

/** A check-in's tags: the values Fossil holds now, and every tag artifact naming it. */
export interface CheckinTags {
  readonly checkin: string
  /** tagxref: one row per tag name, the newest by D card; propagated ones included */
  readonly current: ReadonlyArray<{ readonly name: string; readonly value: string | undefined; readonly source: string | undefined }>
  /** every T card of a tag artifact aimed at the check-in, in server order */
  readonly history: ReadonlyArray<TagArtifact>
}

export interface User {
  readonly login: string
  /** the user's own capability letters */
  readonly capabilities: string
  /** Fossil's fullcap(): own + developer/reader where inherited + anonymous + nobody */
  readonly fullcap: string
}

export interface Codes {
  readonly projectCode: string
  readonly serverCode: string
}

export interface UnversionedFile {
  readonly name: string
  /** undefined for a deleted file */
  readonly hash: string | undefined
  readonly size: number
  /** seconds since 1970 */
  readonly mtime: number
  readonly rcvid: number
  readonly sender: string | undefined
}

/** Who the repository received an artifact from. */
export interface Receipt {
  readonly hash: string
  readonly rid: number
  readonly rcvid: number
  readonly sender: string
}
