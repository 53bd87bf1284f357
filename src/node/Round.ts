// One round of the node on the server's host (2.13, DECISIONS 5 and 7): under round.lock, read
// what arrived after the node's own cursor, decide each run for this node and each stop with
// Life.decide, and act. Refusals, stops before a start and starts are all handed to the run's
// watcher, which decides the run again under its own lock and writes the one ended (or started)
// itself: one code path writes a run's answers, and it always holds the run's lock. A stop for
// a run in care goes to its watcher's inbox. The same decision serves the node starting
// (`ocx2 hook --node USER`), which reads every open run, and its dry run.

import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Fs from "node:fs"
import { CareDirectory } from "../../services/CareDirectory.js"
import { Hosts } from "../../services/Hosts.js"
import { Repository, startCursor, type Cursor } from "../../services/Repository.js"
import { type Act, actNow, recording } from "../operations/Operations.js"
import { readMessage } from "../protocol/Envelope.js"
import { decide, type LifeEvent, type Liveness } from "../protocol/Life.js"
import { decodeRunMessage } from "../protocol/Run.js"
import { startValues } from "../protocol/Steps.js"
import type { Arrival } from "../protocol/Subscriptions.js"
import { publicationText, publish } from "../watcher/Publications.js"
import { releasePaths } from "../release/ReleasePaths.js"
import { actedOn } from "./ActedOn.js"
import { arrivalOf, deliverArrivals } from "./Deliveries.js"
import { watcherOf } from "../pickup/HandOff.js"
import { handOffRun } from "../pickup/SpareClient.js"
import { processUserFileName } from "../care/ProcessUserFiles.js"
import { passTurn } from "../care/UserTurn.js"
import { advanceCursor, cursorFileOf, readCursor, writeCursor } from "../root/HookFiles.js"
import { repositoryName, type NodeConfig } from "../root/NodeConfig.js"
import { writeWhereTheRunIs } from "./Reports.js"
import { recoverRun } from "./Recovery.js"
import type { RunDecision } from "./RunDecision.js"
import { checkRecord, processUserOf } from "../pickup/RunCheck.js"
import { readRunRecord, type RunRecord } from "../pickup/RunRecord.js"
import { openDatabase } from "../fossil/Sqlite.js"
import { settleMs, unsettledAfter } from "./ReceiptSettled.js"
import { diskRoom, holdsBack, holdStartsBack } from "../root/DiskRoom.js"

export interface RoundResult {
  readonly from: Cursor
  readonly to: Cursor
  readonly did: ReadonlyArray<string>
  readonly decisions: ReadonlyArray<RunDecision>
  /** the first run held back for want of room on ROOT (DiskRoom.ts): the cursor stays before it */
  readonly held?: string
}

export { watcherOf }

/** 2.1's form of `clone`: a server-code, 40 lower-case hex digits */
const serverCodeForm = /^[0-9a-f]{40}$/

const runClone = (record: RunRecord): unknown =>
  (record.message?.block["run"] as { readonly clone?: unknown } | undefined)?.clone

/**
 * Decides one run for this node and acts: `event` is why it is read (a run arriving, a stop
 * that arrived, the node starting). Runs of another node user or another clone are left alone;
 * a run for this node user whose `clone` is missing or malformed is this node's to refuse (refusal 2).
 */
