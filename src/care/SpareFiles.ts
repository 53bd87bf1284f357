// The spare watcher (docs/architecture.md, "The spare watcher"): a watcher started ahead of any
// run, its program loaded, waiting on ROOT/care/spare/socket for the one run it will watch. A
// hand-off to it skips Node's start and the program's load (about 200 ms of the path from a
// run's arrival to its process). Its files live in a directory of their own so nothing that
// lists the care directory's runs sees them.

import * as Fs from "node:fs"
import * as Path from "node:path"
import { releasePaths } from "../release/ReleasePaths.js"

export interface SpareFiles {
  readonly dir: string
  /** a Unix socket: one JSON line asked, one answered */
  readonly socket: string
  /** flock held by the spare while it waits, so two never serve one node; holds its pid */
  readonly lock: string
  /** the spare's own output until it takes a run (its run's log is ROOT/care/RUN.log) */
  readonly log: string
  /** flock held by whoever is starting a spare, from its look for one to its start of one */
  readonly starting: string
}

export const spareFiles = (root: string): SpareFiles => {
  const dir = Path.join(releasePaths(root).care, "spare")
  return { dir, socket: Path.join(dir, "socket"), lock: Path.join(dir, "lock"), log: Path.join(dir, "log"), starting: Path.join(dir, "starting") }
}

/** Linux's sun_path holds 108 bytes, the last a NUL: a longer ROOT gets no spare. */
export const socketPathFits = (socket: string): boolean => Buffer.byteLength(socket) <= 107

export const defaultSpareIdleSeconds = 3600

/**
 * ROOT/settings/spare-watcher: `off`, or how many seconds an unused spare waits before it gives
 * its memory back (an hour unless set). A value that is neither is named, and the default used.
 */
export const spareSetting = (root: string): { readonly idleSeconds: number | "off"; readonly problem?: string } => {
  const file = Path.join(releasePaths(root).settings, "spare-watcher")
  let text: string
  try {
    text = Fs.readFileSync(file, "utf8").trim()
  } catch {
    return { idleSeconds: defaultSpareIdleSeconds }
  }
  if (text === "off") return { idleSeconds: "off" }
  const n = Number(text)
  return /^\d+$/.test(text) && n > 0 && Number.isSafeInteger(n)
    ? { idleSeconds: n }
    : { idleSeconds: defaultSpareIdleSeconds, problem: `${file} holds ${JSON.stringify(text.slice(0, 40))}, neither "off" nor a number of seconds above 0: an unused spare waits ${defaultSpareIdleSeconds} s` }
}

/** What a program file is now: a rebuilt or switched program is another file. */
export const programIdentity = (program: string): string | undefined => {
  try {
    const real = Fs.realpathSync.native(program)
    const stat = Fs.statSync(real)
    return `${real}|${stat.dev}|${stat.ino}|${stat.mtimeMs}|${stat.size}`
  } catch {
    return undefined
  }
}

/** Asked of the spare: whether one waits, or to take a run. */
export type SpareRequest =
  | { readonly ping: true }
  | {
    readonly run: string
    readonly personStart: boolean
    /** the watcher program the asker would start: a spare of another program declines */
    readonly program: string
    /** the node the asker would start it for (ocx2-watcher's arguments but --run and --person-start) */
    readonly node: ReadonlyArray<string>
  }

/** Answered by the spare. */
export type SpareAnswer =
  | { readonly spare: number }
  | { readonly taken: number }
  | { readonly declined: string }

/** The pid a spare wrote into its lock file, when one did. */
export const sparePid = (root: string): number | undefined => {
  try {
    const n = Number.parseInt(Fs.readFileSync(spareFiles(root).lock, "utf8").trim(), 10)
    return Number.isSafeInteger(n) && n > 0 ? n : undefined
  } catch {
    return undefined
  }
}
