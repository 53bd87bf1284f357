// The work of the server's supervisor (Supervisor.ts), one piece at a time on its one fiber: a
// batch of the node's events taken from its queue and done in order: the care directory's names
// noted on the roll, the watchers' ends decided, a round, the second look at what a round read, the
// runs waiting for their process user. Each piece is uninterruptible: a SIGTERM closing the
// supervisor's scope lets it finish, since a round cut short would leave its runs to the next start.

import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as FiberHandle from "effect/FiberHandle"
import * as Queue from "effect/Queue"
import * as Ref from "effect/Ref"
import { actNow } from "../../operations/Operations.js"
import { CareDirectory } from "../../../services/CareDirectory.js"
import type { NodeServices } from "../../../services/Hosts.js"
import { Repository } from "../../../services/Repository.js"
import { anySession } from "../../care/SessionFiles.js"
import { openDatabase } from "../../fossil/Sqlite.js"
import { diskRoom, holdsBack, holdStartsBack } from "../../root/DiskRoom.js"
import { advanceCursor, type Cursor, cursorFileOf, readCursor } from "../../root/HookFiles.js"
import type { NodeConfig } from "../../root/NodeConfig.js"
import { readArrivals, workWaits } from "../HookFast.js"
import { settleMs, unsettledAfter } from "../ReceiptSettled.js"
import { firstAgainMs, lookEveryMs as roundAgainEveryMs, mostAgainMs } from "../RoundAgain.js"
import { decideMessage, described, hookRound, nodeMessagesAfter, watcherOf } from "../Round.js"
import { firstLine } from "../SupervisorLog.js"
import { NodeEvent } from "./NodeEvents.js"
import type { NodeShell } from "./NodeShell.js"
import type { Roll } from "./Roll.js"

/** How often a post received is looked at while it is waited for to be crosslinked (for up to settleMs). */
const settleEveryMs = 15
/** How long after a round what it read is read once more. */
const lookAgainMs = 1500

/** What the server's supervisor's work keeps across events: Refs and its timers' fibers. */
export interface Served {
  readonly config: NodeConfig
  readonly shell: NodeShell
  readonly roll: Roll
  /** where the second look reads from (the earliest cursor of the rounds since the last look) */
  readonly againFrom: Ref.Ref<Cursor | undefined>
  readonly againTimer: FiberHandle.FiberHandle
  readonly settleTimer: FiberHandle.FiberHandle
  /** a round tried again while work waits (RoundAgain.ts): its timer, and how many tries so far */
  readonly retryTimer: FiberHandle.FiberHandle
  readonly tries: Ref.Ref<number>
}

const after = (ms: number, event: NodeEvent) => (s: Served) => Effect.sleep(ms).pipe(Effect.zipRight(Queue.offer(s.shell.queue, event)))

/** What arrived after `from`: the hook's cheap question (src/node/HookFast.ts), and the posts still being crosslinked. */
const readWhatArrived = (config: NodeConfig, from: Cursor) =>
  Effect.try(() => {
    const db = openDatabase(config.repository, { readonly: true, fileMustExist: true })
    try {
      const arrivals = readArrivals(db, from, config.nodeUser)
      const unsettled = arrivals.count === 0 ? { count: 0, youngestMs: Infinity } : unsettledAfter(db, from, Date.now(), { everyPost: anySession(config.root) })
      return { arrivals, unsettled }
    } finally {
      db.close()
    }
  })

/**
 * Whether what arrived after `from` holds no run for the node, stop or publish, and nothing a session
 * is given: then the cursor is moved past what was read, as the round would have moved it. Read
 * without round.lock, as the hook's cheap question is: only what was read is passed.
 */
const nothingToDecide = (config: NodeConfig, from: Cursor, cursorFile: string) =>
  Effect.gen(function*() {
    const found = yield* nodeMessagesAfter(config.nodeUser, from, { arrivals: anySession(config.root) })
    if (found.messages.length > 0 || found.arrivals.length > 0) return false
    advanceCursor(cursorFile, found.cursor)
    return true
  })

/** The node's round over what arrived, when something may hold a message for it. */
const round = (s: Served): Effect.Effect<void, unknown, NodeServices> =>
  Effect.gen(function*() {
    const { config } = s
    const cursorFile = cursorFileOf(config.root, config.repository, config.nodeUser)
    const from = readCursor(cursorFile)
    if (from === undefined) return yield* s.shell.log({ did: [`no cursor ${cursorFile}: the node has not started`] })
    const { arrivals, unsettled } = yield* readWhatArrived(config, from)
    if (unsettled.count > 0 && unsettled.youngestMs < settleMs) {
      // a post whose crosslink is still being written: read it once it is (ReceiptSettled.ts)
      return yield* FiberHandle.run(s.settleTimer, after(settleEveryMs, NodeEvent.RoundDue())(s), { onlyIfMissing: true })
    }
    if (arrivals.count > 0) yield* lookAgainFrom(s, from)
    if (arrivals.maybe === 0 && (arrivals.count === 0 || !anySession(config.root))) {
      if (arrivals.newest !== undefined) advanceCursor(cursorFile, arrivals.newest)
      return
    }
    // what may hold a message is read before round.lock is taken (a delta, a ticket change, a post
    // a session is given): what holds nothing the round decides or delivers moves the cursor past
    // it as the cheap question moves it, with no lock
    if (yield* nothingToDecide(config, from, cursorFile)) return
    yield* s.shell.counted
    const result = yield* hookRound(config, { watcherProgram: watcherOf(config.root), passForgottenTurns: false })
    if (result.decisions.some((d) => d.action.startsWith("handed"))) yield* s.shell.spareSoon(1000)
    if (result.decisions.length > 0 || !(result.did.length === 1 && result.did[0] === "no run or stop for this node arrived")) {
      yield* s.shell.lastRound(result.did)
      yield* s.shell.log({ round: { from: result.from, to: result.to }, did: result.did })
      yield* s.shell.writeInfo
    }
  })

