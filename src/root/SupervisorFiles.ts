// The node's supervisor (`ocx2 supervise`, src/node/Supervisor.ts) as others see it: plain Node
// only, since the hook's lean entry asks on every receipt whether one runs (then it only wakes it).
//
//   ROOT/node/supervisor-HASH12-USER.lock   flock held by the supervisor for its whole life: two never supervise one node
//   ROOT/node/supervisor-HASH12-USER.json   who it is (pid and the kernel's start time of that pid) and what it holds
//   ROOT/node/supervisor.log                one JSON line per thing it did

import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { releasePaths } from "../release/ReleasePaths.js"
import { canonicalRepository } from "./HookFiles.js"

export interface SupervisorFiles {
  readonly lock: string
  readonly info: string
  readonly log: string
}

const safeUser = (user: string) => user.replace(/[^A-Za-z0-9._-]/g, (c) => `%${c.charCodeAt(0).toString(16)}`)

export const supervisorFilesOf = (root: string, repository: string, user: string): SupervisorFiles => {
  const id = Crypto.createHash("sha1").update(canonicalRepository(repository)).digest("hex").slice(0, 12)
  const dir = releasePaths(root).node
  const base = Path.join(dir, `supervisor-${id}-${safeUser(user)}`)
  return { lock: `${base}.lock`, info: `${base}.json`, log: Path.join(dir, "supervisor.log") }
}

/** What the supervisor says of itself in its info file. */
export interface SupervisorInfo {
  readonly pid: number
  /** the pid's start time as the kernel counts it (/proc/PID/stat), so a pid used again is not taken for it */
  readonly started: string
  readonly since: string
  readonly repository: string
  readonly node: string
  readonly mode: "served" | "clone"
  /** the watchers it knows, by run: their pids */
  readonly watchers: Readonly<Record<string, number>>
  /** rounds it ran, and the last that decided something */
  readonly rounds: number
  readonly lastRound?: { readonly at: string; readonly did: ReadonlyArray<string> }
}

/** The kernel's start time of a pid (field 22 of /proc/PID/stat), or undefined when it is gone. */
export const processStartTime = (pid: number): string | undefined => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    // the command name, in parentheses, may hold spaces: the fields after it are counted from its end
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]
  } catch {
    return undefined
  }
}

/** Whether the process that had `pid` at `started` still runs. */
export const stillRuns = (pid: number, started: string): boolean => processStartTime(pid) === started

export const readSupervisorInfo = (file: string): SupervisorInfo | undefined => {
  try {
    const info = JSON.parse(Fs.readFileSync(file, "utf8")) as SupervisorInfo
    return Number.isSafeInteger(info.pid) && typeof info.started === "string" ? info : undefined
  } catch {
    return undefined
  }
}

/** The supervisor running for the node, read from its info file and checked against the kernel: cheap (no process started). */
export const runningSupervisor = (root: string, repository: string, user: string): SupervisorInfo | undefined => {
  const info = readSupervisorInfo(supervisorFilesOf(root, repository, user).info)
  return info !== undefined && stillRuns(info.pid, info.started) ? info : undefined
}

/** Wakes the node's supervisor (SIGUSR1: run a round now); false when none runs. */
export const wakeSupervisor = (root: string, repository: string, user: string): SupervisorInfo | undefined => {
  const info = runningSupervisor(root, repository, user)
  if (info === undefined) return undefined
  try {
    process.kill(info.pid, "SIGUSR1")
    return info
  } catch {
    return undefined
  }
}

export const writeSupervisorInfo = (file: string, info: SupervisorInfo): void => {
  Fs.mkdirSync(Path.dirname(file), { recursive: true, mode: 0o700 })
  const temporary = `${file}.${process.pid}.tmp`
  Fs.writeFileSync(temporary, `${JSON.stringify(info)}\n`, { mode: 0o600 })
  Fs.renameSync(temporary, file)
}
