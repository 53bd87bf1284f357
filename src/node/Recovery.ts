// 2.13: a run no longer in its node's care is answered lost, its process ended first if it still
// runs. "In care" is the watcher's lock: busy means the watcher lives; free means it is gone, and
// under the lock the record decides. The check and the write happen under the lock, so two
// recoveries (or a recovery and a late watcher) never both write ended. What the watcher kept in
// its outbox and did not send (the server down, then the watcher gone) is sent first, so a run
// whose outcome exists is never answered lost over it.

import * as Effect from "effect/Effect"
import type { Act } from "../operations/Operations.js"
import { CareDirectory } from "../../services/CareDirectory.js"
import { Repository } from "../../services/Repository.js"
import { endLeftovers } from "../sandbox/Cgroups.js"
import { endingWords } from "../watcher/KeptLogs.js"
import { endedMessage } from "../protocol/Messages.js"
import type { NodeConfig } from "../root/NodeConfig.js"
import { writeMessageWhereTheRunIs, writeWhereTheRunIs } from "./Reports.js"
import { readRunStatus, recoveredEnd } from "../watcher/RecoveredEnd.js"
import { readRunRecord } from "../pickup/RunRecord.js"
import { finishOutbox, outboxRuns, readOutbox } from "../watcher/Outbox.js"
import type { RunDecision } from "./RunDecision.js"

export type Recovered =
  | "alive" // its watcher holds the run
  | "ended" // the record already has its ended
  | "lost" // started without ended and no watcher: answered lost now
  | "exit-kept" // started without ended and no watcher, its process's exit kept: answered with it now
  | "not-started" // no started counts: the caller decides it as if it had just arrived

export const recoverRun = (config: NodeConfig, run: string) =>
  Effect.scoped(
    Effect.gen(function*() {
      const care = yield* CareDirectory
      const locked = yield* care.lockRun(run).pipe(Effect.either)
      if (locked._tag === "Left") {
        if (locked.left._tag === "RunBusy") return "alive" as Recovered
        return yield* Effect.fail(locked.left)
      }
      // no watcher holds it: a session file its watcher left says nothing true any more
      yield* care.removeSession(run).pipe(Effect.orDie)
      const left = yield* finishOutbox(run)
      if (left.length > 0) yield* care.appendLog(run, `${new Date().toISOString()} recovery: sent what its watcher left in its outbox: ${left.join("; ")}\n`).pipe(Effect.ignore)
      const record = yield* readRunRecord(run)
      if (record.ended !== undefined) return "ended" as Recovered
      if (record.started === undefined || record.message === undefined) return "not-started" as Recovered
      // the exit bubblewrap kept is read before anything left of the run is ended (RecoveredEnd.ts)
      const status = readRunStatus(care.path, run)
      const leftovers = endLeftovers(run)
      const why = leftovers > 0
        ? `its watcher ended without writing ended; ${leftovers} process${leftovers === 1 ? "" : "es"} of it ended now`
        : "its watcher ended without writing ended"
      const recovered = recoveredEnd(care.path, run, record.message, record.started.content, status, record.stops.length > 0, why)
      const ended = recovered.ended
      yield* writeMessageWhereTheRunIs(record, config.nodeUser, endedMessage(run, ended), `Ended: ${endingWords(ended)}.`)
      if (recovered.kept !== undefined) yield* writeWhereTheRunIs(record, config.nodeUser, recovered.kept)
      if (recovered.verdict !== undefined) {
        yield* (yield* Repository).tag({ user: config.nodeUser, checkin: recovered.verdict.checkin, name: "ci", value: recovered.verdict.value })
      }
      if (ended.outcome === "lost") {
        yield* care.appendLog(run, `${new Date().toISOString()} recovery: answered lost: ${why}\n`).pipe(Effect.ignore)
        return "lost" as Recovered
      }
      yield* care.appendLog(run, `${new Date().toISOString()} recovery: answered ${endingWords(ended)}: ${recovered.how}\n`).pipe(Effect.ignore)
      return "exit-kept" as Recovered
    })
  )

/** what was left was sent by its watcher between the look and the lock: no decision of the node's */
const sentByItsWatcher: unique symbol = Symbol("sent by its watcher")

/**
 * What dead watchers left: each run whose lock is free and whose outbox holds reports not yet
 * sent has them sent now, under its lock (ended only while none counts, Outbox.finishOutbox).
 * A run whose watcher lives is its watcher's to send, and so is one whose watcher sent them
 * between the look and the lock (a watcher ending as the node starts): neither is a decision.
 * A run the server does not take now is tried again at the next call.
 */
export const finishLeftOutboxes = (act: Act) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    const decisions: Array<RunDecision> = []
    for (const run of outboxRuns(care.path)) {
      const unsent = readOutbox(care.path, run).unsent
      if (unsent.length === 0) continue
      const finished = yield* act(
        "outbox",
        `send the ${unsent.map((r) => r.kind === "report" ? "kept logs" : r.kind).join(", ")} left in ${care.path}/${run}.outbox, under the run's lock`,
        Effect.scoped(Effect.gen(function*() {
          const locked = yield* care.lockRun(run).pipe(Effect.either)
          if (locked._tag === "Left") {
            if (locked.left._tag === "RunBusy") return "its watcher holds the run and sends its outbox itself"
            return yield* Effect.fail(locked.left)
          }
          const done = yield* finishOutbox(run)
          // read before the lock, sent by its watcher before it let the lock go: nothing was left
          if (done.length === 0) return sentByItsWatcher
          yield* care.appendLog(run, `${new Date().toISOString()} the node sent what its watcher left in its outbox: ${done.join("; ")}\n`).pipe(Effect.ignore)
          return `sent what its watcher left in its outbox: ${done.join("; ")}`
        }))
      ).pipe(Effect.catchAll((e) => Effect.succeed(`its outbox is kept for the next call: ${String((e as { message?: unknown })?.message ?? e).split("\n")[0]}`)))
      if (finished === sentByItsWatcher) continue
      decisions.push({ run, action: finished ?? `would send what its watcher left in its outbox (${unsent.length} report${unsent.length === 1 ? "" : "s"})` })
    }
    return decisions
  })
