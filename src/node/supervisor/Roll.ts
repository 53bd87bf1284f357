// The supervisor's roll of the node's watchers, as actors (docs/architecture.md, "The supervisor"):
// one fiber per run, in a FiberMap keyed by run, holding its watcher for as long as it lives. The
// fiber's resource is the run's place on the roll: acquired when its watcher is heard (a hand-off,
// RUN.handoff, or its lock, RUN.lock, taken: whoever started it, the round, the spare or a watcher
// waking its user's next run), released when the watcher's end is decided. The supervisor does not
// spawn watchers as its own children: they are started detached so that a supervisor SIGKILLed
// leaves them running, and its next start takes them back (the run's lock stays the truth).
//
// A watcher's end is seen by reading /proc/PID/stat every 200 ms (Node 20 has no pidfd). The fiber
// then puts the end on the node's queue and waits for the answer: the one fiber of work decides it
// under round.lock and the run's lock, as the node's start does (lost when it started, handed on
// when it never did), then hands on its process user's first waiting run. The fiber keeps what
// only its run needs: the pause after a failed decision (1 s doubling to 30 s), the wait of a run
// handed on too often this minute, the look again while a gone watcher's write still holds the lock.

import * as Cause from "effect/Cause"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberHandle from "effect/FiberHandle"
import * as FiberMap from "effect/FiberMap"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Queue from "effect/Queue"
import * as Ref from "effect/Ref"
import type * as Scope from "effect/Scope"
import * as Deferred from "effect/Deferred"
import type { NodeConfig } from "../../root/NodeConfig.js"
import { processStartTime } from "../../root/SupervisorFiles.js"
import { handOffFileOf } from "../../care/HandOffFiles.js"
import { processUserFileName } from "../../care/ProcessUserFiles.js"
import { wakeWaitingOf } from "../Round.js"
import { decideEnded, lastLogLine, rehandWaitMs, type RollNeeds, wroteEnded } from "../RollKeeper.js"
import { firstLine } from "../SupervisorLog.js"
import { holderOf, pidIn, runOfCareFile, runOfLockFile } from "../WatcherRoll.js"
import { EndOutcome, NodeEvent } from "./NodeEvents.js"

/** How often a run's fiber looks whether its watcher still lives: the bound on seeing one end. */
export const lookEveryMs = 200
/** How often the runs waiting for a process user are looked at while any wait. */
const waitingEveryMs = 2000
const minuteMs = 60_000

/** A watcher on the roll: its pid and that pid's start time ("" for one already gone when heard). */
interface Known {
  readonly pid: number
  readonly started: string
}
type Known_ = ReadonlyMap<string, Known>
/** The roll and the runs that have a fiber, in one Ref: a fiber ending and a watcher heard cannot cross. */
interface RollState {
  readonly known: Known_
  readonly followed: ReadonlySet<string>
}

export interface RollHost {
  readonly config: NodeConfig
  readonly care: string
  readonly watcherProgram: () => string
  readonly log: (entry: Record<string, unknown>) => Effect.Effect<void>
  /** the roll changed: the host writes its info file */
  readonly changed: Effect.Effect<void>
  /** the node's one queue of events: a watcher's end goes there to be decided */
  readonly queue: Queue.Enqueue<NodeEvent>
  /** the decision of a gone watcher's run (the real one by default; a unit test gives its own) */
  readonly decide?: (run: string, handedOnly: boolean) => Effect.Effect<{ readonly action: string; readonly woke: string | undefined; readonly user: string | undefined } | undefined, unknown>
}

export interface Roll {
  /** a name written in the care directory (its inotify event) */
  readonly heard: (name: string) => Effect.Effect<void>
  /** the supervisor starting: every live watcher taken back (their fibers started), every user with runs waiting looked at; how many */
  readonly takeBack: Effect.Effect<number>
  /** a gone watcher's run decided, on the node's one fiber of work (its WatcherEnded event) */
  readonly decideEnd: (run: string, pid: number) => Effect.Effect<EndOutcome>
  /** each process user free with runs waiting and no hand-off on its way: its first waiting run handed on */
  readonly lookAtWaiting: Effect.Effect<void>
  /** the runs on the roll and their watchers' pids (the info file) */
  readonly snapshot: Effect.Effect<Record<string, number>>
  /** whether the run may be handed to a new watcher now (the supervisor's second look asks before it decides) */
  readonly mayHandOn: (run: string) => Effect.Effect<boolean>
  /** a hand-off made outside the roll (the supervisor's second look): it counts toward the run's minute */
  readonly handedOn: (run: string) => Effect.Effect<void>
}

