// The hand-off's record, ROOT/care/RUN.handoff: whoever hands a run to a watcher (the spare, or
// one started for it) writes the watcher's pid into it, so that a watcher gone before it took the
// run's lock (and so never wrote its pid into RUN.lock) is on the supervisor's roll all the same
// (src/node/WatcherRoll.ts), and its run is decided again.

import * as Fs from "node:fs"
import * as Path from "node:path"
import { processStartTime } from "../root/SupervisorFiles.js"

/** A run's name as the care directory's files are named after it (RUN.lock, RUN.handoff). */
export const runName = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/

export const handOffFileOf = (care: string, run: string): string => Path.join(care, `${run}.handoff`)

/** Notes the hand-off of `run` to the watcher `pid`; a care directory gone loses nothing (the record keeps the run). */
export const writeHandOff = (care: string, run: string, pid: number): void => {
  if (!runName.test(run) || pid <= 0) return
  try {
    // with the pid's start time, so that a pid used again since is not taken for the watcher
    Fs.writeFileSync(handOffFileOf(care, run), `${pid} ${processStartTime(pid) ?? ""}\n`, { mode: 0o600 })
  } catch {
    // the node's start decides the run again
  }
}
