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
  CareDirectory, CareDirError, InvalidRunName, RoundBusy, RunBusy, type CareDirectoryService, type RunCare, type SessionFile,
  type WaitingRun
} from "../services/CareDirectory.js"
import { handedForMillis, inServerOrder } from "../src/care/ProcessUserFiles.js"

export interface MemoryCare {
  readonly service: CareDirectoryService
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

/** What the memory care directory holds; made once by `make`, changed by each operation below. */
interface Memory {
  readonly path: string
  /** run -> "held" (by whom, if known) or "free" (the lock file left by a watcher gone) */
  readonly runs: Map<string, { held: boolean; pid?: number }>
  readonly users: Set<string>
  readonly waiting: Map<string, Array<WaitingRun>>
  readonly handed: Map<string, { run: string; at: number }>
  readonly sessions: Map<string, SessionFile>
  readonly logs: Map<string, string>
  readonly inboxes: Map<string, Array<string>>
  readonly workspaces: Map<string, string>
  round: boolean
  clock: () => number
}

const checked = (run: string) =>
  runName.test(run) && run !== "round" ? Effect.succeed(run) : Effect.fail(new InvalidRunName({ run }))

const lockRun = (m: Memory): CareDirectoryService["lockRun"] => (run) =>
  Effect.flatMap(checked(run), () =>
    Effect.acquireRelease(
      Effect.suspend(() => {
        const now = m.runs.get(run)
        if (now?.held === true) {
          return Effect.fail(now.pid === undefined ? new RunBusy({ run, lockPath: `${m.path}/${run}.lock` }) : new RunBusy({ run, lockPath: `${m.path}/${run}.lock`, holder: now.pid }))
        }
        m.runs.set(run, { held: true, pid: process.pid })
        return Effect.succeed({ run, fd: -1, lockPath: `${m.path}/${run}.lock` })
      }),
      () => Effect.sync(() => m.runs.set(run, { held: false, pid: process.pid }))
    ))

const probe = (m: Memory): CareDirectoryService["probe"] => (run) =>
  Effect.map(checked(run), (): RunCare => {
    const now = m.runs.get(run)
    return now === undefined ? "absent" : now.held ? "alive" : "gone"
  })

const withRoundLock = (m: Memory): CareDirectoryService["withRoundLock"] => (effect, opts) =>
  Effect.acquireUseRelease(
    Effect.suspend(() => {
      if (m.round) return Effect.fail(new RoundBusy({ lockPath: `${m.path}/round.lock`, waitedMillis: Duration.toMillis(Duration.decode(opts?.wait ?? "10 seconds")) }))
      m.round = true
      return Effect.void
    }),
    () => effect,
    () => Effect.sync(() => { m.round = false })
  )

const lockUser = (m: Memory): CareDirectoryService["lockUser"] => (user) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      if (m.users.has(user)) return false
      m.users.add(user)
      return true
    }),
    (took) => Effect.sync(() => { if (took) m.users.delete(user) })
  ).pipe(Effect.map((took) => (took ? Option.some({ user, lockPath: `${m.path}/~${encodeURIComponent(user)}.lock` }) : Option.none())))

/** The process users' queue: each user's waiting runs, in the server's order. */
const queue = (m: Memory) => ({
  withTurn: (_user, effect) => effect, // one fiber at a time in a unit test: the turn is a file lock's matter
  waiting: (user) => Effect.sync(() => inServerOrder(m.waiting.get(user) ?? [])),
  waitingUsers: Effect.sync(() =>
    [...m.waiting.entries()].filter(([, list]) => list.length > 0).sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([user, list]) => ({ user, runs: inServerOrder(list).map((w) => w.run) }))),
  addWaiting: (user, w) =>
    Effect.sync(() => {
      const list = m.waiting.get(user) ?? []
      if (!list.some((x) => x.run === w.run)) m.waiting.set(user, [...list, w])
    }),
  removeWaiting: (user, run) => Effect.sync(() => {
    const kept = (m.waiting.get(user) ?? []).filter((w) => w.run !== run)
    if (kept.length > 0) m.waiting.set(user, kept)
    else m.waiting.delete(user)
  }),
  takeNextWaiting: (user) =>
    Effect.sync(() => {
      const [next, ...rest] = inServerOrder(m.waiting.get(user) ?? [])
      if (rest.length > 0) m.waiting.set(user, rest)
      else m.waiting.delete(user)
      return { next, dropped: 0 }
    })
}) satisfies Partial<CareDirectoryService>

