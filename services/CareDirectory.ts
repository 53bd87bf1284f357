/**
 * ROOT/care (2.15): the runs in this host's care, one watcher lock each, and round.lock; the
 * process users' queue (~USER.lock, ~USER.waiting, ~USER.handed, under ~USER.turn); the sessions
 * in care (RUN.session). The files' names and formats are src/care's, shared with the hook's plain
 * fast path; everything an Effect does in ROOT/care goes through here.
 */

import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"

/** One run waiting for its process user: one JSON line of ~USER.waiting. */
export interface WaitingRun {
  readonly run: string
  readonly personStart?: boolean
  /** its place in the server's order: [rcvid, rid] */
  readonly at?: readonly [number, number]
}

/** A session in this host's care: ROOT/care/RUN.session, as the node's rounds need it (2.11). */
export interface SessionFile {
  readonly run: string
  readonly processUser: string
  /** the first post of the run's thread, when the run is a post */
  readonly thread?: string
  /** the run's ticket, when the run is a ticket change */
  readonly ticket?: string
  readonly checkins: ReadonlyArray<string>
  readonly hears: ReadonlyArray<string>
  /** its started that counts, once written and received; absent before */
  readonly started?: { readonly hash: string; readonly rcvid: number; readonly rid: number }
}

/** "absent": not in care; "alive": its watcher holds RUN.lock; "gone": RUN.lock is there and free */
export type RunCare = "absent" | "alive" | "gone"

export interface RunLock {
  readonly run: string
  /**
   * The descriptor holding the lock. A child given it keeps the lock held until the child
   * ends too: a write still in flight when the watcher dies keeps recovery waiting for it.
   */
  readonly fd: number
  readonly lockPath: string
}

export interface UserLock {
  readonly user: string
  readonly lockPath: string
}

export interface InboxRead {
  /** whole lines after the offset (a line being written is left for the next read) */
  readonly lines: ReadonlyArray<string>
  /** where the next read starts */
  readonly nextOffset: number
}

export class RunBusy extends Schema.TaggedError<RunBusy>()("RunBusy", {
  run: Schema.String,
  lockPath: Schema.String,
  /** the pid the holder wrote, when it wrote one */
  holder: Schema.optionalWith(Schema.Number, { exact: true })
}) {
  override get message() {
    return `run ${this.run} is held by another watcher${this.holder === undefined ? "" : ` (pid ${this.holder})`}: ${this.lockPath}`
  }
}

export class RoundBusy extends Schema.TaggedError<RoundBusy>()("RoundBusy", {
  lockPath: Schema.String,
  waitedMillis: Schema.Number
}) {
  override get message() {
    return `another round holds ${this.lockPath}; waited ${this.waitedMillis} ms`
  }
}

export class InvalidRunName extends Schema.TaggedError<InvalidRunName>()("InvalidRunName", {
  run: Schema.String
}) {
  override get message() {
    return `${JSON.stringify(this.run)} cannot name a run in care (letters, digits, - and _ only, at most 128)`
  }
}

export class CareDirError extends Schema.TaggedError<CareDirError>()("CareDirError", {
  op: Schema.String,
  path: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `care directory: ${this.op} ${this.path}: ${this.reason}`
  }
}

export type CareError = CareDirError | InvalidRunName