/** The holder a care file names for the run: its lock's pid, or its hand-off's pid and start time. */
const holderNamed = (care: string, run: string, kind: "lock" | "handoff"): { readonly pid: number; readonly since?: string } | undefined => {
  if (kind === "lock") {
    const pid = holderOf(care, run)
    return pid === undefined ? undefined : { pid }
  }
  const file = handOffFileOf(care, run)
  try {
    const since = Fs.readFileSync(file, "utf8").trim().split(" ")[1]
    const pid = pidIn(file)
    return pid === undefined ? undefined : since === undefined ? { pid } : { pid, since }
  } catch {
    return undefined
  }
}

/**
 * The roll with the run's holder noted: a live one (not this process) is put on it ("added"); one
 * already gone when it is read ("dead") is put on it too when `keepDead` (its fiber decides it at
 * once, as any watcher's end), else left off. Unchanged when the roll already has that pid.
 */
const noteHolder = (roll: Known_, run: string, holder: { readonly pid: number; readonly since?: string } | undefined, keepDead: boolean): readonly [("added" | "dead" | undefined), Known_] => {
  if (holder === undefined || holder.pid === process.pid || roll.get(run)?.pid === holder.pid) return [undefined, roll]
  const started = processStartTime(holder.pid)
  const dead = started === undefined || (holder.since !== undefined && holder.since !== "" && holder.since !== started)
  if (dead && !keepDead) return ["dead", roll]
  return [dead ? "dead" : "added", new Map(roll).set(run, { pid: holder.pid, started: dead ? "" : started! })]
}

const without = (roll: Known_, run: string, pid: number): Known_ => {
  if (roll.get(run)?.pid !== pid) return roll
  const next = new Map(roll)
  next.delete(run)
  return next
}

const waitingUserOf = (name: string): string | undefined => {
  if (!name.startsWith("~") || !name.endsWith(".waiting")) return undefined
  try {
    return decodeURIComponent(name.slice(1, -".waiting".length))
  } catch {
    return undefined // not a name the node writes
  }
}

const careNames = (care: string): ReadonlyArray<string> => {
  try {
    return Fs.readdirSync(care)
  } catch {
    return [] // no care directory yet
  }
}

/** What the roll keeps across events: Refs, its fibers, and the decision it is given. */
interface RollCtx {
  readonly host: RollHost
  readonly needs: Context.Context<RollNeeds>
  readonly state: Ref.Ref<RollState>
  readonly fibers: FiberMap.FiberMap<string>
  /** when each run was handed on after its watcher ended without answering it */
  readonly handed: Ref.Ref<ReadonlyMap<string, ReadonlyArray<number>>>
  /** runs waiting for their minute to allow a new watcher */
  readonly held: Ref.Ref<ReadonlySet<string>>
  readonly waitingUsers: Ref.Ref<ReadonlySet<string>>
  readonly waitingTimer: FiberHandle.FiberHandle
  readonly decide: NonNullable<RollHost["decide"]>
}

const knownOf = (c: RollCtx) => Effect.map(Ref.get(c.state), (s) => s.known)

const setWithout = <A>(set: ReadonlySet<A>, a: A): ReadonlySet<A> => {
  const next = new Set(set)
  next.delete(a)
  return next
}

/** The run's holder as its care file names it, noted on the roll (noteHolder). */
const note = (c: RollCtx, run: string, kind: "lock" | "handoff", keepDead: boolean) =>
  Ref.modify(c.state, (s) => {
    const [noted, next] = noteHolder(s.known, run, holderNamed(c.host.care, run, kind), keepDead)
    return [noted, { ...s, known: next }]
  })