export const decideRun = (
  config: NodeConfig,
  serverCode: string,
  run: string,
  event: LifeEvent,
  act: Act,
  options: { readonly stop?: string; readonly publish?: string; readonly watcherProgram: string; readonly personStart?: boolean }
) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    const record = yield* readRunRecord(run)
    if (record.message === undefined) return "holds no run: nothing to do"
    // a run with no valid to is the served repository's own node's (its answerer, DECISIONS 16),
    // whatever its clone: it refuses it (refusal 2 naming to, from checkRun) and no other node could
    if (record.answerer !== config.nodeUser) {
      return record.message.to === undefined
        ? `a run with no valid to: the served repository's own node${record.answerer === undefined ? "" : ` (${record.answerer})`} answers it, not this node`
        : `a run for ${record.message.to}: not this node's`
    }
    // a clone that is missing or not a server-code names no other clone: this node answers it
    // (refusal 2 naming clone, from checkRun), once, as it answers any other malformed key
    const clone = runClone(record)
    if (record.message.to !== undefined && typeof clone === "string" && serverCodeForm.test(clone) && clone !== serverCode) return "a run for another clone: not this node's"
    if (record.ended !== undefined) {
      if (options.publish === undefined) return `ended (${record.ended.content.outcome}): nothing to do`
      if (!record.publishes.some((p) => p.hash === options.publish)) {
        return `the publish ${options.publish} does not count (its sender holds neither admin nor setup): ignored`
      }
      return yield* publishAgain(config, record, act)
    }
    if (options.publish !== undefined) return "the run has not ended: a publish is for a run that has"
    if (options.stop !== undefined && !record.stops.some((s) => s.hash === options.stop)) {
      return `the stop ${options.stop} does not count (its sender holds neither admin nor setup): ignored`
    }
    const probed = yield* care.probe(run)
    const liveness: Liveness = probed === "absent" ? "none" : probed
    const check = yield* checkRecord(config, { ...record, message: record.message })
    const action = decide({
      senderKnown: record.sender !== undefined,
      check,
      record: { started: record.started !== undefined, ended: false, stopped: record.stops.length > 0 },
      care: liveness,
      processUserBusy: false,
      workspaceKept: false,
      event
    })
    const stopHash = options.stop ?? record.stops[0]?.hash
    const toInbox = (why: string) =>
      act("stop", `append {"stop": "${stopHash}"} to ${care.path}/${run}.inbox: ${why}`,
        care.appendInbox(run, JSON.stringify({ stop: stopHash })))
    const toWatcher = (why: string) =>
      act("hand off", `hand ${run} to the node's spare watcher, or start ${options.watcherProgram} for it: ${why}`,
        Effect.promise(() => handOffRun(config, run, {
          watcherProgram: options.watcherProgram,
          ...(options.personStart === true ? { personStart: true } : {})
        })))
    switch (action._tag) {
      case "Refuse": {
        const words = `refused, refusal ${action.refusal.number}: ${action.refusal.note}`
        if (liveness === "alive") return `${words}; its watcher holds it and answers`
        yield* toWatcher("its watcher writes ended refused")
        return `${words}: handed to a watcher, which writes ended refused`
      }
      case "EndStopped":
        // the inbox too: a watcher already starting it (the lock not yet taken) reads it at launch
        yield* toInbox("a stop came before the start")
        if (liveness === "alive") return "a stop came first: told its watcher"
        yield* toWatcher("a stop came first; its watcher writes ended stopped")
        return "a stop came first: handed to a watcher, which writes ended stopped"
      case "Start": {
        if (liveness === "alive") return "its watcher holds it"
        // one run per process user in care, and one watcher at a time for it (issue 13): while a run
        // of the user's is in care, or was just handed to a watcher, or runs wait before it, this run
        // is written down as waiting (with its place in the server's order) and no watcher is started
        // for it; the run before it wakes the first waiting one when it is over
        const processUser = processUserOf(record.message)
        if (processUser !== undefined) {
          const careDir = care.path
          const handedLately = care.handedLately(processUser).pipe(Effect.map(Option.getOrUndefined))
          // looked at and written holding the user's turn, so a run passed on meanwhile by another
          // cannot start beside this one, nor this one before it
          const waits = yield* care.withTurn(processUser, Effect.gen(function*() {
            // a watcher took the run since it was looked at (its hand-off was on its way): it
            // starts it, and written down too the run would be handed on again once over
            if ((yield* care.probe(run)) === "alive") return "held" as const
            // handed a moment ago and its watcher not holding it yet: not written down behind its own hand-off
            // (the hand-off's watcher, were it gone, is the supervisor's to see, which hands the run again)
            if ((yield* handedLately) === run) return "on its way" as const
            const busy = yield* care.userBusy(processUser)
            const before = busy || (yield* handedLately) !== undefined || (yield* care.waiting(processUser)).length > 0
            if (!before) {
              yield* act("hand off", `note that ${run} is on its way to ${processUser}'s lock`, care.markHanded(processUser, run))
              return undefined
            }
            yield* act("wait", `write ${run} down in ${careDir}/${processUserFileName(processUser, "waiting")}`,
              care.addWaiting(processUser, {
                run, ...(options.personStart === true ? { personStart: true } : {}), at: [record.rcvid, record.rid]
              }))
            return busy
          }), { hold: !act.dryRun })
          if (waits === "held") return "its watcher holds it"
          if (waits === "on its way") return "its watcher is on its way: it was handed the run a moment ago"
          if (waits !== undefined) {
            // nobody left to wake it (the run before was over meanwhile, or its watcher was killed):
            // the first waiting run, in the server's order, is handed to a watcher now
            if (!(yield* care.userBusy(processUser)) && (yield* handedLately) === undefined) {
              yield* act("hand off", `hand the first run waiting for ${processUser} to the node's spare watcher, or start ${options.watcherProgram} for it`,
                handNextWaiting(config, processUser, options.watcherProgram))
            }
            return waits
              ? `waits: its process user ${processUser} has another run in this node's care; it starts once that one is over`
              : `waits: runs of its process user ${processUser} came before it; it starts once they are over`
          }
        }
        yield* toWatcher("it can start")
        return "handed to a watcher, which starts it"
      }
      case "StopProcess":
        yield* toInbox("a stop counts and its watcher is running it")
        return "a stop counts: told its watcher to end its process"
      case "Lost": {
        const recovered = yield* act("lost", `answer ${run} lost under its lock (${action.note})`, recoverRun(config, run))
        return recovered === undefined ? `would answer lost: ${action.note}` : recovered === "lost" ? `answered lost: ${action.note}` : recovered === "exit-kept" ? "answered with its process's exit, which bubblewrap kept" : `not lost: ${recovered}`
      }
      case "Wait":
        return `waits: ${action.reason}`
      case "Nothing":
        return action.reason
      default:
        return `nothing: ${action._tag}`
    }
  })

