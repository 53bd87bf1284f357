/**
 * Checkouts: what a run's workspace steps (2.7) ask of Fossil. A check-in's name resolved in a
 * repository file, a check-in's files exported into a directory, a clone of the server made with
 * the process user's credentials, a check-out of that clone opened, the process user's password
 * set in the served file. Each operation names the repository file or URL it acts on, since the
 * steps act on the node's repository and on the run's own clone alike. The steps themselves (which
 * paths they may touch, whose the files become, the words of a refusal) are the watcher's
 * (src/watcher/Workspace.ts); this service only runs Fossil for them.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { AmbiguousName, NotFound } from "./Repository.js"

export type { AmbiguousName, NotFound }

/** The `fossil` command failed: could not be started, exited non-zero, or printed an `Error:` line. */
export class FossilCommandFailed extends Schema.TaggedError<FossilCommandFailed>()("FossilCommandFailed", {
  /** what it said: its first line of error, or how it ended */
  reason: Schema.String
}) {
  override get message() {
    return this.reason
  }
}

/** A check-in's files were exported but could not be unpacked into the directory. */
export class UnpackFailed extends Schema.TaggedError<UnpackFailed>()("UnpackFailed", {
  into: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return this.reason
  }
}

export interface CheckoutsService {
  /**
   * The full hash of a check-in name (hash, prefix, branch, tag, date) as Fossil resolves it in
   * `repository`, read without writing: NotFound when it names none, AmbiguousName when a prefix
   * names several.
   */
  readonly resolveCheckin: (
    repository: string,
    name: string
  ) => Effect.Effect<string, NotFound | AmbiguousName | FossilCommandFailed>
  /** The files of `checkin` (a full hash) in `repository`, written into the directory `into` (made if missing). */
  readonly exportFiles: (
    repository: string,
    checkin: string,
    into: string
  ) => Effect.Effect<void, FossilCommandFailed | UnpackFailed>
  /** Sets `user`'s password in `repository` (the served file). */
  readonly setPassword: (repository: string, user: string, password: string) => Effect.Effect<void, FossilCommandFailed>
  /** A clone of the repository at `url` (its credentials in it, kept for the clone's syncs) into the file `into`. */
  readonly clone: (url: string, into: string) => Effect.Effect<void, FossilCommandFailed>
  /** Opens a check-out of `checkin` (a full hash) of the clone `repository` in the directory `into`. */
  readonly open: (repository: string, checkin: string, into: string) => Effect.Effect<void, FossilCommandFailed>
}

export class Checkouts extends Context.Tag("ocx2/Checkouts")<Checkouts, CheckoutsService>() {}