// What arrived is read once more a while after each round, from where that round began: a page of
// Fossil's that writes a post in several statements may be caught half-way by a round in a way the
// settling above cannot see, and a run passed by then would otherwise wait for the node's next start.
// Deciding a run again is safe (its lock lets one watcher have it); only what does something is logged.
export const lookAgainFrom = (s: Served, from: Cursor) =>
  Effect.gen(function*() {
    yield* Ref.update(s.againFrom, (was) =>
      was === undefined || from.rcvid < was.rcvid || (from.rcvid === was.rcvid && from.rid < was.rid) ? from : was)
    yield* FiberHandle.run(s.againTimer, after(lookAgainMs, NodeEvent.LookAgain())(s), { onlyIfMissing: true })
  })

const lookAgain = (s: Served): Effect.Effect<void, unknown, NodeServices> =>
  Effect.gen(function*() {
    const { config } = s
    const from = yield* Ref.getAndSet(s.againFrom, undefined)
    if (from === undefined) return
    // nothing to decide again (the node's own replies): no round.lock taken for it
    if ((yield* nodeMessagesAfter(config.nodeUser, from)).messages.every((m) => m.kind === "publish")) return
    const careDir = yield* CareDirectory
    const { serverCode } = yield* (yield* Repository).codes()
    const decisions = yield* careDir.withRoundLock(Effect.gen(function*() {
      // a run the round held back for want of room stays held back here too
      // room looked at after the read: a run posted after the setting was raised is held too
      const read = yield* nodeMessagesAfter(config.nodeUser, from)
      const found = holdStartsBack(diskRoom(config.root), read)
      const out: Array<{ run: string; action: string }> = []
      for (const message of found.messages) {
        // a run handed on too often this minute waits for the roll's turn
        if (message.kind === "publish" || (message.kind === "run" && !(yield* s.roll.mayHandOn(message.run)))) continue
        out.push(yield* described(message.run, decideMessage(config, serverCode, message, actNow, { watcherProgram: watcherOf(config.root) })))
      }
      return out
    }))
    for (const d of decisions) if (d.action.startsWith("handed")) yield* s.roll.handedOn(d.run)
    const did = decisions.filter((d) => /^(handed|refused|a stop came first|answered)/.test(d.action)).map((d) => `${d.run}: ${d.action}`)
    if (did.length > 0) yield* s.shell.log({ lookedAgain: from, did })
  })

/** A question of RoundAgain's plan: one that throws (the repository locked a moment) is given `onError`'s answer. */
const asked = (question: () => boolean, onError: boolean): boolean => {
  try {
    return question()
  } catch {
    return onError
  }
}

/**
 * After every round, however it went (RoundAgain.ts, issue 37): while a message the round acts on
 * is still after the cursor, the round is tried again, at once when ROOT has room again (looked at
 * each second, no round run while it is short), else after 1 s, 2 s, 4 s ... up to 30 s.
 */
const roundDone = (s: Served) =>
  Effect.gen(function*() {
    const { config } = s
    const waits = () => workWaits(config.root, config.repository, config.nodeUser)
    if (!asked(waits, true)) {
      yield* Ref.set(s.tries, 0)
      return yield* FiberHandle.clear(s.retryTimer)
    }
    const tries = yield* Ref.getAndUpdate(s.tries, (n) => n + 1)
    const dueAt = Date.now() + Math.min(firstAgainMs * 2 ** tries, mostAgainMs)
    // each second: undefined once the round is asked for or nothing waits, else whether ROOT was short
    const look = (wasShort: boolean): Effect.Effect<boolean | undefined> =>
      Effect.gen(function*() {
        yield* Effect.sleep(roundAgainEveryMs)
        if (!asked(waits, true)) {
          yield* Ref.set(s.tries, 0)
          return undefined
        }
        if (asked(() => holdsBack(diskRoom(config.root)), false)) return true
        // room came back: the runs held back are started now, not after the backoff
        if (wasShort || Date.now() >= dueAt) {
          yield* Queue.offer(s.shell.queue, NodeEvent.RoundDue())
          return undefined
        }
        return wasShort
      })
    yield* FiberHandle.run(s.retryTimer, Effect.iterate<boolean | undefined, never, never>(false, { while: (w) => w !== undefined, body: (w) => look(w ?? false) }))
  })

/** One batch of the node's events, done in order; a failure is said and the next batch comes. */
export const work = (s: Served, batch: Chunk.Chunk<NodeEvent>): Effect.Effect<void, never, NodeServices> =>
  Effect.gen(function*() {
    const events = Chunk.toReadonlyArray(batch)
    for (const e of events) if (e._tag === "CareChanged") yield* s.roll.heard(e.name)
    for (const e of events) {
      if (e._tag === "WatcherEnded") yield* Effect.flatMap(s.roll.decideEnd(e.run, e.pid), e.answer)
    }
    if (events.some((e) => e._tag === "RoundDue")) {
      yield* round(s).pipe(Effect.catchAllCause((c) => s.shell.log({ did: [`the round failed: ${firstLine(Cause.squash(c))}`] })))
      yield* roundDone(s)
    }
    if (events.some((e) => e._tag === "LookAgain")) {
      yield* lookAgain(s).pipe(Effect.catchAllCause((c) => s.shell.log({ did: [`reading again what arrived failed: ${firstLine(Cause.squash(c))}`] })))
    }
    if (events.some((e) => e._tag === "WaitingDue")) yield* s.roll.lookAtWaiting
  }).pipe(Effect.uninterruptible)
