// The watcher: one process per run, holding ROOT/care/RUN.lock for its whole life (2.15,
// DECISIONS 7). Under the lock it decides the run again from the record, prepares the
// workspace, writes started (only while none counts), launches, and in a finalizer that runs
// however the launch ends writes ended (only while none counts); then kept logs, publications
// and the verdict. Everything is read back from the record before it is written, so a watcher
// that dies at any point leaves a run that recovery completes with exactly one of each.
// Every report is composed once and kept in ROOT/care/RUN.outbox before it is sent (Outbox.ts):
// while the server is down the watcher waits and sends again, holding the lock; a watcher that
// dies leaves them to whoever takes the lock next. started is sent, and its receipt read, before
// the program is launched.

import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import type * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import { CareDirectory, type RunLock } from "../../services/CareDirectory.js"
import { Receipts } from "../../services/Receipts.js"
import { Repository, WriteNotConfirmed } from "../../services/Repository.js"
import { SandboxLauncher, type LaunchResult, type LaunchSpec, type RunningProcess } from "../../services/SandboxLauncher.js"
import { decideExit } from "../protocol/Life.js"
import { endedMessage, startedMessage, startedValues } from "../protocol/Messages.js"
import { endedLost, endedOfProcess, endedStopped, type EndedContent } from "../protocol/Outcomes.js"
import { isStepPlaceholder, type Values } from "../protocol/Placeholders.js"
import { endedOfRefusal, type CheckedRun, type Refusal } from "../protocol/Refusals.js"
import { ciVerdict, formatVerdict } from "../protocol/Verdicts.js"
import { composeTag } from "../fossil/Artifact.js"
import { isFullHash } from "../fossil/Hash.js"
import { releasePaths } from "../release/ReleasePaths.js"
import { endLeftovers } from "../sandbox/Cgroups.js"
import { nodeArgs, watcherOf } from "../pickup/HandOff.js"
import { askSpare, handOffRun, spareStarting } from "../pickup/SpareClient.js"
import { passTurn } from "../care/UserTurn.js"
import { checkRecord, processUserOf } from "../pickup/RunCheck.js"
import { launchOwnPaths, type NodeConfig } from "../root/NodeConfig.js"
import { writeMessage } from "../protocol/Envelope.js"
import { readRunRecord, type RunRecord } from "../pickup/RunRecord.js"
import type { SessionFile } from "../care/SessionFiles.js"
import type { Run } from "../protocol/Run.js"
import { endingWords, keptLogText } from "./KeptLogs.js"
import { followInbox } from "./Inbox.js"
import {
  composePublicationsReply, composeReport, finishOutbox, keepPublications, keepReport, readOutbox, removeIfSettled, sendReport, sendReports,
  sendUnversioned, untilServerAnswers, type OutboxReport
} from "./Outbox.js"
import { deliveryBound, makeSessionInbox, sessionOf, startEach } from "./Session.js"
import { runPagePath } from "../follow/RunPageLink.js"
import { runStreamFile } from "../follow/StreamFile.js"
import { decideHeld, formOf } from "./HeldDecision.js"
import { collectWhenGrown } from "./Collect.js"
import { launchOrRefuse } from "./LaunchFailures.js"
import { readRunStatus, recoveredEnd } from "./RecoveredEnd.js"
import { launchSpec, refusalOfUnfit } from "./LaunchPlan.js"
import { runStatusFile } from "../sandbox/StatusFile.js"
import { diskRoom, holdsBack } from "../root/DiskRoom.js"
import { processEndOf } from "./ProcessExit.js"
import { planPublications } from "./Publications.js"
import { serveTerminal } from "./TerminalServer.js"
import { fileSizeLimitOf, performSteps } from "./Workspace.js"

/** Points a test may have the watcher SIGKILL itself at (OCX2_CRASH_AT). */
export const crashPoints = ["handed", "locked", "launched", "started", "running", "exited", "before-ended", "writing-ended"] as const
export type CrashPoint = (typeof crashPoints)[number]

export interface WatcherOptions {
  readonly config: NodeConfig
  readonly run: string
  /** a user holding admin or setup started this manual run (seed 001, `run`) */
  readonly personStart?: boolean
  readonly crashAt?: CrashPoint | undefined
  /** when the watcher's own code began, or the spare took the run (epoch ms), for the log and bench/launch */
  readonly mainAt?: number | undefined
  /** when a spare that took the run began (epoch ms) */
  readonly spareSince?: number | undefined
}

