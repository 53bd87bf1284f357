/**
 * An in-memory CareDirectory for unit tests of what decides with ROOT/care (a process user's
 * turn, the round's waiting runs, sessions): the same contract as the live layer, with locks held
 * in a table instead of by flock, so a test sets up "the user is held", "a hand-off is on its
 * way", "a watcher holds this run" in one line and reads back what was written. `holdRun` and
 * `holdUser` stand for another process holding a lock; what the code under test takes itself is
 * taken here as the live layer takes it, for the scope's life.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import {
  CareDirectory, CareDirError, InvalidRunName, RoundBusy, RunBusy, type CareDirectoryShape, type RunCare
} from "../services/CareDirectory.js"
import { handedForMillis, inServerOrder, type WaitingRun } from "../src/care/ProcessUserFiles.js"
import type { SessionFile } from "../src/care/SessionFiles.js"

export interface MemoryCare {
  readonly service: CareDirectoryShape
  /** another process holds RUN.lock (pid given: written in it, as a watcher writes its own) */
  readonly holdRun: (run: string, pid?: number) => void
  /** RUN.lock is there and nobody holds it (its watcher gone) */
  readonly leaveRun: (run: string) => void
  /** another run holds the process user's lock */
  readonly holdUser: (user: string) => void
  readonly releaseUser: (user: string) => void
  /** what each run's log holds, and each run's inbox lines */
  readonly logs: ReadonlyMap<string, string>
  readonly inboxes: ReadonlyMap<string, ReadonlyArray<string>>
  /** the time the layer reads for hand-offs on their way (milliseconds; Date.now by default) */
  readonly setNow: (now: number) => void
}

const runName = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/

