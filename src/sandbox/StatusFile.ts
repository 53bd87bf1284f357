/**
 * A launch's status file (ROOT/care/RUN.status for a run): bubblewrap writes its JSON status
 * lines to it (`--json-status-fd`: `{"child-pid": N, ...}` once the process starts, `{"exit-code":
 * N}` when it exits, before bubblewrap itself exits), and the launcher adds a line of its own when
 * it is the one that ended the process (`{"ocx2-ending": "stopped" | "wall" | "memory"}`), before
 * it does. The file outlives the launcher: a watcher SIGKILLed between its process's exit and its
 * `ended` leaves the exit here for whoever takes the run's lock next (2.13: `lost` only when the
 * exit truly cannot be known). The process cannot write it: bubblewrap closes the descriptor in
 * the sandbox, and the file lies in the care directory, which no sandbox may bind (refusal 7).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"

export const runStatusFile = (careDir: string, run: string): string => Path.join(careDir, `${run}.status`)

export type EndingCause = "stopped" | "wall" | "memory"

export interface LaunchStatus {
  /** the exit code bubblewrap reported (128+N for signal N), when the process exited */
  readonly exit: number | undefined
  /** why the launcher ended the process, when it did */
  readonly cause: EndingCause | undefined
  /** whether bubblewrap reported the process started */
  readonly started: boolean
}

/** opens the status file anew for a launch: the descriptor bubblewrap writes to (and the launcher appends to) */
export const openStatusFile = (file: string): number => {
  const c = Fs.constants
  return Fs.openSync(file, c.O_WRONLY | c.O_CREAT | c.O_TRUNC | c.O_APPEND | c.O_NOFOLLOW, 0o600)
}

/** the launcher's own line, before it ends the process; a write that fails loses only this detail */
export const noteEnding = (file: string | undefined, cause: EndingCause): void => {
  if (file === undefined) return
  try {
    Fs.appendFileSync(file, `${JSON.stringify({ "ocx2-ending": cause })}\n`)
  } catch {
    // the file gone or the disk full: recovery then reads the bare exit
  }
}

const causes: ReadonlyArray<string> = ["stopped", "wall", "memory"]

/** what a status file's text says; a line cut short by a crash is passed by */
export const parseStatus = (text: string): LaunchStatus => {
  let exit: number | undefined
  let cause: EndingCause | undefined
  let started = false
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue
    let value: unknown
    try {
      value = JSON.parse(line)
    } catch {
      continue
    }
    if (typeof value !== "object" || value === null) continue
    const o = value as Record<string, unknown>
    if (typeof o["child-pid"] === "number") started = true
    if (typeof o["exit-code"] === "number" && Number.isInteger(o["exit-code"])) exit = o["exit-code"]
    const ending = o["ocx2-ending"]
    if (typeof ending === "string" && causes.includes(ending) && cause === undefined) cause = ending as EndingCause
  }
  return { exit, cause, started }
}

/** the status file read, or undefined when there is none */
export const readStatus = (file: string): LaunchStatus | undefined => {
  try {
    return parseStatus(Fs.readFileSync(file, "utf8"))
  } catch {
    return undefined
  }
}