/** The repository and receipts of the node, built once the lock is held so writes can hold it too. */
export type RecordLayer = (lock: RunLock) => Layer.Layer<Repository | Receipts, unknown>

const crash = (options: WatcherOptions, point: CrashPoint) =>
  options.crashAt === point
    ? Effect.sync(() => process.kill(process.pid, "SIGKILL")).pipe(Effect.zipRight(Effect.never))
    : Effect.void

const describeCause = (cause: Cause.Cause<unknown>): string => {
  if (Cause.isInterruptedOnly(cause)) return "the watcher was ended before its process finished"
  const failure = Cause.squash(cause)
  return `the watcher failed: ${failure instanceof Error ? failure.message : String(failure)}`.split("\n")[0]!
}

/** Watches the run under its lock: "busy" when another watcher holds the lock, and nothing was done. */
export const watchRun = (options: WatcherOptions, recordLayer: RecordLayer) =>
  Effect.gen(function*() {
    const held: HeldUser = { user: undefined, known: undefined }
    return yield* Effect.scoped(
      Effect.gen(function*() {
        const care = yield* CareDirectory
        yield* crash(options, "handed")
        const lock = yield* care.lockRun(options.run).pipe(Effect.catchTag("RunBusy", () => Effect.succeed(undefined)))
        if (lock === undefined) return "busy" as const
        yield* crash(options, "locked")
        yield* runInCare(options, held).pipe(Effect.provide(recordLayer(lock)))
        return "watched" as const
      })
    ).pipe(Effect.ensuring(wakeWaiting(options, held)))
  })

/** The run's process user, and whether this watcher held its lock (one run per process user in care, 2.13). */
interface HeldUser {
  /** the process user whose lock this watcher held */
  user: string | undefined
  /** the run's process user, once the record has said it */
  known: string | undefined
}

/**
 * Once this watcher is done with its run: the first run waiting for its process user, in the
 * server's order, is handed to ONE watcher (the spare where one waits), which decides it again;
 * the others go on waiting, each woken in turn as the run before it is over (issue 13: not every
 * waiting run to a watcher of its own, most of which would only find the user busy again).
 *
 * The holder of the user's lock wakes the next once it has let the lock go. A watcher that was
 * handed a waiting run and did not take the lock (the run was stopped, refused or over meanwhile)
 * passes the turn on the same way, as does any watcher of the user's that finds the user free and
 * no hand-off on its way, so no run is left waiting behind a run that is not there. That includes a
 * watcher that wrote its own run down as waiting: while it still held the run, a holder ending
 * meanwhile left the run waiting (src/care/UserTurn.ts), so it looks once it has let the run go.
 * A watcher killed before this leaves them to the node's next start, which decides every open run.
 */
const wakeWaiting = (options: WatcherOptions, held: HeldUser) =>
  Effect.gen(function*() {
    const user = held.user ?? held.known
    if (user === undefined) return
    const care = yield* CareDirectory
    const log = (line: string) => care.appendLog(options.run, `${new Date().toISOString()} ${line}\n`)
    // its own hand-off ends here; the turn is passed on only while no run of the user's holds the
    // lock (its watcher wakes the next when it is over) and no other hand-off is on its way
    const { next, dropped } = yield* passTurn(user, options.run)
    if (dropped > 0) yield* log(`${dropped} waiting line(s) that are not a run were dropped (the record keeps every run)`)
    if (next === undefined) return
    const { pid, warm } = yield* Effect.promise(() => handToNext(options.config, next))
    yield* log(`its process user is free: handed ${next.run} to ${warm ? "the spare" : "watcher"} ${pid}`)
  }).pipe(
    // the run is written down, whatever happens here: say why the turn was not passed on, so that
    // a run left waiting can be traced (the node's next start, or its supervisor, starts it)
    Effect.catchAllCause((cause) =>
      Effect.flatMap(CareDirectory, (care) =>
        care.appendLog(options.run, `${new Date().toISOString()} could not pass its process user's turn on: ${Cause.pretty(cause).split("\n")[0]}\n`)).pipe(Effect.ignore))
  )

/**
 * The next waiting run to one watcher: the spare, waited for a little while one is still starting
 * (the run before started it; a watcher started beside it would make two processes for one run),
 * else a watcher started for it.
 */
