// A session's side of the watcher (2.10, 2.11, 2.13): deliveries read from RUN.inbox given to the
// running process's stdin (feed), or each starting a process of its own, one at a time (start).
// What waits for a process that does not read is held in memory up to a bound
// (ROOT/settings/delivery-bound, bytes; 1 MiB unless set): past it nothing more is given until the
// process reads (DECISIONS 15, back-pressure). The rest waits in RUN.inbox on disk and is given
// later, in order (Inbox.ts); only a delivery that lands past the disk bound
// (ROOT/settings/delivery-disk-bound, 1 GiB unless set) is never given, and the log names it.

import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Ref from "effect/Ref"
import type * as Scope from "effect/Scope"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { SandboxLauncher, type LaunchResult, type LaunchSpec, type RunningProcess } from "../../services/SandboxLauncher.js"
import { decideExit } from "../protocol/Life.js"
import { endedBudget, endedStopped } from "../protocol/Outcomes.js"
import type { Run } from "../protocol/Run.js"
import { releasePaths } from "../release/ReleasePaths.js"
import type { RunRecord } from "../pickup/RunRecord.js"
import type { SessionFile } from "../care/SessionFiles.js"
import type { InboxEntry } from "./Inbox.js"
import { processEndOf } from "./ProcessExit.js"

export const defaultDeliveryBound = 1024 * 1024

/** The bound, and what was wrong with ROOT/settings/delivery-bound when it could not be used. */
export const deliveryBound = (root: string): { readonly bytes: number; readonly problem?: string } => {
  const file = Path.join(releasePaths(root).settings, "delivery-bound")
  let text: string
  try {
    text = Fs.readFileSync(file, "utf8").trim()
  } catch {
    return { bytes: defaultDeliveryBound } // not set
  }
  const n = Number(text)
  return /^\d+$/.test(text) && n > 0 && Number.isSafeInteger(n)
    ? { bytes: n }
    : { bytes: defaultDeliveryBound, problem: `${file} holds ${JSON.stringify(text.slice(0, 40))}, not a number of bytes above 0: the bound is ${defaultDeliveryBound}` }
}

/** The session file the node's rounds read (written before started: its place comes later). */
export const sessionOf = (run: string, checked: Run, record: RunRecord): SessionFile => ({
  run,
  processUser: checked.process.user,
  ...(record.place._tag === "Thread" ? { thread: record.place.root } : { ticket: record.place.ticket }),
  checkins: checked.process.checkins,
  hears: checked.process.hears
})

type Log = (line: string) => Effect.Effect<void>

/** What arrives in the inbox while the run is in care: stops, and deliveries as the mode says. */
export const makeSessionInbox = (
  running: RunningProcess | undefined,
  mode: "feed" | "start" | undefined,
  bound: number,
  log: Log
) =>
  Effect.gen(function*() {
    /** done once a stop arrived */
    const stopAsked = yield* Deferred.make<void>()
    /** the process now running: start mode has one for each delivery, and none between them */
    const current = yield* Ref.make(running)
    /** start mode: deliveries waiting for the process before theirs to exit */
    const waiting = yield* Queue.unbounded<{ readonly hash: string; readonly line: string }>()
    let waitingBytes = 0
    const notGiven = (hash: string, why: string) => log(`could not give ${hash}: ${why}`)
    /** polls while a delivery waits for room: the process reading, or the one before exiting */
    const waitFor = (room: Effect.Effect<boolean>) =>
      Effect.gen(function*() {
        while (!(yield* room)) yield* Effect.sleep("25 millis")
      })
    /** whether the log already says the deliveries wait: said once each time they start waiting */
    let held = false
    const waits = (hash: string, why: string) =>
      held ? Effect.void : Effect.suspend(() => {
        held = true
        return log(`waits to give ${hash}: ${why}; what follows waits in the inbox, given in order as it reads`)
      })
    const resumes = (hash: string) =>
      !held ? Effect.void : Effect.suspend(() => {
        held = false
        return log(`gives again from ${hash}: the process read`)
      })
    const feed = (hash: string, line: string) =>
      Effect.gen(function*() {
        const process = yield* Ref.get(current)
        if (process === undefined) return yield* notGiven(hash, "no process runs")
        // what it was given and has not read is held in memory: at most the bound, or one line larger than it
        const room = Effect.map(process.pendingInput, (unread) => unread === 0 || unread + line.length + 1 <= bound)
        if (!(yield* room)) {
          const unread = yield* process.pendingInput
          yield* waits(hash, `${unread} bytes given before it wait unread, past the bound of ${bound}`)
          yield* waitFor(room)
          yield* resumes(hash)
        }
        yield* process.queueLine(line).pipe(
          Effect.zipRight(log(`gave ${hash}`)),
          Effect.catchAll((e) => notGiven(hash, e.message))
        )
      })
    const hold = (hash: string, line: string) =>
      Effect.gen(function*() {
        // start mode: what waits for the process before to exit is held in memory, up to the bound
        const room = Effect.sync(() => waitingBytes === 0 || waitingBytes + line.length <= bound)
        if (!(yield* room)) {
          yield* waits(hash, `${waitingBytes} bytes of deliveries wait for the process before, past the bound of ${bound}`)
          yield* waitFor(room)
          yield* resumes(hash)
        }
        waitingBytes += line.length
        yield* Queue.offer(waiting, { hash, line })
        yield* log(`holds ${hash} for a process of its own`)
      })
    const handle = (entry: InboxEntry): Effect.Effect<void> =>
      entry._tag === "Stop"
        ? log(`a stop arrived: ${entry.hash}`).pipe(
          Effect.zipRight(Deferred.succeed(stopAsked, undefined)),
          Effect.zipRight(Effect.flatMap(Ref.get(current), (p) => (p === undefined ? Effect.void : p.stop)))
        )
        : entry._tag === "Overflow"
        ? notGiven(entry.hash, `${entry.waiting} bytes of the inbox wait ungiven before it, past the disk bound of ${entry.bound}`)
        : mode === "feed" ? feed(entry.hash, entry.line)
        : mode === "start" ? hold(entry.hash, entry.line)
        : log(`a delivery for a run that is not a session: ${entry.hash} ignored`)
    const taken = Queue.take(waiting).pipe(Effect.tap((d) => Effect.sync(() => (waitingBytes -= d.line.length))))
    return { stopAsked, current, handle, taken }
  })