/** The watcher's end, put on the node's queue, and what deciding it came to. */
const endDecided = (c: RollCtx, run: string, pid: number) =>
  Effect.gen(function*() {
    const answered = yield* Deferred.make<EndOutcome>()
    yield* Queue.offer(c.host.queue, NodeEvent.WatcherEnded({ run, pid, answer: (outcome) => Deferred.succeed(answered, outcome) }))
    return yield* Deferred.await(answered)
  })

/**
 * One try at deciding a gone watcher's run: the failures in a row after it, or undefined when
 * nothing is left to do (decided; or its lock held by someone else now).
 */
const decideGoneOnce = (c: RollCtx, run: string, pid: number, failures: number): Effect.Effect<number | undefined> =>
  Effect.gen(function*() {
    const outcome = yield* endDecided(c, run, pid)
    switch (outcome._tag) {
      case "Decided":
        return undefined
      case "Failed": {
        const pause = Math.min(30_000, 1000 * 2 ** failures)
        yield* c.host.log({ watcher: pid, run, did: [`failed: ${firstLine(outcome.error)}; decided again in ${pause / 1000} s`] })
        yield* Effect.sleep(pause)
        return failures + 1
      }
      case "HeldBack":
        yield* Ref.update(c.held, (s) => new Set(s).add(run))
        yield* Effect.sleep(outcome.ms).pipe(Effect.ensuring(Ref.update(c.held, (s) => setWithout(s, run))))
        return failures
      case "StillHeld":
        // a new watcher took the run meanwhile (the fiber follows it), or a write of the old one is landing
        if ((yield* note(c, run, "lock", false)) === "added" || holderOf(c.host.care, run) !== pid) return undefined
        yield* Effect.sleep(lookEveryMs)
        return failures
    }
  })

/**
 * A gone watcher's run decided, again after a pause while that fails, while its minute is full, or
 * while its lock is held (a loop, not a recursion: a fiber's frames would grow with each try).
 */
const decideGone = (c: RollCtx, run: string, pid: number): Effect.Effect<void> =>
  Effect.asVoid(Effect.iterate<number | undefined, never, never>(0, { while: (f) => f !== undefined, body: (f) => decideGoneOnce(c, run, pid, f ?? 0) }))

/** One look of the run's fiber: whether it goes on (its watcher lives, or its end was decided and someone may hold the run now). */
const followOnce = (c: RollCtx, run: string): Effect.Effect<boolean> =>
  Effect.gen(function*() {
    const watcher = yield* Ref.modify(c.state, (s): readonly [Known | undefined, RollState] => {
      const w = s.known.get(run)
      return w !== undefined ? [w, s] : [undefined, { ...s, followed: setWithout(s.followed, run) }]
    })
    if (watcher === undefined) return false
    if (processStartTime(watcher.pid) === watcher.started) {
      yield* Effect.sleep(lookEveryMs)
      return true
    }
    yield* Ref.update(c.state, (s) => ({ ...s, known: without(s.known, run, watcher.pid) }))
    yield* c.host.changed
    yield* decideGone(c, run, watcher.pid)
    return true
  })

/** The run's fiber: follows whoever the roll holds for the run, until nobody does. */
const follow = (c: RollCtx, run: string): Effect.Effect<void> =>
  Effect.asVoid(Effect.iterate(true, { while: (on) => on, body: () => followOnce(c, run) }))

/** The run's fiber started, unless it has one (a fiber that found the roll empty has ended, or is ending: replaced). */
const followed = (c: RollCtx, run: string) =>
  Effect.gen(function*() {
    const start = yield* Ref.modify(c.state, (s) => s.followed.has(run) ? [false, s] : [true, { ...s, followed: new Set(s.followed).add(run) }])
    if (start) yield* FiberMap.run(c.fibers, run, follow(c, run))
  })

const lookAtWaitingSoon = (c: RollCtx) =>
  FiberHandle.run(c.waitingTimer, Effect.sleep(waitingEveryMs).pipe(Effect.zipRight(Queue.offer(c.host.queue, NodeEvent.WaitingDue()))), { onlyIfMissing: true })