const handToNext = async (config: NodeConfig, next: { readonly run: string; readonly personStart?: boolean }) => {
  const watcherProgram = watcherOf(config.root)
  const request = { run: next.run, personStart: next.personStart === true, program: watcherProgram, node: nodeArgs(config) }
  const deadline = Date.now() + 3000
  while (Date.now() < deadline && spareStarting(config.root)) {
    const answer = await askSpare(config.root, request, 500)
    if (answer !== undefined && "taken" in answer) return { pid: answer.taken, warm: true }
    if (answer !== undefined && "declined" in answer) break
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return handOffRun(config, next.run, { watcherProgram, ...(next.personStart === true ? { personStart: true } : {}) })
}

/**
 * Takes the process user's lock; when another run holds it, this run is written down as waiting
 * first and the lock tried again, so a holder ending in between still wakes it.
 */
const takeProcessUser = (options: WatcherOptions, held: HeldUser, user: unknown, at: readonly [number, number]) =>
  Effect.gen(function*() {
    if (typeof user !== "string") return false
    const care = yield* CareDirectory
    const took = Effect.sync(() => {
      held.user = user
    }).pipe(
      // the hand-off (this one's or another's) has arrived: the next arrival of the user's waits
      Effect.zipRight(care.clearHanded(user)),
      Effect.as(false)
    )
    if (Option.isSome(yield* care.lockUser(user))) {
      // the run written down as waiting before this watcher took it (decided again while its
      // hand-off was on its way): left there, it would be handed on once over, or by the
      // supervisor's look as the user's next run while this one was still being answered. Looked
      // at holding the turn, which a round writing a run down holds while it sees the run's lock
      yield* care.withTurn(user, care.removeWaiting(user, options.run)).pipe(Effect.ignore)
      return yield* took
    }
    // written down and tried again holding the user's turn: a holder that ends before this looks
    // finds the run waiting and its hand-off over, one that ends after leaves the lock free to take
    return yield* care.withTurn(user, Effect.gen(function*() {
      yield* care.addWaiting(user, { run: options.run, ...(options.personStart === true ? { personStart: true } : {}), at })
      if (Option.isSome(yield* care.lockUser(user))) {
        yield* care.removeWaiting(user, options.run).pipe(Effect.ignore)
        return yield* took
      }
      // this run's hand-off came to nothing: the holder passes the turn on when it is over, or this
      // watcher does, once it has let the run go (wakeWaiting)
      yield* care.clearHanded(user, options.run)
      return true
    }))
  })

const runInCare = (options: WatcherOptions, held: HeldUser) =>
  Effect.gen(function*() {
    const { config, run } = options
    const care = yield* CareDirectory
    const log = (line: string) => care.appendLog(run, `${new Date().toISOString()} ${line}\n`).pipe(Effect.ignore)

    yield* log(options.spareSince === undefined
      ? `in care: watcher ${process.pid} holds the run (process began ${Math.round(performance.timeOrigin)}, main ${options.mainAt ?? "?"})`
      : `in care: spare ${process.pid} took the run and holds it (spare since ${options.spareSince}, main ${options.mainAt ?? "?"})`)
    // what a watcher before this one left unsent goes first: the record then holds its outcome
    if (readOutbox(care.path, run).unsent.length > 0) {
      const done = yield* untilServerAnswers(finishOutbox(run), "sending what the run's last watcher left", log)
      yield* log(`sent what the run's last watcher left in its outbox: ${done.join("; ")}`)
    }
    const record = yield* untilServerAnswers(readRunRecord(run), "reading the run's record", log)

    /**
     * ended, and the reports that follow it (kept logs), composed once and kept in the outbox;
     * ended is sent only while none counts (the record read back under the lock before each try)
     */
    const writeEnded = (ended: EndedContent, texts: ReadonlyArray<string> = [], verdict?: { readonly checkin: string; readonly value: string }) =>
      Effect.gen(function*() {
        const endedReport = yield* composeReport(record, config.nodeUser, "ended", writeMessage(endedMessage(run, ended), `Ended: ${endingWords(ended)}.`))
        const following: Array<OutboxReport> = []
        for (const text of texts) following.push(yield* composeReport(record, config.nodeUser, "report", text))
        if (verdict !== undefined) following.push(composeVerdict(config.nodeUser, verdict.checkin, verdict.value))
        for (const report of [endedReport, ...following]) yield* keepReport(run, report)
        // ended and what follows it go in one write: each write holds the served file whole, and
        // people's posts wait for it (docs/architecture.md, "Writing beside the server")
        const sendAll = Effect.flatMap(readRunRecord(run), (now) => sendReports(run, [endedReport, ...following], now))
        if (options.crashAt === "writing-ended") {
          // die while the write is in flight: the fossil child holds the lock until it lands
          yield* Effect.forkDaemon(sendAll)
          yield* Effect.sleep("30 millis")
          yield* crash(options, "writing-ended")
        }
        const sent = yield* untilServerAnswers(sendAll, `sending ended (${endedReport.hash}) and ${following.length} report(s) after it`, log, { otherTries: 2 }).pipe(Effect.either)
        if (Either.isRight(sent)) {
          yield* log(sent.right[0] === "dropped"
            ? `ended already counts; ${endedReport.hash} not written`
            : `wrote ended ${ended.outcome}${ended.note !== undefined ? ` (${ended.note})` : ""}: ${endedReport.hash}`)
          for (const report of following) yield* log(`wrote ${report.kind === "verdict" ? "the verdict" : "the kept logs"}: ${report.hash}`)
        } else {
          // one of them the server will not take must not keep ended from it: each alone, ended first
          yield* log(`could not write ended with what follows it (${String(sent.left)}); each alone`)
          const sendEnded = Effect.flatMap(readRunRecord(run), (now) => sendReport(run, endedReport, now))
          const alone = yield* untilServerAnswers(sendEnded, `sending ended (${endedReport.hash})`, log, { otherTries: 3 }).pipe(Effect.either)
          if (Either.isLeft(alone)) {
            yield* log(`could not write ended: ${String(alone.left)}; it stays in ${care.path}/${run}.outbox for the node's next call`)
          } else if (alone.right === "dropped") {
            yield* log(`ended already counts; ${endedReport.hash} not written`)
          } else {
            yield* log(`wrote ended ${ended.outcome}${ended.note !== undefined ? ` (${ended.note})` : ""}: ${endedReport.hash}`)
          }
          for (const report of following) yield* sendKept(run, report, log)
        }
        yield* removeIfSettled(run).pipe(Effect.ignore)
      })

    // known before anything is decided: a run handed over as the next waiting one passes the turn on however it ends
    const processUser = record.message === undefined ? undefined : processUserOf(record.message)
    if (processUser !== undefined) held.known = processUser
    if (record.ended !== undefined) return yield* log("the run has ended; nothing to do")
    if (record.message === undefined) return yield* log("the artifact holds no run; nothing to do")
    const started = record.started !== undefined
    if (!started) yield* log("read the record")
    // a started run's row reads only its form: such a run is answered lost with no one asked
    const check = started ? formOf(record.message) : yield* checkRecord(config, { ...record, message: record.message }, {
      askServer: (question) => untilServerAnswers(question, "asking the server for the process user", log),
      keepCloneUsers: false
    })
    const startable = !started && Either.isRight(check) && record.stops.length === 0 &&
      (!check.right.run.process.manual || options.personStart === true)
    const processUserBusy = startable ? yield* takeProcessUser(options, held, processUser, [record.rcvid, record.rid]) : false
    const action = decideHeld({ record, check, processUserBusy, personStart: options.personStart === true })
    switch (action._tag) {
      case "Refuse":
        yield* log(`refused: refusal ${action.refusal.number}: ${action.refusal.note}`)
        return yield* writeEnded(endedOfRefusal(action.refusal))
      case "EndStopped":
        yield* log("a stop came first")
        return yield* writeEnded(endedStopped)
      case "Lost": {
        // its started counts and this watcher found the lock free: the watcher before it is gone. Its
        // process's exit, when bubblewrap kept it, is read before anything left of the run is ended
        yield* care.removeSession(run).pipe(Effect.orDie)
        const status = readRunStatus(care.path, run)
        const leftovers = endLeftovers(run)
        const recovered = recoveredEnd(care.path, run, record.message, record.started?.content, status, record.stops.length > 0, action.note)
        yield* log(recovered.ended.outcome === "lost"
          ? `started counts and no watcher holds the run: answering lost${leftovers > 0 ? ` (ended ${leftovers} leftover processes)` : ""}`
          : `started counts and no watcher holds the run: answering ${endingWords(recovered.ended)} (${recovered.how})`)
        return yield* writeEnded(recovered.ended, recovered.kept === undefined ? [] : [recovered.kept], recovered.verdict)
      }
      case "Start":
        break
      default:
        return yield* log(`${started ? "not answered" : "not started"}: ${"reason" in action ? action.reason : action._tag}`)
    }
    yield* log("checked: starting")
    const checked = (check as Either.Right<Refusal, CheckedRun>).right
    return yield* startChecked(options, record, checked, log, writeEnded)
  })

const startChecked = (
  options: WatcherOptions,
  record: RunRecord,
  checked: CheckedRun,
  log: (line: string) => Effect.Effect<void>,
  writeEnded: (
    ended: EndedContent,
    texts?: ReadonlyArray<string>,
    verdict?: { readonly checkin: string; readonly value: string }
  ) => Effect.Effect<void, unknown, Repository | Receipts | CareDirectory>
) =>
  Effect.gen(function*() {
    const { config, run } = options
    const care = yield* CareDirectory
    const repository = yield* Repository
    const launcher = yield* SandboxLauncher
    const refuse = (r: Refusal) =>
      log(`refused: refusal ${r.number}: ${r.note}`).pipe(Effect.zipRight(writeEnded(endedOfRefusal(r))))

    yield* waitForRoom(config.root, log)
    const sandbox = checked.run.sandbox
    const steps = yield* performSteps(checked, {
      config,
      role: repository.role,
      owner: sandbox === undefined ? undefined : { uid: sandbox.uid, gid: sandbox.gid },
      fileSizeLimit: fileSizeLimitOf(checked)
    }).pipe(Effect.either)
    if (Either.isLeft(steps)) return yield* refuse(steps.left)
    const values = steps.right
    if (values.workspace !== undefined) yield* care.writeWorkspace(run, values.workspace)

    const planned = launchSpec(checked, values, {
      runHash: run,
      releaseDir: releasePaths(config.root).current,
      ownPaths: launchOwnPaths(config)
    })
    if (Either.isLeft(planned)) return yield* refuse(planned.left)
    // what the process prints goes to ROOT/care/RUN.stream too, for those who watch it; bubblewrap
    // reports its exit to ROOT/care/RUN.status, which outlives this watcher
    const spec = { ...planned.right, streamFile: runStreamFile(care.path, run), statusFile: runStatusFile(care.path, run) }
    const unfit = yield* launcher.check(spec).pipe(Effect.flip, Effect.option)
    if (Option.isSome(unfit)) return yield* refuse(refusalOfUnfit(unfit.value))

    // started is written while the sandbox is being set up (a gated launch runs nothing until
    // released), and the program is released only once started is in the record (2.13)
    const stepValues = Object.fromEntries(Object.entries(values).filter(([name]) => isStepPlaceholder(name)))
    const writeStarted = Effect.gen(function*() {
      const report = yield* composeReport(record, config.nodeUser, "started",
        writeMessage(startedMessage(run, { values: startedValues(stepValues), limits: checked.run.limits }), startedWords(config, run)))
      yield* keepReport(run, report)
      // while the server is down the launch waits (its sandbox gated), and started is sent again
      yield* untilServerAnswers(sendReport(run, report, undefined), `sending started (${report.hash})`, log)
      return report.hash
    }).pipe(
      // from a clone, the push is confirmed by the server returning the artifact; its receipt must
      // also say the node user sent it before the program is released (2.13: "only once the server
      // has received the started")
      Effect.tap((hash) => repository.role === "clone"
        ? untilServerAnswers(confirmReceived(hash, config.nodeUser), "reading the server's receipt of started", log)
        : Effect.void),
      Effect.tap((hash) => log(`wrote started: ${hash}`)),
      Effect.tap((hash) => session === undefined ? Effect.void : placeStarted(sessionFile!, hash, log))
    )

    // a session is known to the node's rounds before its started is written, so no arrival after
    // started finds it missing (2.11); the file goes when the run is over
    const session = checked.run.process.session ? checked.run.process : undefined
    const sessionFile = session === undefined ? undefined : sessionOf(run, checked.run, record)
    if (sessionFile !== undefined) yield* care.writeSession(sessionFile).pipe(Effect.orDie)
    const afterEach = (result: LaunchResult) =>
      writeKeptLogs(config, record, checked, result, endedOfProcess(processEndOf(result.ending)), log).pipe(
        Effect.provideService(Repository, repository),
        Effect.provideService(CareDirectory, care)
      )

    const startedWritten = yield* Ref.make(false)
    const decided = yield* Ref.make<EndedContent | undefined>(undefined)
    const lastResult = yield* Ref.make<LaunchResult | undefined>(undefined)
    const launchedOrRefused = yield* Effect.acquireUseRelease(
      Effect.void,
      () => launchAndWait(options, { ...spec, gated: true }, checked.run, writeStarted, startedWritten, decided, lastResult, afterEach, log),
      (_, exit) =>
        Effect.gen(function*() {
          if (sessionFile !== undefined) yield* care.removeSession(run).pipe(Effect.orDie)
          // no started in the record: nothing ran, and the run is decided again later (recovery)
          if (!(yield* Ref.get(startedWritten))) return
          const outcome = yield* Ref.get(decided)
          const ended = outcome ?? endedLost(Exit.isFailure(exit) ? describeCause(exit.cause) : "the watcher lost its process")
          // the kept logs (2.10) are composed with ended and kept in the outbox with it, so a watcher
          // that dies while the server is down leaves both to the node's next call
          const last = yield* Ref.get(lastResult)
          const ran = outcome !== undefined && last !== undefined && session?.deliveries !== "start" && outcome.outcome !== "stopped"
          const kept = ran ? keptLogText(last, outcome, checked.run.process.keep) : undefined
          // and the ci verdict (2.16), on the check-in its steps named (a full hash), after them
          const verdict = ran && checked.run.process.verdict && values.checkin !== undefined && isFullHash(values.checkin)
            ? { checkin: values.checkin, value: formatVerdict(ciVerdict(run, outcome)) }
            : undefined
          // the files to publish (2.10) are kept as they are now, before ended: nothing is lost
          // if this watcher dies after it, and an outage of any length is waited out
          if (ran && checked.run.process.unversioned_files.length > 0) {
            const files = planPublications(checked.run, values).map((f) => f._tag === "Publishable" ? { as: f.as, content: f.content } : { as: f.as, why: f.why })
            yield* keepPublications(run, config.nodeUser, files).pipe(
              Effect.catchAll((e) => log(`could not keep the files to publish: ${String(e)}`))
            )
          }
          yield* writeEnded(ended, kept === undefined ? [] : [kept], verdict).pipe(
            Effect.catchAll((e) => log(`could not write ended: ${String(e)}`))
          )
        })
    ).pipe(Effect.catchTag("LaunchRefused", (e) => Effect.succeed(e)))
    // the launch failed before started: the run is answered refused, once (LaunchFailures.ts)
    if ("_tag" in launchedOrRefused) return yield* refuse(launchedOrRefused.refusal)
    const { ended, last } = launchedOrRefused
    if (last === undefined) return
    // a process that starts for each delivery has its kept logs however the run ended (2.13)
    if (session?.deliveries === "start") return yield* afterEach(last)
    if (ended.outcome === "stopped") return
    yield* afterProcess(options, record, checked, values, ended, log)
  })

/**
 * A run handed to this watcher while ROOT is short of room (its process user's turn passed on, a
 * run decided again) waits here, holding its lock, before anything of it is made: its workspace,
 * outbox or log would fail half way (src/root/DiskRoom.ts). The rounds hold new runs back the same
 * way; a run already started is not touched.
 */
const waitForRoom = (root: string, log: (line: string) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    const now = diskRoom(root)
    if (!holdsBack(now)) return
    yield* log(`held back before its workspace is made: ${now.words}`)
    yield* Effect.repeat(Effect.sync(() => diskRoom(root)), {
      schedule: Schedule.spaced("1 second"),
      until: (r) => !holdsBack(r)
    })
    yield* log(`room on ROOT again: ${diskRoom(root).words}`)
  })