export type SessionInboxOf = Effect.Effect.Success<ReturnType<typeof makeSessionInbox>>

/**
 * deliveries start (2.10, 2.13): nothing runs until a delivery; each starts a process of its own
 * (the first line, then its delivery's line, then its input closes), one at a time, until a stop
 * or the wall, which counts from the first launch. `afterEach` writes a process's kept logs.
 * Ends with the run's ended (each process's end decided by decideExit, 2.13) and the last process's
 * result, unless the run ended while none ran.
 */
export const startEach = (
  run: Run,
  spec: LaunchSpec,
  inbox: SessionInboxOf,
  afterEach: (result: LaunchResult) => Effect.Effect<void>,
  /** offers a process's terminal to the people who join it (each process has its own, 2.10) */
  serve: (running: RunningProcess) => Effect.Effect<void, never, Scope.Scope>,
  log: Log
) =>
  Effect.gen(function*() {
    const launcher = yield* SandboxLauncher
    const wall = spec.limits.wallSeconds
    let deadline: number | undefined
    let last: LaunchResult | undefined
    for (;;) {
      if (last !== undefined) {
        const action = decideExit(run, processEndOf(last.ending), yield* Deferred.isDone(inbox.stopAsked))
        if (action._tag === "End") return { last, ended: action.ended }
        yield* afterEach(last)
      }
      // before the first launch no wall time is used (docs/protocol.md, 2.9)
      const left = deadline === undefined ? undefined : deadline - Date.now()
      const next = yield* Effect.raceAll([
        inbox.taken.pipe(Effect.map((d) => ({ _tag: "Delivery" as const, ...d }))),
        Deferred.await(inbox.stopAsked).pipe(Effect.as({ _tag: "Stop" as const })),
        ...(left === undefined ? [] : [Effect.sleep(Math.max(0, left)).pipe(Effect.as({ _tag: "Wall" as const }))])
      ])
      // while none runs, a stop or the wall ends the run (2.13)
      if (next._tag === "Stop") return { last: undefined, ended: endedStopped }
      if (next._tag === "Wall") return { last: undefined, ended: endedBudget("wall") }
      if (deadline === undefined && wall !== undefined) deadline = Date.now() + wall * 1000
      const remaining = deadline === undefined ? undefined : Math.max(0.001, (deadline - Date.now()) / 1000)
      last = yield* Effect.scoped(Effect.gen(function*() {
        const running = yield* launcher.start({
          ...spec,
          gated: false,
          stdin: { lines: [spec.stdin.lines[0]!, next.line], keepOpen: false },
          limits: { ...spec.limits, wallSeconds: remaining }
        })
        yield* Ref.set(inbox.current, running)
        yield* serve(running)
        yield* log(`launched for ${next.hash} (pid ${running.pid})`)
        // a stop that arrived while it was being launched ends it at once
        if (yield* Deferred.isDone(inbox.stopAsked)) yield* running.stop
        const result = yield* running.result
        yield* Ref.set(inbox.current, undefined)
        return result
      }))
      yield* log(`the process for ${next.hash} ended`)
    }
  })
