// The supervisor's roll of the node's watchers: each run in care whose RUN.lock names a live
// holder, known by its pid and that pid's start time. A watcher writes its pid into RUN.lock the
// moment it holds the lock (CareDirectory.lockRun), so the supervisor learns of it from the care
// directory's inotify event, whoever started it (the supervisor's round, a watcher waking the next
// run of its process user, the spare taking a run, a tool acting at once).
//
// Its end is seen by reading /proc/PID/stat: one read per watcher per look, no process started.
// (Node 20 has no pidfd; a blocking flock child per watcher would cost a process per run, and
// the lock it took would have to be let go again before recovery takes it.) The lock stays the
// truth: whoever decides a run whose holder is gone takes RUN.lock first, and a fossil write still
// landing (it holds the lock's descriptor) keeps the run "alive" until it has.

import * as Fs from "node:fs"
import * as Path from "node:path"
import { handOffFileOf, runName } from "../care/HandOffFiles.js"
import { processStartTime } from "../root/SupervisorFiles.js"

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

const pidIn = (file: string): number | undefined => {
  try {
    const n = Number.parseInt(Fs.readFileSync(file, "utf8").trim(), 10)
    return Number.isSafeInteger(n) && n > 0 ? n : undefined
  } catch {
    return undefined
  }
}

/** The pid RUN.lock's last holder wrote, if any. */
export const holderOf = (care: string, run: string): number | undefined => pidIn(Path.join(care, `${run}.lock`))

interface Known {
  readonly pid: number
  readonly started: string
}

export class WatcherRoll {
  private readonly known = new Map<string, Known>()

  constructor(private readonly care: string, private readonly self: number = process.pid) {}

  /**
   * Reads the run's holder: a live one (not this process) is put on the roll ("added"); one already
   * gone when its lock is seen ("dead": a watcher that died right after taking it) is the caller's
   * to decide at once, as any watcher's end.
   */
  note(run: string): { readonly _tag: "added" | "dead"; readonly pid: number } | undefined {
    return this.noteHolder(run, holderOf(this.care, run))
  }

  /** Reads the run's hand-off (RUN.handoff): the watcher handed it, on the roll until it holds the run's lock or is gone. */
  noteHandOff(run: string): { readonly _tag: "added" | "dead"; readonly pid: number } | undefined {
    const file = handOffFileOf(this.care, run)
    let since: string | undefined
    try {
      since = Fs.readFileSync(file, "utf8").trim().split(" ")[1]
    } catch {
      return undefined
    }
    return this.noteHolder(run, pidIn(file), since)
  }

  private noteHolder(run: string, pid: number | undefined, since?: string): { readonly _tag: "added" | "dead"; readonly pid: number } | undefined {
    const was = this.known.get(run)
    if (pid === undefined || pid === this.self) return undefined
    if (was !== undefined && was.pid === pid) return undefined
    const started = processStartTime(pid)
    if (started === undefined || (since !== undefined && since !== "" && since !== started)) return { _tag: "dead", pid }
    this.known.set(run, { pid, started })
    return { _tag: "added", pid }
  }

  /** The runs whose watcher is gone since the last look, taken off the roll, with the pid each had. */
  gone(): ReadonlyArray<{ readonly run: string; readonly pid: number }> {
    const out: Array<{ run: string; pid: number }> = []
    for (const [run, w] of this.known) {
      if (processStartTime(w.pid) !== w.started) {
        this.known.delete(run)
        out.push({ run, pid: w.pid })
      }
    }
    return out
  }

  get size(): number {
    return this.known.size
  }

  snapshot(): Record<string, number> {
    return Object.fromEntries([...this.known].map(([run, w]) => [run, w.pid]))
  }

  /** Every run in care whose holder lives now (the supervisor starting takes them back). */
  takeBack(): number {
    let names: Array<string>
    try {
      names = Fs.readdirSync(this.care)
    } catch {
      return 0
    }
    for (const name of names) {
      const run = runOfLockFile(name)
      if (run !== undefined) this.note(run)
    }
    // a watcher handed a run and not yet holding its lock (a live holder of the lock stays on the roll)
    for (const name of names) {
      const file = runOfCareFile(name)
      if (file?.kind === "handoff" && !this.known.has(file.run)) {
        this.noteHandOff(file.run)
      }
    }
    return this.known.size
  }
}
