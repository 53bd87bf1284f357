/**
 * Receipts: who the served repository received an artifact from (seed 001, "Say who
 * sent an artifact"). The local layer (layers/FossilReceipts.ts) reads the served
 * file on the server's host; a remote layer asks the server over HTTP, so every
 * method is effectful and may fail with ServerUnreachable.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/** The server (or, locally, its repository file) could not be asked. */
export class ServerUnreachable extends Schema.TaggedError<ServerUnreachable>()("ServerUnreachable", {
  url: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `the server ${this.url} could not be reached: ${this.reason}`
  }
}

/** A hash that is not a full artifact hash (40 or 64 lower-case hex digits). */
export class InvalidHash extends Schema.TaggedError<InvalidHash>()("InvalidHash", {
  hash: Schema.String
}) {
  override get message() {
    return `"${this.hash}" is not a full artifact hash (40 or 64 lower-case hex digits)`
  }
}

/** The served repository file could not be read. */
export class ReceiptsUnavailable extends Schema.TaggedError<ReceiptsUnavailable>()("ReceiptsUnavailable", {
  path: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `cannot read receipts from ${this.path}: ${this.reason}`
  }
}

export type ReceiptsError = ServerUnreachable | InvalidHash | ReceiptsUnavailable

/** The server received the artifact from `sender`, who holds `capabilities` (fullcap). */
export interface Received {
  readonly _tag: "Received"
  readonly hash: string
  readonly sender: string
  readonly capabilities: string
  /** the receipt's number: server order is (rcvid, rid) */
  readonly rcvid: number
  readonly rid: number
}

/** Not received, or not visible to the caller (no 'o'; a private artifact and no 'x'). */
export interface NotReceived {
  readonly _tag: "NotReceived"
  readonly hash: string
}

export type ReceiptAnswer = Received | NotReceived

export interface ReceiptOptions {
  /**
   * The login asking. Undefined is the host itself (the hook, the node), which
   * sees every receipt; a remote layer asks as its signed-in user instead.
   */
  readonly caller?: string
  /**
   * A user whose capabilities the asker will ask next (the process user of the run whose record is
   * read): a remote layer asks them in the same request and remembers the answer a few seconds, as
   * it remembers receipts; the local layer, which asks nobody, has no use for it.
   */
  readonly capabilitiesNext?: string
}

export interface ReceiptsService {
  /** One answer per hash, in the order asked. */
  readonly receipts: (
    hashes: ReadonlyArray<string>,
    options?: ReceiptOptions
  ) => Effect.Effect<ReadonlyArray<ReceiptAnswer>, ReceiptsError>
  /** What a user may do on the server (fullcap); undefined if no such user. */
  readonly capabilitiesOf: (
    login: string,
    options?: ReceiptOptions
  ) => Effect.Effect<string | undefined, ServerUnreachable | ReceiptsUnavailable>
  /**
   * The served repository's newest receipt number, once it is past `after`, or when `waitMs` has
   * passed with nothing newer (a long poll: a clone's supervisor pulls the moment it answers).
   * Undefined when the caller may not read (no 'o'), or when a server's page is too old to say.
   */
  readonly newest: (
    after: number,
    waitMs: number,
    options?: ReceiptOptions
  ) => Effect.Effect<number | undefined, ServerUnreachable | ReceiptsUnavailable>
}

export class Receipts extends Context.Tag("ocx2/Receipts")<Receipts, ReceiptsService>() {}
