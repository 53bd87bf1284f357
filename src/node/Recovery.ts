import * as Effect from "effect/Effect"
import { CareDirectory } from "../../services/CareDirectory.js"
import { endedLost } from "../protocol/Outcomes.js"
import { endLeftovers } from "../sandbox/cgroups.js"
import { endingWords } from "../watcher/KeptLogs.js"
import { endedMessage } from "../protocol/Messages.js"
import type { NodeConfig } from "./NodeConfig.js"
import { writeMessageWhereTheRunIs } from "./Reports.js"
import { removeSessionFile } from "./SessionFiles.js"
import { readRunRecord } from "./RunRecord.js"

// 2.13: a run no longer in its node's care is answered lost, its process ended first if it still
// runs. "In care" is the watcher's lock: busy means the watcher lives; free means it is gone, and
// under the lock the record decides. The check and the write happen under the lock, so two
// recoveries (or a recovery and a late watcher) never both write ended.

export type Recovered =
  | "alive" // its watcher holds the run
  | "ended" // the record already has its ended
  | "lost" // started without ended and no watcher: answered lost now
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
      removeSessionFile(config.root, run)
      const record = yield* readRunRecord(run)
      if (record.ended !== undefined) return "ended" as Recovered
      if (record.started === undefined) return "not-started" as Recovered
      const leftovers = endLeftovers(run)
      const why = leftovers > 0
        ? `its watcher ended without writing ended; ${leftovers} process${leftovers === 1 ? "" : "es"} of it ended now`
        : "its watcher ended without writing ended"
      const ended = endedLost(why)
      yield* writeMessageWhereTheRunIs(record, config.nodeUser, endedMessage(run, ended), `Ended: ${endingWords(ended)}.`)
      yield* care.appendLog(run, `${new Date().toISOString()} recovery: answered lost: ${why}\n`).pipe(Effect.ignore)
      return "lost" as Recovered
    })
  )