/** The hand-offs on their way (~USER.handed), timed by the memory's clock. */
const handOffs = (m: Memory) => ({
  markHanded: (user, run) => Effect.sync(() => m.handed.set(user, { run, at: m.clock() })),
  handedLately: (user) =>
    Effect.sync(() => {
      const h = m.handed.get(user)
      return h !== undefined && m.clock() - h.at <= handedForMillis ? Option.some(h.run) : Option.none()
    }),
  clearHanded: (user, run) => Effect.sync(() => {
    if (run === undefined || m.handed.get(user)?.run === run) m.handed.delete(user)
  }),
  handedNotes: Effect.sync(() => [...m.handed.keys()].map((user) => `${m.path}/~${encodeURIComponent(user)}.handed`)),
  clearAllHanded: Effect.sync(() => m.handed.clear())
}) satisfies Partial<CareDirectoryService>

/** The sessions in care. */
const sessions = (m: Memory) => ({
  writeSession: (session) => Effect.sync(() => m.sessions.set(session.run, session)),
  removeSession: (run) => Effect.sync(() => m.sessions.delete(run)),
  sessions: Effect.sync(() => [...m.sessions.values()].sort((a, b) => (a.run < b.run ? -1 : 1))),
  anySession: Effect.sync(() => m.sessions.size > 0)
}) satisfies Partial<CareDirectoryService>

/** Each run's inbox, workspace and log. */
const runFiles = (m: Memory) => ({
  appendInbox: (run, line) =>
    Effect.flatMap(checked(run), () =>
      line.includes("\n")
        ? Effect.fail(new CareDirError({ op: "append", path: `${m.path}/${run}.inbox`, reason: "an inbox line may not hold a newline" }))
        : Effect.sync(() => m.inboxes.set(run, [...(m.inboxes.get(run) ?? []), line]))),
  // the offset counts lines here (bytes in the live layer): a reader only hands it back
  readInbox: (run, offset) =>
    Effect.map(checked(run), () => {
      const lines = (m.inboxes.get(run) ?? []).slice(offset)
      return { lines, nextOffset: offset + lines.length }
    }),
  writeWorkspace: (run, workspace) => Effect.map(checked(run), () => { m.workspaces.set(run, workspace) }),
  readWorkspace: (run) => Effect.map(checked(run), () => Option.fromNullable(m.workspaces.get(run))),
  appendLog: (run, text) => Effect.map(checked(run), () => { m.logs.set(run, `${m.logs.get(run) ?? ""}${text.endsWith("\n") ? text : `${text}\n`}`) }),
  readLog: (run) => Effect.map(checked(run), () => m.logs.get(run) ?? "")
}) satisfies Partial<CareDirectoryService>

export const make = (options: { readonly path?: string } = {}): MemoryCare => {
  const m: Memory = {
    path: options.path ?? "/memory/care",
    runs: new Map(),
    users: new Set(),
    waiting: new Map(),
    handed: new Map(),
    sessions: new Map(),
    logs: new Map(),
    inboxes: new Map(),
    workspaces: new Map(),
    round: false,
    clock: Date.now
  }
  const service: CareDirectoryService = {
    path: m.path,
    lockRun: lockRun(m),
    probe: probe(m),
    holder: (run) => Effect.map(checked(run), () => Option.fromNullable(m.runs.get(run)?.pid)),
    listRuns: Effect.sync(() => [...m.runs.keys()].sort()),
    withRoundLock: withRoundLock(m),
    lockUser: lockUser(m),
    userBusy: (user) => Effect.sync(() => m.users.has(user)),
    ...queue(m),
    ...handOffs(m),
    ...sessions(m),
    ...runFiles(m)
  }
  return {
    service,
    holdRun: (run, pid) => m.runs.set(run, pid === undefined ? { held: true } : { held: true, pid }),
    leaveRun: (run) => m.runs.set(run, { held: false }),
    holdUser: (user) => m.users.add(user),
    releaseUser: (user) => m.users.delete(user),
    logs: m.logs,
    inboxes: m.inboxes,
    setNow: (now) => { m.clock = () => now }
  }
}

/** The layer of a memory care directory made by `make` (keep it to set up and read back). */
export const layer = (care: MemoryCare): Layer.Layer<CareDirectory> => Layer.succeed(CareDirectory, care.service)