/** A name written in the care directory: a watcher noted (its fiber started), or a user with runs waiting. */
const heard = (c: RollCtx, name: string) =>
  Effect.gen(function*() {
    const file = runOfCareFile(name)
    if (file !== undefined) {
      const noted = yield* note(c, file.run, file.kind, true)
      if (noted === "added") yield* c.host.changed
      if (noted !== undefined) yield* followed(c, file.run)
      return
    }
    const user = waitingUserOf(name)
    if (user !== undefined) {
      yield* Ref.update(c.waitingUsers, (s) => new Set(s).add(user))
      yield* lookAtWaitingSoon(c)
    }
  })

const takeBack = (c: RollCtx) =>
  Effect.gen(function*() {
    const names = careNames(c.host.care)
    for (const name of names) {
      const run = runOfLockFile(name)
      if (run !== undefined) yield* note(c, run, "lock", false)
    }
    // a watcher handed a run and not yet holding its lock (a live holder of the lock stays on the roll)
    for (const name of names) {
      const file = runOfCareFile(name)
      if (file?.kind === "handoff" && !(yield* knownOf(c)).has(file.run)) yield* note(c, file.run, "handoff", false)
    }
    const taken = yield* knownOf(c)
    for (const run of taken.keys()) yield* followed(c, run)
    const users = names.map(waitingUserOf).filter((u): u is string => u !== undefined)
    if (users.length > 0) {
      yield* Ref.update(c.waitingUsers, (s) => new Set([...s, ...users]))
      yield* lookAtWaitingSoon(c)
    }
    return taken.size
  })

/** A run handed on too often this minute waits for its turn, the log saying why: how long; 0 when it may go now. */
const holdBack = (c: RollCtx, run: string, pid: number) =>
  Effect.gen(function*() {
    const now = Date.now()
    const times = ((yield* Ref.get(c.handed)).get(run) ?? []).filter((t) => now - t < minuteMs)
    yield* Ref.update(c.handed, (h) => new Map(h).set(run, times))
    const wait = rehandWaitMs(times, now)
    if (wait > 0) {
      yield* c.host.log({
        watcher: pid, run, did: [
          `its watcher ended without answering the run (its last word: ${lastLogLine(c.host.care, run)}); handed on ${times.length} times in the last minute, so decided again in ${Math.ceil(wait / 1000)} s`
        ]
      })
    }
    return wait
  })

const handedNow = (c: RollCtx, run: string) => Ref.update(c.handed, (h) => new Map(h).set(run, [...(h.get(run) ?? []), Date.now()]))

const forget = (c: RollCtx, run: string) =>
  Ref.update(c.handed, (h) => {
    const next = new Map(h)
    next.delete(run)
    return next
  })

/** A gone watcher's run decided (the work fiber's part of its WatcherEnded event). */
const decideEnd = (c: RollCtx, run: string, pid: number): Effect.Effect<EndOutcome> =>
  Effect.gen(function*() {
    const handedOnly = holderOf(c.host.care, run) !== pid
    // a watcher that wrote ended (its log says so once the server has it) left nothing to decide: its
    // run is not read again (on a clone's host a pull and the server asked twice, ahead of the next pull)
    if (!handedOnly && wroteEnded(c.host.care, run)) {
      yield* forget(c, run)
      yield* c.host.log({ watcher: pid, run, did: ["ended: its watcher wrote ended; nothing to do"] })
      yield* c.host.changed
      return EndOutcome.Decided()
    }
    const wait = yield* holdBack(c, run, pid)
    if (wait > 0) return EndOutcome.HeldBack({ ms: wait })
    const decided = yield* Effect.exit(c.decide(run, handedOnly))
    if (Exit.isFailure(decided)) return EndOutcome.Failed({ error: Cause.squash(decided.cause) })
    const outcome = decided.value
    // the lock taken meanwhile (recovery found it busy after all): looked at again, like a lock still held
    if (outcome === undefined || outcome.action === "not lost: alive") return EndOutcome.StillHeld()
    const handedAgain = outcome.action.startsWith("handed")
    yield* handedAgain ? handedNow(c, run) : forget(c, run)
    yield* logDecided(c, run, pid, handedOnly, outcome)
    return EndOutcome.Decided()
  })

