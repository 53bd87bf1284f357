// What the supervisor decides when one of its watchers is gone, the same on the server's host and
// on a clone's (docs/architecture.md, "The supervisor"; the roll that sees it is
// src/node/supervisor/Roll.ts): the run decided again under round.lock as the node's start does
// (lost when it started, handed on when it never did), then its process user's first waiting run
// handed on; and the bound on handing a run on again.

import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { actNow } from "../operations/Operations.js"
import { CareDirectory } from "../../services/CareDirectory.js"
import { Repository } from "../../services/Repository.js"
import type { NodeConfig } from "../root/NodeConfig.js"
import { decideRun, described, wakeWaitingOf } from "./Round.js"
import { processUserOf } from "../pickup/RunCheck.js"
import { readRunRecord } from "../pickup/RunRecord.js"

/**
 * A run whose watchers end without answering it (a fault every watcher meets again) is handed to a
 * new watcher at most this often in a minute: each watcher costs a Node process and its memory, and
 * other runs of the node wait behind it. The watcher itself answers a launch that fails (refused, or
 * tried again a bounded number of times: src/watcher/LaunchFailures.ts); this bounds what is left.
 */
export const handsPerMinute = 3
const minuteMs = 60_000

/** How long a run handed at `times` (epoch ms, oldest first) waits before it is handed again. */
export const rehandWaitMs = (times: ReadonlyArray<number>, now: number, limit = handsPerMinute): number => {
  const recent = times.filter((t) => now - t < minuteMs)
  return recent.length < limit ? 0 : recent[recent.length - limit]! + minuteMs - now
}

/** The last line the run's watcher logged: why it ended, for the supervisor's log. */
export const lastLogLine = (care: string, run: string): string => {
  try {
    const lines = Fs.readFileSync(Path.join(care, `${run}.log`), "utf8").trimEnd().split("\n")
    return lines[lines.length - 1]?.replace(/^\S+ /, "") ?? "its log is empty"
  } catch {
    return "it left no log"
  }
}

/** A watcher gone: its run decided again, then its process user's next run; undefined while its lock is still held. */
export const decideEnded = (config: NodeConfig, run: string, handedOnly: boolean, watcherProgram: string) =>
  Effect.gen(function*() {
    const careDir = yield* CareDirectory
    if ((yield* careDir.probe(run)) === "alive") return undefined // its lock is still held: looked at again
    const { serverCode } = yield* (yield* Repository).codes()
    const record = yield* readRunRecord(run).pipe(Effect.option)
    const user = Option.isSome(record) && record.value.message !== undefined ? processUserOf(record.value.message) : undefined
    // handed a run and gone before it took the run's lock: its hand-off is over, so the run is not
    // written down behind its own hand-off when it is decided again
    if (handedOnly && user !== undefined) yield* careDir.clearHanded(user, run)
    const decision = yield* careDir.withRoundLock(described(run, decideRun(config, serverCode, run, { _tag: "Check" }, actNow, { watcherProgram })))
    const woke = user !== undefined ? yield* wakeWaitingOf(config, user, watcherProgram) : undefined
    return { action: decision.action, woke, user }
  })

/** What the supervisor's layers must provide to decide a watcher's end. */
export type RollNeeds = Effect.Effect.Context<ReturnType<typeof decideEnded>>

/** Whether the run's watcher logged that the run's ended counts (written by it, or found). */
export const wroteEnded = (care: string, run: string): boolean => {
  try {
    return / (wrote ended |ended already counts|the run has ended; nothing to do)/.test(Fs.readFileSync(Path.join(care, `${run}.log`), "utf8"))
  } catch {
    return false
  }
}