/** started's words for people: where it started, and its run page, so that the thread links to it */
const startedWords = (config: NodeConfig, run: string): string =>
  `Started on ${config.nodeUser}. Follow it on [its run page](${runPagePath(run)}).`

/** started's place in the server's order, for the node's rounds deciding what the session is given. */
const placeStarted = (session: SessionFile, hash: string, log: (line: string) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    const [answer] = yield* (yield* Receipts).receipts([hash])
    if (answer?._tag !== "Received") return
    yield* (yield* CareDirectory).writeSession({ ...session, started: { hash, rcvid: answer.rcvid, rid: answer.rid } })
  }).pipe(Effect.catchAll((e) => log(`the session file keeps no started (the rounds read it from the record): ${String(e)}`)))

/** A kept report sent, the server's outage waited out; one it will not take stays in the outbox. */
const sendKept = (run: string, report: OutboxReport, log: (line: string) => Effect.Effect<void>) => {
  const what = report.kind === "verdict" ? "the verdict" : report.for !== undefined ? "the reply naming the published files" : "the kept logs"
  return untilServerAnswers(sendReport(run, report, undefined), `sending ${what} (${report.hash})`, log, { otherTries: 2 }).pipe(
    Effect.zipRight(log(`wrote ${what}: ${report.hash}`)),
    Effect.catchAll((e) => log(`could not write ${what}: ${String(e)}; it stays in the outbox for the node's next call`))
  )
}

