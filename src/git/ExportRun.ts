// One export of the served repository into its git mirror, under the export's lock: what both
// the export tool and the hook's detached exporter run. Plain Node (no Effect), so the hook's
// small bundle carries it.

import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { tryFlock } from "../care/NativeFlock.js"
import { runFossil } from "../fossil/Command.js"
import { openDatabase } from "../fossil/Sqlite.js"
import { checkinAfter, exportLockOf, exportWaitingLockOf, exportMirrorOf, readExportState, writeExportState } from "./ExportFiles.js"

export type ExportResult =
  | { readonly _tag: "Exported"; readonly mirror: string; readonly said: string; readonly rid: number }
  | { readonly _tag: "NoMirror" }
  | { readonly _tag: "Failed"; readonly mirror: string; readonly said: string }
  | { readonly _tag: "Busy"; readonly waited: number }
  | { readonly _tag: "Current"; readonly mirror: string }
  | { readonly _tag: "Queued" }

export interface ExportOptions {
  /** a new mirror directory (absolute): the first export, or a move; by default where the last export wrote */
  readonly mirror?: string
  /** the git branch trunk becomes (--mainbranch); by default the mirror's own */
  readonly mainBranch?: string
  /** the git remote each export is pushed to from now on (fossil git export --autopush), or off */
  readonly autopush?: string
  /** how long to wait for an export already running (seconds) */
  readonly waitSeconds: number
  /** only when a check-in arrived after the last export (the hook): otherwise always */
  readonly onlyWhenDue?: boolean
  /**
   * at most one waits (the hook's exporters): when another exporter already waits for the lock,
   * this one ends at once (Queued), since the waiting one reads what arrived after it takes the lock
   */
  readonly oneWaiting?: boolean
  /** the user fossil runs as (it needs one to run at all; the export's authors are the check-ins') */
  readonly user: string
}

const conflict = 75

/** flock on a descriptor this process holds, waiting up to `seconds`: "held", "busy" or what went wrong. */
const takeLock = (fd: number, seconds: number): Promise<"held" | "busy" | string> =>
  new Promise((resolve) => {
    // tried in this process first; a busy lock is waited for by flock(1)
    if (tryFlock(fd) === "held") return resolve("held")
    const child = ChildProcess.spawn("flock", ["--exclusive", "--wait", String(seconds), "--conflict-exit-code", String(conflict), "3"], {
      stdio: ["ignore", "ignore", "pipe", fd]
    })
    let err = ""
    child.stderr!.on("data", (chunk: Buffer) => (err += chunk.toString()))
    child.once("error", (e) => resolve(`flock: ${e.message}`))
    child.once("close", (code) => resolve(code === 0 ? "held" : code === conflict ? "busy" : `flock ended ${code}: ${err.trim()}`))
  })

interface Snapshot {
  readonly mirror: string | undefined
  readonly newest: number | undefined
}

const snapshot = (repository: string, after: number): Snapshot => {
  const db = openDatabase(repository, { readonly: true, fileMustExist: true })
  try {
    return { mirror: exportMirrorOf(db), newest: checkinAfter(db, after) }
  } finally {
    db.close()
  }
}

/** Fossil's own words, without its progress counters ("1/2  2/2"), git's hints and blank lines. */
export const fossilSaid = (output: string): string =>
  output.split(/\r?\n|\r/).map((l) => l.replace(/(?:\s*\d+\/\d+)+\s*/g, " ").trim())
    .filter((l) => l !== "" && !l.startsWith("hint:")).join("; ")

/**
 * Puts `last-git-export-repo` back after a failed export into a new directory: `fossil git export
 * DIR` records DIR before it tries it, so a bad DIR would otherwise move the served export.
 */
const restoreMirror = async (repository: string, previous: string | undefined, user: string): Promise<void> => {
  const sql = previous === undefined
    ? "DELETE FROM config WHERE name = 'last-git-export-repo'"
    : `REPLACE INTO config(name, value, mtime) VALUES('last-git-export-repo', '${previous.replace(/'/g, "''")}', now())`
  await runFossil(["sql", "-R", repository, sql], { user })
}

export const exportNow = async (repository: string, options: ExportOptions): Promise<ExportResult> => {
  // A burst of check-ins starts an exporter each; one exports, one waits, the rest end here.
  let waiting: number | undefined
  if (options.oneWaiting === true) {
    waiting = Fs.openSync(exportWaitingLockOf(repository), "a", 0o600)
    const turn = await takeLock(waiting, 0)
    if (turn !== "held") {
      Fs.closeSync(waiting)
      if (turn === "busy") return { _tag: "Queued" }
      throw new Error(turn)
    }
  }
  const fd = Fs.openSync(exportLockOf(repository), "a", 0o600)
  try {
    const lock = await takeLock(fd, options.waitSeconds)
    // the next arrival may wait now: this one reads what arrived only from here on
    if (waiting !== undefined) {
      Fs.closeSync(waiting)
      waiting = undefined
    }
    if (lock === "busy") return { _tag: "Busy", waited: options.waitSeconds }
    if (lock !== "held") throw new Error(lock)
    const state = readExportState(repository)
    const cursor = state.exported?.rid ?? 0
    const before = snapshot(repository, options.onlyWhenDue === true ? cursor : -1)
    const mirror = options.mirror ?? before.mirror
    if (mirror === undefined) return { _tag: "NoMirror" }
    // another exporter took this check-in while we waited for the lock
    if (options.onlyWhenDue === true && before.newest === undefined && options.mirror === undefined) return { _tag: "Current", mirror }
    const args = ["git", "export", ...(options.mirror !== undefined ? [options.mirror] : []), ...(options.mainBranch !== undefined ? ["--mainbranch", options.mainBranch] : []),
      // a new autopush pushes now, even when nothing is new to export
      ...(options.autopush !== undefined ? ["--autopush", options.autopush, ...(options.autopush !== "off" ? ["--force"] : [])] : []),
      "-R", repository]
    const result = await runFossil(args, { user: options.user, timeoutMs: 30 * 60_000 })
    const said = fossilSaid(`${result.stdout}\n${result.stderr}`)
    const at = new Date().toISOString()
    if (result.code !== 0) {
      if (options.mirror !== undefined && options.mirror !== before.mirror) await restoreMirror(repository, before.mirror, options.user)
      const failedSaid = said === "" ? `fossil git export exited ${result.code}` : said
      writeExportState(repository, { ...state, failed: { at, mirror, said: failedSaid } })
      return { _tag: "Failed", mirror, said: failedSaid }
    }
    const rid = Math.max(cursor, before.newest ?? 0)
    writeExportState(repository, { ...state, exported: { at, mirror, rid, said } })
    return { _tag: "Exported", mirror, said, rid }
  } finally {
    Fs.closeSync(fd)
    if (waiting !== undefined) Fs.closeSync(waiting)
  }
}
