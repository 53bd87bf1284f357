// 2.13 from inside the run's care: the watcher holds the run's lock, so any watcher that held it
// before is gone. It asks Life.decide as the round does, with the record it read under the lock;
// a run whose started counts is answered lost by decide's row for a lock found free.
import * as Either from "effect/Either"
import type { Message } from "../protocol/Envelope.js"
import { decide, type Action } from "../protocol/Life.js"
import { refusal, type Refusal } from "../protocol/Refusals.js"
import { decodeRunMessage, type Run } from "../protocol/Run.js"
import type { RunRecord } from "../pickup/RunRecord.js"

export interface HeldInput {
  readonly record: Pick<RunRecord, "sender" | "started" | "stops">
  /** the run checked as this node starts it; for a started run its form is enough (`formOf`) */
  readonly check: Either.Either<{ readonly run: Run }, Refusal>
  /** the run's process user has another run in this node's care */
  readonly processUserBusy: boolean
  /** a user holding admin or setup started this manual run */
  readonly personStart: boolean
}

/**
 * The run as decoded, unchecked: what a started run's rows read of it (a session's deliveries),
 * so the watcher asks no one before answering such a run lost.
 */
export const formOf = (message: Message): Either.Either<{ readonly run: Run }, Refusal> =>
  Either.mapLeft(decodeRunMessage(message.block), (e) => refusal(2, `${e.key}: ${e.message}`))

/** What the watcher that holds the run's lock does with it (its record not ended). */
export const decideHeld = (input: HeldInput): Action =>
  decide({
    senderKnown: input.record.sender !== undefined,
    check: input.check,
    record: { started: input.record.started !== undefined, ended: false, stopped: input.record.stops.length > 0 },
    // started counts and the lock was free: its watcher went down without writing ended
    care: input.record.started !== undefined ? "gone" : "none",
    processUserBusy: input.processUserBusy,
    workspaceKept: false,
    event: input.personStart ? { _tag: "PersonStart" } : { _tag: "Arrival" }
  })
