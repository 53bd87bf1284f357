/**
 * Repository: one Fossil repository file, the served one on the server's host or a
 * clone elsewhere. Reads are short read transactions in server order (blob.rcvid,
 * then blob.rid). Writes are made as a named user: on the server's host into the
 * served file by Fossil's command line run as that user, from a clone pushed to the
 * server with that user's credentials; each is confirmed before it is reported
 * written (by its receipt on the server's host, by the server returning it to a
 * clone), since `fossil push` exits 0 on errors. A composed artifact is named by its
 * hash, so `put` of the same artifact twice writes it once.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { ServerUnreachable } from "./Receipts.js"

export { ServerUnreachable }

/** A composed artifact, ready to write (src/fossil/Artifact.ts composes them). */
export interface Artifact {
  /** the artifact's exact bytes */
  readonly bytes: Buffer
  /** SHA3-256 of the bytes: the artifact's name */
  readonly hash: string
}

// ---------- what reading a repository gives ----------
// Each item carries its place in server order (rcvid, then rid) and its sender, the login the
// repository received it from. On a clone the sender is undefined: a clone's receipts name only
// its pulls, so the caller asks the server (Receipts).


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

/** The repository file cannot be opened or read (missing, not a repository, corrupt). */
export class RepositoryUnavailable extends Schema.TaggedError<RepositoryUnavailable>()("RepositoryUnavailable", {
  path: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `repository ${this.path} cannot be read: ${this.reason}`
  }
}

/** No artifact, post, ticket, check-in or file of that name (or prefix) is in the repository. */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", {
  what: Schema.String,
  name: Schema.String
}) {
  override get message() {
    return `no ${this.what} named ${this.name} in the repository`
  }
}

/** The repository knows of the artifact but does not hold its content (a phantom). */
export class PhantomArtifact extends Schema.TaggedError<PhantomArtifact>()("PhantomArtifact", {
  hash: Schema.String
}) {
  override get message() {
    return `artifact ${this.hash} is a phantom: the repository knows its name but not its content`
  }
}

/** A prefix that names more than one artifact or ticket. */
export class AmbiguousName extends Schema.TaggedError<AmbiguousName>()("AmbiguousName", {
  what: Schema.String,
  name: Schema.String
}) {
  override get message() {
    return `${this.name} names more than one ${this.what}: give more digits`
  }
}

/** Input a write cannot take (named field, why). Nothing was written. */
export class InvalidInput extends Schema.TaggedError<InvalidInput>()("InvalidInput", {
  field: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `${this.field}: ${this.reason}`
  }
}

/** The server or Fossil refused the user: login failed, not authorized, no such user, no password. */
export class WriteRefused extends Schema.TaggedError<WriteRefused>()("WriteRefused", {
  user: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `writing as ${this.user} was refused: ${this.reason}`
  }
}

/** The write failed for another reason (Fossil's command failed, a protocol error). */
export class WriteFailed extends Schema.TaggedError<WriteFailed>()("WriteFailed", {
  operation: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `${this.operation} failed: ${this.reason}`
  }
}

/** The write seemed to succeed but its receipt does not show it (or shows another sender). */
export class WriteNotConfirmed extends Schema.TaggedError<WriteNotConfirmed>()("WriteNotConfirmed", {
  hash: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `the write of ${this.hash} is not confirmed: ${this.reason}`
  }
}

export type ReadError = RepositoryUnavailable | NotFound | PhantomArtifact | AmbiguousName | InvalidInput
export type WriteError =
  | RepositoryUnavailable | NotFound | PhantomArtifact | AmbiguousName | InvalidInput
  | WriteRefused | WriteFailed | WriteNotConfirmed | ServerUnreachable

/**
 * What a write left. `receipt` is the served repository's receipt (server's host);
 * from a clone it is undefined: the server returned the artifact, and its receipt is
 * asked of the server (Receipts) by who needs it.
 */
export interface Written {
  readonly hash: string
  readonly receipt: Receipt | undefined
  /** false when the artifact was already there and nothing was sent */
  readonly sent: boolean
}

export interface WrittenUnversioned {
  readonly name: string
  readonly hash: string
  /** the served repository's receipt number and sender (server's host); undefined from a clone */
  readonly rcvid: number | undefined
  readonly sender: string | undefined
}

export interface PostInput {
  readonly user: string
  readonly title: string
  readonly text: string
  /** default text/x-markdown */
  readonly mimetype?: string
}