/** The first run waiting for the user (in the server's order) handed to a watcher, when the turn is free; the run, or undefined. */
const handNextWaiting = (config: NodeConfig, user: string, watcherProgram: string) =>
  Effect.gen(function*() {
    const { next } = yield* passTurn(user)
    if (next === undefined) return undefined
    yield* Effect.promise(() => handOffRun(config, next.run, { watcherProgram, ...(next.personStart === true ? { personStart: true } : {}) }))
    return next.run
  })

/**
 * A process user whose holder ended without waking its waiting runs (its watcher killed): when the
 * user is free and no hand-off is on its way, the first waiting run is handed to a watcher, as the
 * holder would have done. The run handed, or undefined.
 */
export const wakeWaitingOf = (config: NodeConfig, user: string, watcherProgram: string) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    if ((yield* care.waiting(user)).length === 0) return undefined
    return yield* handNextWaiting(config, user, watcherProgram)
  })

/** A message a node acts on: a run for its node user, or a stop or publish naming a run. */
export interface NodeMessage {
  readonly hash: string
  readonly rcvid: number
  readonly rid: number
  readonly kind: "run" | "stop" | "publish"
  /** the run it is about: the run itself, or the run a stop or publish names */
  readonly run: string
}

/**
 * 2.13: a publish from a sender 2.3 allows, once a run has ended and its workspace is kept,
 * publishes again from the workspace what the run names, without launching anything; under the
 * run's lock, so a watcher still finishing the run is not raced.
 */