export const make = (options: { readonly path?: string } = {}): MemoryCare => {
  const path = options.path ?? "/memory/care"
  // run -> "held" (by whom, if known) or "free" (the lock file left by a watcher gone)
  const runs = new Map<string, { held: boolean; pid?: number }>()
  const users = new Set<string>()
  const waiting = new Map<string, Array<WaitingRun>>()
  const handed = new Map<string, { run: string; at: number }>()
  const sessions = new Map<string, SessionFile>()
  const logs = new Map<string, string>()
  const inboxes = new Map<string, Array<string>>()
  const workspaces = new Map<string, string>()
  let round = false
  let clock: (() => number) = Date.now

  const checked = (run: string) =>
    runName.test(run) && run !== "round" ? Effect.succeed(run) : Effect.fail(new InvalidRunName({ run }))

  const lockRun: CareDirectoryShape["lockRun"] = (run) =>
    Effect.flatMap(checked(run), () =>
      Effect.acquireRelease(
        Effect.suspend(() => {
          const now = runs.get(run)
          if (now?.held === true) {
            return Effect.fail(now.pid === undefined ? new RunBusy({ run, lockPath: `${path}/${run}.lock` }) : new RunBusy({ run, lockPath: `${path}/${run}.lock`, holder: now.pid }))
          }
          runs.set(run, { held: true, pid: process.pid })
          return Effect.succeed({ run, fd: -1, lockPath: `${path}/${run}.lock` })
        }),
        () => Effect.sync(() => runs.set(run, { held: false, pid: process.pid }))
      ))

  const probe: CareDirectoryShape["probe"] = (run) =>
    Effect.map(checked(run), (): RunCare => {
      const now = runs.get(run)
      return now === undefined ? "absent" : now.held ? "alive" : "gone"
    })

  const withRoundLock: CareDirectoryShape["withRoundLock"] = (effect, opts) =>
    Effect.acquireUseRelease(
      Effect.suspend(() => {
        if (round) return Effect.fail(new RoundBusy({ lockPath: `${path}/round.lock`, waitedMillis: Duration.toMillis(Duration.decode(opts?.wait ?? "10 seconds")) }))
        round = true
        return Effect.void
      }),
      () => effect,
      () => Effect.sync(() => { round = false })
    )

  const lockUser: CareDirectoryShape["lockUser"] = (user) =>
    Effect.acquireRelease(
      Effect.sync(() => {
        if (users.has(user)) return false
        users.add(user)
        return true
      }),
      (took) => Effect.sync(() => { if (took) users.delete(user) })
    ).pipe(Effect.map((took) => (took ? Option.some({ user, lockPath: `${path}/~${encodeURIComponent(user)}.lock` }) : Option.none())))

  const addWaiting: CareDirectoryShape["addWaiting"] = (user, w) =>
    Effect.sync(() => {
      const list = waiting.get(user) ?? []
      if (!list.some((x) => x.run === w.run)) waiting.set(user, [...list, w])
    })

  const takeNextWaiting: CareDirectoryShape["takeNextWaiting"] = (user) =>
    Effect.sync(() => {
      const [next, ...rest] = inServerOrder(waiting.get(user) ?? [])
      if (rest.length > 0) waiting.set(user, rest)
      else waiting.delete(user)
      return { next, dropped: 0 }
    })

  const service: CareDirectoryShape = {
    path,
    lockRun,
    probe,
    holder: (run) => Effect.map(checked(run), () => Option.fromNullable(runs.get(run)?.pid)),
    listRuns: Effect.sync(() => [...runs.keys()].sort()),
    withRoundLock,
    lockUser,
    userBusy: (user) => Effect.sync(() => users.has(user)),
    withTurn: (_user, effect) => effect, // one fiber at a time in a unit test: the turn is a file lock's matter
    waiting: (user) => Effect.sync(() => inServerOrder(waiting.get(user) ?? [])),
    waitingUsers: Effect.sync(() =>
      [...waiting.entries()].filter(([, list]) => list.length > 0).sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([user, list]) => ({ user, runs: inServerOrder(list).map((w) => w.run) }))),
    addWaiting,
    removeWaiting: (user, run) => Effect.sync(() => {
      const kept = (waiting.get(user) ?? []).filter((w) => w.run !== run)
      if (kept.length > 0) waiting.set(user, kept)
      else waiting.delete(user)
    }),
    takeNextWaiting,
    markHanded: (user, run) => Effect.sync(() => handed.set(user, { run, at: clock() })),
    handedLately: (user) =>
      Effect.sync(() => {
        const h = handed.get(user)
        return h !== undefined && clock() - h.at <= handedForMillis ? Option.some(h.run) : Option.none()
      }),
    clearHanded: (user, run) => Effect.sync(() => {
      if (run === undefined || handed.get(user)?.run === run) handed.delete(user)
    }),
    handedNotes: Effect.sync(() => [...handed.keys()].map((user) => `${path}/~${encodeURIComponent(user)}.handed`)),
    clearAllHanded: Effect.sync(() => handed.clear()),
    writeSession: (session) => Effect.sync(() => sessions.set(session.run, session)),
    removeSession: (run) => Effect.sync(() => sessions.delete(run)),
    sessions: Effect.sync(() => [...sessions.values()].sort((a, b) => (a.run < b.run ? -1 : 1))),
    anySession: Effect.sync(() => sessions.size > 0),
    appendInbox: (run, line) =>
      Effect.flatMap(checked(run), () =>
        line.includes("\n")
          ? Effect.fail(new CareDirError({ op: "append", path: `${path}/${run}.inbox`, reason: "an inbox line may not hold a newline" }))
          : Effect.sync(() => inboxes.set(run, [...(inboxes.get(run) ?? []), line]))),
    // the offset counts lines here (bytes in the live layer): a reader only hands it back
    readInbox: (run, offset) =>
      Effect.map(checked(run), () => {
        const lines = (inboxes.get(run) ?? []).slice(offset)
        return { lines, nextOffset: offset + lines.length }
      }),
    writeWorkspace: (run, workspace) => Effect.map(checked(run), () => { workspaces.set(run, workspace) }),
    readWorkspace: (run) => Effect.map(checked(run), () => Option.fromNullable(workspaces.get(run))),
    appendLog: (run, text) => Effect.map(checked(run), () => { logs.set(run, `${logs.get(run) ?? ""}${text.endsWith("\n") ? text : `${text}\n`}`) }),
    readLog: (run) => Effect.map(checked(run), () => logs.get(run) ?? "")
  }

  return {
    service,
    holdRun: (run, pid) => runs.set(run, pid === undefined ? { held: true } : { held: true, pid }),
    leaveRun: (run) => runs.set(run, { held: false }),
    holdUser: (user) => users.add(user),
    releaseUser: (user) => users.delete(user),
    logs,
    inboxes,
    setNow: (now) => { clock = () => now }
  }
}

/** The layer of a memory care directory made by `make` (keep it to set up and read back). */
export const layer = (care: MemoryCare): Layer.Layer<CareDirectory> => Layer.succeed(CareDirectory, care.service)
