// 2.12 and 2.13: a run's life as one decision. The round (the hook's, a clone node's, the
// supervisor's), --check and --dry-run ask it; the watcher asks it once it holds a run
// (src/watcher/HeldDecision.ts), and again each time a process of its run ends (decideExit: end the
// run, or keep logs and go on). The Delivery row states the seed's table whole for the round and
// the tests: a session's watcher gives deliveries from its inbox in the mode the run names
// (src/watcher/Session.ts).
import * as Either from "effect/Either"
import { endedOfProcess, type EndedContent, type ProcessEnd } from "./Outcomes.js"
import type { Refusal } from "./Refusals.js"
import type { Run } from "./Run.js"

/** Whether the run is in this node's care (ROOT/care/RUN.lock) and its watcher lives. */
export type Liveness = "none" | "alive" | "gone"

export type LifeEvent =
  /** the run arrived, or is read again (a round after a missed call) */
  | { readonly _tag: "Arrival" }
  /** start-up, or a person asked (hook --login, poll --all, --check) */
  | { readonly _tag: "Check" }
  /** a stop that counts (2.4) arrived */
  | { readonly _tag: "Stop" }
  /** an artifact passing every filter of 2.11 arrived */
  | { readonly _tag: "Delivery" }
  /** a publish that counts arrived */
  | { readonly _tag: "Publish" }
  /** a user holding admin or setup starts a manual run (ocx2 run); the caller checked it again */
  | { readonly _tag: "PersonStart" }
  /** the watcher: a process of the run ended */
  | { readonly _tag: "ProcessExit"; readonly end: ProcessEnd }

export interface LifeInput {
  /** the server has said who sent the run; until it has, the run counts for nothing (2.3) */
  readonly senderKnown: boolean
  /** the run decoded and checked (Refusals.checkRun), or the refusal that holds */
  readonly check: Either.Either<{ readonly run: Run }, Refusal>
  /** what counts in the record (2.4), in server order */
  readonly record: {
    readonly started: boolean
    readonly ended: boolean
    /** a stop from admin or setup counts */
    readonly stopped: boolean
  }
  readonly care: Liveness
  /** the process user has another run in this node's care (2.5: one at a time) */
  readonly processUserBusy: boolean
  /** the run's workspace is still on this host (for publish) */
  readonly workspaceKept: boolean
  readonly event: LifeEvent
}

export type Action =
  | { readonly _tag: "Refuse"; readonly refusal: Refusal }
  | { readonly _tag: "Start" }
  | { readonly _tag: "Wait"; readonly reason: string }
  /** ended stopped: a stop came first (not refused by refusal 1 or 2, even if 3 to 8 would hold) */
  | { readonly _tag: "EndStopped" }
  | { readonly _tag: "StopProcess" }
  | { readonly _tag: "Deliver"; readonly mode: "feed" | "start" }
  | { readonly _tag: "Lost"; readonly note: string }
  | { readonly _tag: "Publish" }
  /** the watcher writes this ended, then kept logs and publications */
  | { readonly _tag: "End"; readonly ended: EndedContent }
  /** deliveries start: one process exited, the run goes on; its kept logs are written */
  | { readonly _tag: "KeepLogs" }
  | { readonly _tag: "Nothing"; readonly reason: string }

const nothing = (reason: string): Action => ({ _tag: "Nothing", reason })

export const decide = (input: LifeInput): Action => {
  const { event, record } = input
  if (!input.senderKnown) return nothing("the server has not said who sent the run")

  if (record.ended) {
    if (event._tag !== "Publish") return nothing("the run has ended")
    return input.workspaceKept ? { _tag: "Publish" } : nothing("the run's workspace is not kept on this host")
  }

  if (!record.started) {
    const check = input.check
    if (Either.isLeft(check) && (check.left.number === 1 || check.left.number === 2)) {
      return { _tag: "Refuse", refusal: check.left }
    }
    if (record.stopped) return { _tag: "EndStopped" }
    if (Either.isLeft(check)) return { _tag: "Refuse", refusal: check.left }
    if (event._tag === "Delivery" || event._tag === "Publish" || event._tag === "ProcessExit") {
      return nothing("the run has not started")
    }
    if (input.care === "alive") return nothing("its watcher is starting it")
    if (check.right.run.process.manual && event._tag !== "PersonStart") {
      return { _tag: "Wait", reason: "a manual run waits for a user holding admin or setup to start it" }
    }
    if (input.processUserBusy) {
      return { _tag: "Wait", reason: "its process user has another run in this node's care" }
    }
    return { _tag: "Start" }
  }

  // started counts, ended does not
  if (input.care !== "alive") {
    return {
      _tag: "Lost",
      note:
        input.care === "none"
          ? "its started counts, but the run is not in this node's care"
          : "its watcher ended without writing ended"
    }
  }
  const run = Either.isRight(input.check) ? input.check.right.run : undefined
  const startsEach = run?.process.session === true && run.process.deliveries === "start"
  if (event._tag === "ProcessExit") {
    // deliveries start: a process's end (its own cpu or file_size budget included) is one
    // delivery's; only a stop or the wall ends the run
    if (startsEach && !event.end.stopped && event.end.budget !== "wall") return { _tag: "KeepLogs" }
    return { _tag: "End", ended: endedOfProcess(event.end) }
  }
  if (record.stopped || event._tag === "Stop") return { _tag: "StopProcess" }
  if (event._tag === "Delivery") {
    return run?.process.session === true
      ? { _tag: "Deliver", mode: run.process.deliveries }
      : nothing("the run is not a session")
  }
  return nothing("the run has started; its watcher has it")
}

/**
 * A process of a started run in its watcher's care ended: the row of 2.13 that holds. `stopAsked`:
 * a stop reached the watcher, so the end counts as stopped however the process ended.
 */
export const decideExit = (run: Run, end: ProcessEnd, stopAsked = false): Action =>
  decide({
    senderKnown: true,
    check: Either.right({ run }),
    record: { started: true, ended: false, stopped: stopAsked },
    care: "alive",
    processUserBusy: false,
    workspaceKept: true,
    event: { _tag: "ProcessExit", end: stopAsked ? { ...end, stopped: true } : end }
  })
