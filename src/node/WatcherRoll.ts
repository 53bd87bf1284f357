// The care directory's files as the supervisor's roll of the node's watchers reads them
// (src/node/supervisor/Roll.ts): each run in care whose RUN.lock names a live holder, known by its
// pid and that pid's start time. A watcher writes its pid into RUN.lock the moment it holds the
// lock (CareDirectory.lockRun), so the supervisor learns of it from the care directory's inotify
// event, whoever started it (the supervisor's round, a watcher waking the next run of its process
// user, the spare taking a run, a tool acting at once).
//
// Its end is seen by reading /proc/PID/stat: one read per watcher per look, no process started.
// (Node 20 has no pidfd; a blocking flock child per watcher would cost a process per run, and
// the lock it took would have to be let go again before recovery takes it.) The lock stays the
// truth: whoever decides a run whose holder is gone takes RUN.lock first, and a fossil write still
// landing (it holds the lock's descriptor) keeps the run "alive" until it has.

import * as Fs from "node:fs"
import * as Path from "node:path"
import { runName } from "../care/HandOffFiles.js"

/** The run a file of the care directory is the lock of (RUN.lock; not round.lock, ~USER.lock). */
export const runOfLockFile = (name: string): string | undefined => {
  if (!name.endsWith(".lock") || name.startsWith("~")) return undefined
  const run = name.slice(0, -".lock".length)
  return run !== "round" && runName.test(run) ? run : undefined
}

/** The run a file of the care directory speaks of for the roll: its lock (RUN.lock) or its hand-off (RUN.handoff). */
export const runOfCareFile = (name: string): { readonly run: string; readonly kind: "lock" | "handoff" } | undefined => {
  if (name.endsWith(".handoff")) {
    const run = name.slice(0, -".handoff".length)
    return runName.test(run) && run !== "round" ? { run, kind: "handoff" } : undefined
  }
  const run = runOfLockFile(name)
  return run !== undefined ? { run, kind: "lock" } : undefined
}

/** The pid a care file (a lock or a hand-off) names first, if any. */
export const pidIn = (file: string): number | undefined => {
  try {
    const n = Number.parseInt(Fs.readFileSync(file, "utf8").trim(), 10)
    return Number.isSafeInteger(n) && n > 0 ? n : undefined
  } catch {
    return undefined
  }
}

/** The pid RUN.lock's last holder wrote, if any. */
export const holderOf = (care: string, run: string): number | undefined => pidIn(Path.join(care, `${run}.lock`))