export interface ReplyInput {
  readonly user: string
  /** the post answered: full hash or unique prefix; the reply joins its thread */
  readonly to: string
  readonly text: string
  readonly mimetype?: string
}

export interface TicketChangeInput {
  readonly user: string
  /** the ticket changed (full id or unique prefix); absent: a new ticket */
  readonly ticket?: string
  /** fields set, e.g. { icomment: "...", status: "Open" } */
  readonly fields: Readonly<Record<string, string>>
  /** fields appended to, e.g. { icomment: "..." } */
  readonly append?: Readonly<Record<string, string>>
}

export interface TagInput {
  readonly user: string
  /** the check-in: full hash or unique prefix */
  readonly checkin: string
  /** e.g. ci, audited */
  readonly name: string
  readonly value: string
}

export interface UnversionedInput {
  readonly user: string
  readonly name: string
  readonly content: Uint8Array | string
}

export interface RepositoryService {
  /** the repository file */
  readonly path: string
  /** "served": the server's own file (senders known); "clone": writes are pushed, senders unknown */
  readonly role: "served" | "clone"

  // reads
  /** Items received after `cursor`, in server order, at most `limit` (default 1000). */
  readonly readAfter: (cursor: Cursor, limit?: number) => Effect.Effect<ReadBatch, ReadError>
  /** Every post of the thread of `post` (hash or prefix), in server order; private posts left out. */
  readonly thread: (post: string) => Effect.Effect<ReadonlyArray<Post>, ReadError>
  /** Every change of a ticket (id or prefix), in server order. */
  readonly ticket: (id: string) => Effect.Effect<ReadonlyArray<TicketChange>, ReadError>
  /** A check-in's tags: current values and every tag artifact aimed at it. */
  readonly tags: (checkin: string) => Effect.Effect<CheckinTags, ReadError>
  /** A user and their effective capabilities; undefined if no such login. */
  readonly user: (login: string) => Effect.Effect<User | undefined, ReadError>
  readonly codes: () => Effect.Effect<Codes, ReadError>
  /** An artifact's bytes (deltas applied). */
  readonly artifact: (hash: string) => Effect.Effect<Buffer, ReadError>
  readonly unversioned: () => Effect.Effect<ReadonlyArray<UnversionedFile>, ReadError>
  readonly readUnversioned: (name: string) => Effect.Effect<{ readonly file: UnversionedFile; readonly content: Buffer }, ReadError>

  // writes
  /** A new thread. */
  readonly post: (input: PostInput) => Effect.Effect<Written, WriteError>
  /** A reply in the thread of `to`, answering `to`. */
  readonly reply: (input: ReplyInput) => Effect.Effect<Written & { readonly root: string }, WriteError>
  /** A ticket change (a new ticket when `ticket` is absent). */
  readonly ticketChange: (input: TicketChangeInput) => Effect.Effect<Written & { readonly ticket: string }, WriteError>
  /** A raw tag (never propagating) on a check-in, such as a ci or audited verdict. */
  readonly tag: (input: TagInput) => Effect.Effect<Written, WriteError>
  readonly putUnversioned: (input: UnversionedInput) => Effect.Effect<WrittenUnversioned, WriteError>
  /**
   * Send a composed artifact as `user` (src/fossil/Artifact.ts). Idempotent: an
   * artifact already there is not sent again. Retry a failed write with the same
   * artifact, never a re-composed one (a new D card is a new artifact).
   */
  readonly put: (user: string, artifact: Artifact) => Effect.Effect<Written, WriteError>
  /**
   * Several composed artifacts as `user` in one write (one transaction on the server's host, one
   * push from a clone), in their order: a run's ended with its kept logs and verdict. Each write
   * to the served file holds it whole, so one write instead of three keeps the node out of people's
   * way. Idempotent as `put`; all or none is received.
   */
  readonly putAll: (user: string, artifacts: ReadonlyArray<Artifact>) => Effect.Effect<ReadonlyArray<Written>, WriteError>
  /**
   * Takes back writes a dead writer left waiting to be written with others' (on the server's host,
   * several writers' artifacts go in one write): after it, none of `hashes` is written unless it
   * already was. Recovery calls it before it reads a run's record.
   */
  readonly withdraw: (hashes: ReadonlyArray<string>) => Effect.Effect<void, WriteError>
}

export class Repository extends Context.Tag("ocx2/Repository")<Repository, RepositoryService>() {}