const publishAgain = (config: NodeConfig, record: RunRecord, act: Act) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    const kept = Option.getOrUndefined(yield* care.readWorkspace(record.hash))
    if (kept === undefined || !Fs.existsSync(kept)) return "a publish, but the run's workspace is not kept on this host: nothing published"
    const decoded = decodeRunMessage(record.message!.block)
    if (Either.isLeft(decoded)) return `a publish, but the run does not decode (${decoded.left.key}): nothing published`
    const run = decoded.right.run
    if (run.process.unversioned_files.length === 0) return "a publish, but the run names no unversioned files: nothing published"
    // the values its steps set, as its started states them (the password never was), and the workspace kept
    const stated = { ...(record.started?.content?.values ?? {}) }
    delete stated["password"]
    const values = {
      ...startValues({
        root: config.root,
        releaseDir: releasePaths(config.root).current,
        runHash: record.hash,
        processUser: run.process.user,
        repositoryName: repositoryName(config.repository),
        nodeUser: config.nodeUser
      }),
      ...stated,
      workspace: kept
    }
    const published = yield* act(
      "publish",
      `${run.process.unversioned_files.map((f) => f.as).join(", ")} of ${record.hash} again from ${kept}, and a reply naming them`,
      Effect.scoped(Effect.gen(function*() {
        yield* care.lockRun(record.hash)
        const out = yield* publish(run, values, config.nodeUser)
        yield* writeWhereTheRunIs(record, config.nodeUser, publicationText(out))
        return out
      }))
    )
    return published === undefined
      ? "a publish: would publish its files again"
      : `published again: ${published.map((p) => (p._tag === "Published" ? `${p.as} (${p.hash})` : `${p.as} not: ${p.why}`)).join("; ")}`
  })

/**
 * Runs addressed to the node user, and every stop and publish, received after `from`, in the
 * repository's order (the server's on its own host; a clone's node orders them by receipt);
 * with `arrivals`, also every post, ticket change and check-in a session might be given (2.11).
 */
export const nodeMessagesAfter = (nodeUser: string, from: Cursor, options?: { readonly arrivals: boolean }) =>
  Effect.gen(function*() {
    const repository = yield* Repository
    const messages: Array<NodeMessage> = []
    const arrivals: Array<Arrival> = []
    let cursor = from
    let unread: Cursor | undefined
    for (;;) {
      const batch = yield* repository.readAfter(cursor, 1000)
      unread = batch.unread
      for (const item of batch.items) {
        if (options?.arrivals === true) {
          const arrival = arrivalOf(item)
          if (arrival !== undefined) arrivals.push(arrival)
        }
        if (item._tag !== "Post" && item._tag !== "TicketChange") continue
        const acted = actedOn(readMessage(item.text), item.hash, nodeUser, repository.role === "served")
        if (acted !== undefined) messages.push({ hash: item.hash, rcvid: item.rcvid, rid: item.rid, ...acted })
      }
      cursor = batch.cursor
      if (!batch.more) break
    }
    // unread: a post the read stopped before, its page not done writing it (Read.ts); cursor is before it
    return { messages, arrivals, cursor, unread }
  })

/** Decides the run a message is about, for the event the message is. */
export const decideMessage = (
  config: NodeConfig,
  serverCode: string,
  message: NodeMessage,
  act: Act,
  options: { readonly watcherProgram: string }
) =>
  message.kind === "run"
    ? decideRun(config, serverCode, message.run, { _tag: "Arrival" }, act, options)
    : message.kind === "stop"
      ? decideRun(config, serverCode, message.run, { _tag: "Stop" }, act, { ...options, stop: message.hash })
      : decideRun(config, serverCode, message.run, { _tag: "Publish" }, act, { ...options, publish: message.hash })

export const described = <E, R>(run: string, effect: Effect.Effect<string, E, R>) =>
  effect.pipe(
    Effect.catchAll((e) => Effect.succeed(`failed: ${String((e as { message?: unknown })?.message ?? e).split("\n")[0]}`)),
    Effect.map((action): RunDecision => ({ run, action }))
  )

/**
 * Whether every post and ticket change after `from` has its row (ReceiptSettled.ts), or was
 * received settleMs ago: read before, it would be passed by and the cursor moved past it for good.
 * A repository that cannot be read here is read by the round, which says what is wrong.
 */
const settled = (repository: string, from: Cursor, everyPost: boolean) =>
  Effect.try(() => {
    const db = openDatabase(repository, { readonly: true, fileMustExist: true })
    try {
      return unsettledAfter(db, from, Date.now(), { everyPost })
    } finally {
      db.close()
    }
  }).pipe(
    Effect.orElseSucceed(() => undefined),
    Effect.map((unsettled) => unsettled === undefined || unsettled.count === 0 || unsettled.youngestMs >= settleMs)
  )