/** What deciding a gone watcher's run did, logged, with the watcher that has the run now, if one has. */
const logDecided = (c: RollCtx, run: string, pid: number, handedOnly: boolean, outcome: { readonly action: string; readonly woke: string | undefined; readonly user: string | undefined }) =>
  Effect.gen(function*() {
    const handedAgain = outcome.action.startsWith("handed")
    // a watcher handed the run again (by the decision, or by the turn its process user passed on) holds it now, or soon
    const again = (yield* note(c, run, "lock", false)) === "added" || (yield* note(c, run, "handoff", false)) === "added"
      ? (yield* knownOf(c)).get(run)?.pid
      : undefined
    if (again !== undefined) yield* followed(c, run)
    yield* c.host.log({
      watcher: pid, run, did: [
        handedOnly ? `its watcher was handed the run and ended before it took the run's lock: ${outcome.action}` : outcome.action,
        ...(handedAgain && !handedOnly ? [`its watcher ended without answering it; its last word: ${lastLogLine(c.host.care, run)}`] : []),
        ...(again !== undefined ? [`the run is with the watcher ${again} now`] : []),
        ...(outcome.woke !== undefined ? [`its process user ${String(outcome.user)} was free: handed ${outcome.woke}, the first run waiting for it`] : [])
      ]
    })
    yield* c.host.changed
  })

/** Each process user free with runs waiting and no hand-off on its way: its first waiting run handed on. */
const lookAtWaiting = (c: RollCtx) =>
  Effect.gen(function*() {
    for (const user of yield* Ref.get(c.waitingUsers)) {
      const woke = yield* wakeWaitingOf(c.host.config, user, c.host.watcherProgram()).pipe(Effect.provide(c.needs), Effect.exit)
      if (Exit.isFailure(woke)) {
        yield* c.host.log({ did: [`looking at the waiting runs failed: ${firstLine(Cause.squash(woke.cause))}`] })
        break
      }
      if (woke.value !== undefined) yield* c.host.log({ did: [`${user} was free and nobody was handing its runs on: handed ${woke.value}, the first run waiting for it`] })
      else if (!Fs.existsSync(Path.join(c.host.care, processUserFileName(user, "waiting")))) yield* Ref.update(c.waitingUsers, (s) => setWithout(s, user))
    }
    if ((yield* Ref.get(c.waitingUsers)).size > 0) yield* lookAtWaitingSoon(c)
  })

/** The roll, its fibers in the scope: they end when the supervisor's scope closes (their watchers live on). */
export const makeRoll = (host: RollHost): Effect.Effect<Roll, never, Scope.Scope | RollNeeds> =>
  Effect.gen(function*() {
    const needs = yield* Effect.context<RollNeeds>()
    const c: RollCtx = {
      host, needs,
      state: yield* Ref.make<RollState>({ known: new Map(), followed: new Set() }),
      fibers: yield* FiberMap.make<string>(),
      handed: yield* Ref.make<ReadonlyMap<string, ReadonlyArray<number>>>(new Map()),
      held: yield* Ref.make<ReadonlySet<string>>(new Set()),
      waitingUsers: yield* Ref.make<ReadonlySet<string>>(new Set()),
      waitingTimer: yield* FiberHandle.make(),
      decide: host.decide ?? ((run, handedOnly) => decideEnded(host.config, run, handedOnly, host.watcherProgram()).pipe(Effect.provide(needs)))
    }
    return {
      heard: (name) => heard(c, name),
      takeBack: takeBack(c),
      decideEnd: (run, pid) => decideEnd(c, run, pid),
      lookAtWaiting: lookAtWaiting(c),
      snapshot: Effect.map(knownOf(c), (r) => Object.fromEntries([...r].map(([run, w]) => [run, w.pid]))),
      mayHandOn: (run) => Effect.map(Effect.zip(Ref.get(c.held), Ref.get(c.handed)), ([h, times]) => !h.has(run) && rehandWaitMs(times.get(run) ?? [], Date.now()) <= 0),
      handedOn: (run) => handedNow(c, run)
    } satisfies Roll
  })