/** The ci verdict (2.16): a raw tag on the check-in, as the node user, composed once like every report. */
const composeVerdict = (user: string, checkin: string, value: string): OutboxReport => {
  const artifact = composeTag({ user, date: new Date(), target: checkin, name: "ci", value })
  return { kind: "verdict", hash: artifact.hash, user, bytes: artifact.bytes.toString("base64") }
}

/** A process's kept logs (2.10): a reply where the run is, when a stream it keeps printed a byte; kept in the outbox, then sent. */
const writeKeptLogs = (
  config: NodeConfig,
  record: RunRecord,
  checked: CheckedRun,
  result: LaunchResult,
  ended: EndedContent,
  log: (line: string) => Effect.Effect<void>
) =>
  Effect.gen(function*() {
    const kept = keptLogText(result, ended, checked.run.process.keep)
    if (kept === undefined) return
    const report = yield* composeReport(record, config.nodeUser, "report", kept)
    yield* keepReport(record.hash, report)
    yield* sendKept(record.hash, report, log)
    yield* removeIfSettled(record.hash)
  }).pipe(Effect.catchAll((e) => log(`could not write the kept logs: ${String(e)}`)))

/** The server's receipt of an artifact a clone's node pushed: received, from the node user. */
const confirmReceived = (hash: string, nodeUser: string) =>
  Effect.gen(function*() {
    const receipts = yield* Receipts
    const [answer] = yield* receipts.receipts([hash])
    if (answer?._tag !== "Received") {
      return yield* new WriteNotConfirmed({ hash, reason: "the server has no receipt for it" })
    }
    if (answer.sender !== nodeUser) {
      return yield* new WriteNotConfirmed({ hash, reason: `the server received it from ${answer.sender}, not ${nodeUser}` })
    }
  })