/** Waits until `settled`, looking again every 15 ms. */
const untilSettled = (repository: string, from: Cursor, everyPost: boolean): Effect.Effect<void> =>
  Effect.flatMap(settled(repository, from, everyPost), (done) =>
    done ? Effect.void : Effect.zipRight(Effect.sleep("15 millis"), untilSettled(repository, from, everyPost)))

/**
 * The hook's round: what arrived after the cursor, decided once each; the cursor moved past it.
 * It reads again until nothing more arrived: a hook that gave up waiting for round.lock meanwhile
 * (a slow round) leaves its arrivals to this one, and no later receipt may come to take them.
 */
export const hookRound = (
  config: NodeConfig,
  options: {
    readonly watcherProgram: string
    /** false where a supervisor runs the round: it looks at the waiting runs itself, and sees each watcher end */
    readonly passForgottenTurns?: boolean
  }
) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    const repository = yield* Repository
    return yield* care.withRoundLock(Effect.gen(function*() {
      const cursorFile = cursorFileOf(config.root, config.repository, config.nodeUser)
      const from = readCursor(cursorFile)
      if (from === undefined) {
        return { from: startCursor, to: startCursor, did: ["the node has not started: no cursor"], decisions: [] } satisfies RoundResult
      }
      const { serverCode } = yield* repository.codes()
      const decisions: Array<RunDecision> = []
      const delivered: Array<string> = []
      // ROOT's room is looked at after each read, not once before the passes: a run posted after the
      // setting was raised (or the disk filled) is never handed on a look taken before it
      let room = diskRoom(config.root)
      let held: string | undefined
      let at = from
      const waitsUntil = Date.now() + 2 * settleMs
      for (let pass = 0; pass < 20; pass++) {
        const sessions = yield* care.anySession
        yield* untilSettled(config.repository, at, sessions)
        const read = yield* nodeMessagesAfter(config.nodeUser, at, { arrivals: sessions })
        room = diskRoom(config.root)
        const found = holdStartsBack(room, read)
        held ??= found.held
        const moved = found.cursor.rcvid !== at.rcvid || found.cursor.rid !== at.rid
        // a page that wrote a post's artifact after the wait had it in the read's snapshot without
        // its row: the read stopped before it (Read.ts), and it is read again once it has its row.
        // A second look after the read cannot tell: the row may have landed in between. Read
        // holds a post back settleMs at most; the round waits a little longer, then leaves it,
        // still after the cursor, to the next round
        if (read.unread !== undefined && found.held === undefined && !moved) {
          if (Date.now() > waitsUntil) break
          pass--
          yield* Effect.sleep("15 millis")
          continue
        }
        if (pass > 0 && !moved) break
        // runs first, then what names them, so a stop or publish arriving with its run finds it decided
        for (const kind of ["run", "stop", "publish"] as const) {
          for (const message of found.messages.filter((m) => m.kind === kind)) {
            decisions.push(yield* described(message.run, decideMessage(config, serverCode, message, actNow, options)))
          }
        }
        // what a session is given is given as the node acts on its arrival (2.11): here, or never
        delivered.push(...yield* deliverArrivals(config, found.arrivals).pipe(
          Effect.catchAll((e) => Effect.succeed([`deliveries failed: ${String((e as { message?: unknown })?.message ?? e).split("\n")[0]}`]))
        ))
        advanceCursor(cursorFile, found.cursor)
        at = found.cursor
      }
      // a process user's turn that nobody passed on (its holder's watcher killed, or one handed
      // the turn that never took it) is passed on here, so the node's next round (a receipt that
      // may hold a message, a timer's call) starts what waits behind nobody; with a holder alive,
      // or a hand-off on its way, nothing
      const woken: Array<string> = []
      for (const { user } of options.passForgottenTurns === false || holdsBack(room) ? [] : yield* care.waitingUsers) {
        const run = yield* wakeWaitingOf(config, user, options.watcherProgram).pipe(Effect.catchAll(() => Effect.succeed(undefined)))
        if (run !== undefined) woken.push(`${run}: its process user ${user} was free and nobody had passed the turn on: handed to a watcher`)
      }
      const heldWords = held === undefined ? [] : [`${held}: held back, with every run after it: ${room.words}`]
      const did = decisions.length === 0 && delivered.length === 0 && woken.length === 0 && held === undefined
        ? ["no run or stop for this node arrived"]
        : [...decisions.map((d) => `${d.run}: ${d.action}`), ...delivered, ...woken, ...heldWords]
      return { from, to: at, did, decisions, ...(held !== undefined ? { held } : {}) } satisfies RoundResult
    }))
  })