export interface CareDirectoryService {
  /** the directory itself (ROOT/care) */
  readonly path: string
  /** takes RUN.lock for the scope's life (released by the kernel if this process dies); writes our pid into it */
  readonly lockRun: (run: string) => Effect.Effect<RunLock, RunBusy | CareError, Scope.Scope>
  /** one non-blocking lock attempt; the lock is let go at once */
  readonly probe: (run: string) => Effect.Effect<RunCare, CareError>
  /** the pid written in RUN.lock by its last holder */
  readonly holder: (run: string) => Effect.Effect<Option.Option<number>, CareError>
  /** every run with a RUN.lock, sorted */
  readonly listRuns: Effect.Effect<ReadonlyArray<string>, CareDirError>
  /** runs the effect while holding round.lock, waiting for it up to `wait` (default 10 seconds) */
  readonly withRoundLock: <A, E, R>(
    effect: Effect.Effect<A, E, R>,
    options?: { readonly wait?: Duration.DurationInput }
  ) => Effect.Effect<A, E | RoundBusy | CareDirError, R>
  /**
   * Takes the process user's lock for the scope's life (one run per process user in care, 2.13);
   * none when another run of the user's holds it.
   */
  readonly lockUser: (user: string) => Effect.Effect<Option.Option<UserLock>, CareDirError, Scope.Scope>
  /** whether a run of the user's holds its lock now */
  readonly userBusy: (user: string) => Effect.Effect<boolean, CareDirError>
  /**
   * `effect` run holding ~USER.turn (src/care/UserTurn.ts: every look at the user's queue and every
   * hand-off of its turn is made holding it); `hold: false` (a dry run) takes nothing. Not had in
   * 10 s, the effect runs without it.
   */
  readonly withTurn: <A, E, R>(user: string, effect: Effect.Effect<A, E, R>, options?: { readonly hold?: boolean }) => Effect.Effect<A, E, R>
  /** the runs written down as waiting for the user, first in the server's order */
  readonly waiting: (user: string) => Effect.Effect<ReadonlyArray<WaitingRun>>
  /** every process user with runs waiting, and those runs in the server's order */
  readonly waitingUsers: Effect.Effect<ReadonlyArray<{ readonly user: string; readonly runs: ReadonlyArray<string> }>>
  /** writes the run down as waiting for the user, once */
  readonly addWaiting: (user: string, waiting: WaitingRun) => Effect.Effect<void, CareDirError>
  /** takes the run out of the user's waiting runs (held under the user's turn, as every writer) */
  readonly removeWaiting: (user: string, run: string) => Effect.Effect<void, CareDirError>
  /** takes the first waiting run in the server's order and leaves the others; damaged lines dropped and counted */
  readonly takeNextWaiting: (user: string) => Effect.Effect<{ readonly next: WaitingRun | undefined; readonly dropped: number }, CareDirError>
  /** notes that `run` was just handed to a watcher for the user (~USER.handed) */
  readonly markHanded: (user: string, run: string) => Effect.Effect<void>
  /** the run handed lately to a watcher for the user, while it is still on its way to the user's lock */
  readonly handedLately: (user: string) => Effect.Effect<Option.Option<string>>
  /** the hand-off has arrived or come to nothing: its note goes (only `run`'s, when named) */
  readonly clearHanded: (user: string, run?: string) => Effect.Effect<void>
  /** the notes of every hand-off on its way, as paths */
  readonly handedNotes: Effect.Effect<ReadonlyArray<string>>
  /** forgets every hand-off on its way (the node's start decides every open run again) */
  readonly clearAllHanded: Effect.Effect<void>
  /** writes RUN.session whole (a reader never sees half of it) */
  readonly writeSession: (session: SessionFile) => Effect.Effect<void, CareDirError>
  readonly removeSession: (run: string) => Effect.Effect<void, CareDirError>
  /** every session in care, sorted by run; one being replaced or damaged is left out */
  readonly sessions: Effect.Effect<ReadonlyArray<SessionFile>>
  /** whether any session is in care */
  readonly anySession: Effect.Effect<boolean>
  readonly appendInbox: (run: string, line: string) => Effect.Effect<void, CareError>
  readonly readInbox: (run: string, offset: number) => Effect.Effect<InboxRead, CareError>
  readonly writeWorkspace: (run: string, workspace: string) => Effect.Effect<void, CareError>
  readonly readWorkspace: (run: string) => Effect.Effect<Option.Option<string>, CareError>
  readonly appendLog: (run: string, text: string) => Effect.Effect<void, CareError>
  readonly readLog: (run: string) => Effect.Effect<string, CareError>
}

export class CareDirectory extends Context.Tag("ocx2/CareDirectory")<CareDirectory, CareDirectoryService>() {}