/** The launch failed before started was written, for a cause that will not pass or did not after every try. */
class LaunchRefused extends Data.TaggedError("LaunchRefused")<{ readonly refusal: Refusal }> {}

/** What launchAndWait ends with: the run's ended, and the last process's result when one ran to its end. */
interface Launched {
  readonly ended: EndedContent
  readonly last: LaunchResult | undefined
}

const launchAndWait = <E, R>(
  options: WatcherOptions,
  spec: LaunchSpec,
  run: Run,
  writeStarted: Effect.Effect<string, E, R>,
  startedWritten: Ref.Ref<boolean>,
  decided: Ref.Ref<EndedContent | undefined>,
  lastResult: Ref.Ref<LaunchResult | undefined>,
  afterEach: (result: LaunchResult) => Effect.Effect<void>,
  log: (line: string) => Effect.Effect<void>
) =>
  Effect.scoped(
    Effect.gen(function*() {
      const care = yield* CareDirectory
      const launcher = yield* SandboxLauncher
      const session = run.process.session ? run.process : undefined
      // stops, and a session's deliveries, reach the watcher through ROOT/care/RUN.inbox
      const followed = (running: RunningProcess | undefined) =>
        Effect.gen(function*() {
          const bound = deliveryBound(options.config.root)
          if (session !== undefined && bound.problem !== undefined) yield* log(bound.problem)
          const inbox = yield* makeSessionInbox(running, session?.deliveries, bound.bytes, log)
          yield* Effect.forkScoped(followInbox(options.run, inbox.handle).pipe(Effect.provideService(CareDirectory, care)))
          return inbox
        })
      let launched: Launched
      if (session?.deliveries === "start") {
        // nothing runs until a delivery: each starts a process of its own (2.10)
        yield* writeStarted
        yield* Ref.set(startedWritten, true)
        yield* crash(options, "started")
        yield* log("started: each delivery starts a process of its own")
        const inbox = yield* followed(undefined)
        yield* crash(options, "running")
        const end = yield* startEach(run, spec, inbox, afterEach, (p) => serveTerminal(options.run, p, care.path, log), log)
        launched = { ended: end.ended, last: end.last }
      } else {
        // the sandbox is set up first, gated (nothing runs until it is released), and started written
        // after: a launch that fails is answered before any started, refused or tried again. Making
        // the groups and spawning the wrapper take a few milliseconds; the wrapper's own start goes
        // on beside the write
        const launch = yield* launchOrRefuse(launcher.start(spec), log)
        if (Either.isLeft(launch)) return yield* new LaunchRefused({ refusal: launch.left })
        const running = launch.right
        yield* crash(options, "launched")
        yield* writeStarted
        yield* Ref.set(startedWritten, true)
        yield* crash(options, "started")
        yield* running.release
        yield* serveTerminal(options.run, running, care.path, log)
        yield* log(`launched: ${spec.command.join(" ")} (pid ${running.pid})`)
        // the watcher waits beside its process from now on: what its start and its deliveries leave
        // is collected as it goes (Collect.ts)
        yield* Effect.fork(collectWhenGrown("10 seconds"))
        yield* crash(options, "running")
        yield* followed(running)
        const result: LaunchResult = yield* running.result
        yield* crash(options, "exited")
        yield* Ref.set(lastResult, result)
        const action = decideExit(run, processEndOf(result.ending))
        if (action._tag !== "End") return yield* Effect.dieMessage(`a run's process ended and the decision was ${action._tag}, not End (2.13)`)
        yield* log(`the process ended: ${endingWords(action.ended)}`)
        launched = { ended: action.ended, last: result }
      }
      yield* Ref.set(decided, launched.ended)
      yield* crash(options, "before-ended")
      return launched
    })
  )