/**
 * The node starting (2.13, "When runs are read"): every open run for the node user on this
 * clone decided again (lost when its watcher is gone, a missed stop sent on, one never started
 * handed on), then the cursor set past everything read. Safe to run again: each answer is
 * written under the run's lock, only while none counts.
 */
export const startNode = (config: NodeConfig, act: Act, options: { readonly watcherProgram: string; readonly dryRun: boolean }) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    const repository = yield* Repository
    return yield* care.withRoundLock(Effect.gen(function*() {
      const { serverCode } = yield* repository.codes()
      // every open run is decided again: no hand-off noted before counts as on its way
      const notes = yield* care.handedNotes
      if (notes.length > 0) {
        yield* act("hand off", `forget ${notes.join(", ")}: every open run is decided again`, care.clearAllHanded)
      }
      const found = yield* nodeMessagesAfter(config.nodeUser, startCursor)
      const decisions: Array<RunDecision> = []
      // looked at after the read: what was read was posted before it
      const room = diskRoom(config.root)
      let held: NodeMessage | undefined
      for (const message of found.messages.filter((m) => m.kind === "run")) {
        const run = message.run
        const record = yield* readRunRecord(run).pipe(Effect.either)
        if (Either.isRight(record) && record.right.ended !== undefined) continue // over: nothing to check
        if (holdsBack(room) && Either.isRight(record) && record.right.started === undefined) {
          held ??= message
          decisions.push({ run, action: `held back: ${room.words}` })
          continue
        }
        decisions.push(yield* described(run, decideRun(config, serverCode, run, { _tag: "Check" }, act, options)))
      }
      // a run held back is read again by the rounds that follow, from just before it
      const cursor = held === undefined ? found.cursor : holdStartsBack(room, { ...found, messages: [held], arrivals: [] }).cursor
      const cursorFile = cursorFileOf(config.root, config.repository, config.nodeUser)
      yield* act("cursor", `${cursorFile} = ${JSON.stringify(cursor)}: the hook decides what arrives after it`,
        Effect.sync(() => writeCursor(cursorFile, cursor)))
      return { cursor, decisions, cursorFile }
    }))
  })

/** The hook's slow path on the server's host (bin/ocx2-hook-round.ts runs it for src/node/HookFast.ts). */
export const servedHookRound = (config: NodeConfig) =>
  Effect.flatMap(Hosts, (hosts) =>
    hookRound(config, { watcherProgram: watcherOf(config.root) }).pipe(Effect.provide(hosts.served(config))))

/**
 * A person holding admin or setup starts a manual run (seed 001, `run`): decided again as the
 * node decides it (refusals first), and handed to a watcher told that a person started it.
 */
export const personStart = (config: NodeConfig, run: string, act: Act) =>
  Effect.gen(function*() {
    const repository = yield* Repository
    const { serverCode } = yield* repository.codes()
    return yield* decideRun(config, serverCode, run, { _tag: "PersonStart" }, act, {
      watcherProgram: watcherOf(config.root),
      personStart: true
    })
  })

/** `run` on the server's host, from a tool in another bundle (bin/ocx2-hook-round.ts). */
export const servedPersonStart = (config: NodeConfig, run: string, dryRun: boolean) =>
  Effect.flatMap(Hosts, (hosts) =>
    personStart(config, run, dryRun ? recording(true) : actNow).pipe(Effect.provide(hosts.served(config))))
