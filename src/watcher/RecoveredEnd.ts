// 2.13: a started run whose watcher is gone is answered `lost` only when its process's end truly
// cannot be known. Bubblewrap reported the exit to the run's status file (src/sandbox/StatusFile.ts)
// before it ended, and the launcher added why it ended the process when it did; the stream file
// holds the ends of what the process printed. So a watcher SIGKILLed between its process's exit
// and its `ended` leaves the real outcome, with its kept logs, to whoever takes the run's lock next
// (the node's recovery, its supervisor, or a watcher started again for the run).

import * as Either from "effect/Either"
import type { LaunchResult } from "../../services/SandboxLauncher.js"
import type { Message } from "../protocol/Envelope.js"
import { endedLost, endedOfProcess, type EndedContent } from "../protocol/Outcomes.js"
import type { Run } from "../protocol/Run.js"
import { parseSize } from "../protocol/Sizes.js"
import { decideEnding } from "../sandbox/Ending.js"
import { readStatus, runStatusFile, type LaunchStatus } from "../sandbox/StatusFile.js"
import { readStreamFrom, runStreamFile } from "../follow/StreamFile.js"
import { isFullHash } from "../fossil/Hash.js"
import type { StartedContent } from "../protocol/Messages.js"
import { ciVerdict, formatVerdict } from "../protocol/Verdicts.js"
import { formOf } from "./HeldDecision.js"
import { keptLogText } from "./KeptLogs.js"
import { limitsOf } from "./LaunchPlan.js"
import { processEndOf } from "./ProcessExit.js"

export interface RecoveredEnd {
  readonly ended: EndedContent
  /** the kept logs' text (2.10), when the outcome is the process's and a kept stream printed a byte */
  readonly kept: string | undefined
  /** the ci verdict (2.16) on the check-in its steps named, as its watcher would have written it with ended */
  readonly verdict: { readonly checkin: string; readonly value: string } | undefined
  /** for the run's log: where the outcome came from */
  readonly how: string
}

/** The run's status, read before anything of the run is ended: an end recovery causes is not the process's. */
export const readRunStatus = (careDir: string, run: string): LaunchStatus | undefined => readStatus(runStatusFile(careDir, run))

/** The end of each stream, `keep` bytes at most, from what the run's stream file still holds. */
const tailsOf = (careDir: string, run: string, keep: { readonly stdout: number; readonly stderr: number }) => {
  const texts = { stdout: [] as Array<Buffer>, stderr: [] as Array<Buffer> }
  for (const chunk of readStreamFrom(runStreamFile(careDir, run), 0).chunks) texts[chunk.stream].push(Buffer.from(chunk.text, "utf8"))
  const tail = (name: "stdout" | "stderr") => {
    const all = Buffer.concat(texts[name])
    return { tail: new Uint8Array(all.subarray(Math.max(0, all.length - keep[name]))), totalBytes: all.length }
  }
  return { stdout: tail("stdout"), stderr: tail("stderr") }
}

const keepBytes = (text: string): number => Either.getOrElse(parseSize(text), () => 65536)

/** SIGPIPE's exit: the process wrote to its output after the watcher that read it had died */
const brokenPipeExit = 128 + 13

/** The run's ended from its status, or undefined when the status holds no exit that is the process's own. */
const endedOfStatus = (run: Run, status: LaunchStatus | undefined, stopCounts: boolean): EndedContent | undefined => {
  if (status?.exit === undefined) return undefined
  // a launcher that ended the process for no stop of the run's was being ended itself
  if (status.cause === "stopped" && !stopCounts) return undefined
  // ended by the watcher's death, not by itself, and what it printed after it is gone: lost
  if (status.exit === brokenPipeExit && status.cause === undefined) return undefined
  const ending = decideEnding({
    exit: status.exit,
    stopped: status.cause === "stopped",
    wallExpired: status.cause === "wall",
    oomKilled: status.cause === "memory",
    limits: limitsOf({ run })
  })
  return endedOfProcess(processEndOf(ending))
}

/**
 * What a started run whose watcher is gone is answered: its process's real outcome and kept logs
 * where the status read before (`status`) kept its exit, else `lost` for `whyLost`. A session
 * that starts a process for each delivery ends only by a stop or its wall, never by an exit: lost.
 */
export const recoveredEnd = (
  careDir: string,
  hash: string,
  message: Message,
  started: StartedContent | undefined,
  status: LaunchStatus | undefined,
  stopCounts: boolean,
  whyLost: string
): RecoveredEnd => {
  const lost: RecoveredEnd = { ended: endedLost(whyLost), kept: undefined, verdict: undefined, how: "no exit of its process was kept" }
  const form = formOf(message)
  if (Either.isLeft(form)) return lost
  const run = form.right.run
  if (run.process.session && run.process.deliveries === "start") return { ...lost, how: "a session's process per delivery: no exit ends it" }
  const ended = endedOfStatus(run, status, stopCounts)
  if (ended === undefined) return lost
  const tails = tailsOf(careDir, hash, { stdout: keepBytes(run.process.keep.stdout), stderr: keepBytes(run.process.keep.stderr) })
  const result: LaunchResult = { ending: { outcome: "exited", exit: status?.exit ?? 0 }, ...tails, startedAt: 0, endedAt: 0, logs: {}, logProblems: [] }
  const ran = ended.outcome !== "stopped"
  const kept = ran ? keptLogText(result, ended, run.process.keep) : undefined
  // the check-in the steps named is in started's values, as the run's watcher had it
  const checkin = started?.values["checkin"]
  const verdict = ran && run.process.verdict && checkin !== undefined && isFullHash(checkin)
    ? { checkin, value: formatVerdict(ciVerdict(hash, ended)) }
    : undefined
  return { ended, kept, verdict, how: "its process's exit, as bubblewrap reported it to the run's status file" }
}