/**
 * The unversioned files kept in the outbox, each sent when the server takes it (its outage waited
 * out), then the reply naming what each became, composed once and sent like every report.
 */
const sendPublications = (run: string, log: (line: string) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    const { unsent } = readOutbox(care.path, run)
    for (const entry of unsent) {
      if (entry.kind !== "unversioned") continue
      const how = yield* untilServerAnswers(sendUnversioned(run, entry), `publishing ${entry.name}`, log)
      yield* log(how === "dropped" ? `did not publish ${entry.name}: ${readOutbox(care.path, run).dropped.get(entry.hash) ?? ""}` : `published ${entry.name}: ${entry.content}`)
    }
    for (const entry of unsent) {
      if (entry.kind !== "publications") continue
      const reply = yield* composePublicationsReply(run, entry)
      yield* sendKept(run, reply, log)
    }
    yield* removeIfSettled(run).pipe(Effect.ignore)
  })

/** After ended, the kept logs and the verdict (2.10): the unversioned files and their reply; a verdict not composed with ended. */
const afterProcess = (
  options: WatcherOptions,
  record: RunRecord,
  checked: CheckedRun,
  values: Values,
  ended: EndedContent,
  log: (line: string) => Effect.Effect<void>
) =>
  Effect.gen(function*() {
    const { config, run } = options
    const repository = yield* Repository
    yield* sendPublications(run, log).pipe(Effect.catchAll((e) => log(`could not publish: ${String(e)}; what is left stays in the outbox for the node's next call`)))
    if (checked.run.process.verdict && values.checkin !== undefined && !isFullHash(values.checkin)) {
      const value = formatVerdict(ciVerdict(run, ended))
      const tagged = yield* repository.tag({ user: config.nodeUser, checkin: values.checkin, name: "ci", value }).pipe(Effect.either)
      yield* log(Either.isRight(tagged) ? `wrote the verdict ci = ${value}` : `could not write the verdict: ${String(tagged.left)}`)
    }
  })
