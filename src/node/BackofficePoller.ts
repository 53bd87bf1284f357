// Fast mode's poller (docs/locks.md): `ROOT/ocx2-hook --poll REPOSITORY`, in place of Fossil's
// `fossil backoffice --poll 1 REPOSITORY`. Like Fossil's, it runs `fossil backoffice --nodelay
// --nolease REPOSITORY` whenever the file changed (looked at every second), and at least once an
// hour. Unlike Fossil's:
//
// - On a repository in rollback-journal mode each backoffice runs with SQLite's unix-excl VFS.
//   Fossil runs the after-receive hook inside a write transaction (BEGIN IMMEDIATE), and a
//   person's post that read before it and writes while it holds that transaction is refused at
//   once ("database is locked"); held exclusively from its first read, the backoffice makes the
//   person's request wait instead, and it then runs whole.
// - An exclusive fossil holds every database it opens that way, the configuration too (Fossil's
//   own poller keeps the configuration open for its whole life: that is why it cannot be made
//   exclusive). So each backoffice gets a configuration of its own (FOSSIL_HOME beside the
//   repository, one backoffice at a time under a lock file), and the hook it starts is given the
//   host's back (OCX2_HOST_FOSSIL_HOME, restored by ocx2-hook first): nothing else on the host
//   waits for a database a backoffice holds.
// - After each run it looks whether the hook's cursor (config hook-last-rcvid) reached the
//   newest receipt, and runs again the next second while it has not. Fossil skips the hook
//   without a word when a push announced more artifacts (hook-embargo), and once a run made this
//   way exited without running it; waiting for the file's next change would leave that receipt
//   unheard until someone writes again.

import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fossilBinary } from "../fossil/Command.js"
import { openDatabase } from "../fossil/Sqlite.js"

/**
 * In rollback-journal mode (not WAL), where an exclusive backoffice is safe. Asked through SQLite,
 * not read from the file: closing a descriptor of its own on the file would drop every POSIX
 * lock this process holds on it (a test holding a person's transaction calls this).
 */
export const inRollbackMode = (file: string): boolean => {
  try {
    const db = openDatabase(file, { readonly: true, fileMustExist: true })
    try {
      return String(db.pragma("journal_mode", { simple: true })).toLowerCase() !== "wal"
    } finally {
      db.close()
    }
  } catch {
    return false
  }
}

const readHeader = (file: string): Buffer | undefined => {
  let fd: number | undefined
  try {
    fd = Fs.openSync(file, "r")
    const header = Buffer.alloc(28)
    return Fs.readSync(fd, header, 0, 28, 0) < 28 ? undefined : header
  } catch {
    return undefined
  } finally {
    if (fd !== undefined) Fs.closeSync(fd)
  }
}

/** The backoffice's own configuration directory (FOSSIL_HOME), beside the repository. */
export const backofficeHomeOf = (repository: string): string =>
  Path.join(Path.dirname(repository), `.${Path.basename(repository)}.ocx2-backoffice-home`)

/** Held while a backoffice runs: one at a time per repository, whichever poller started it. */
export const backofficeLockOf = (repository: string): string =>
  Path.join(Path.dirname(repository), `.${Path.basename(repository)}.ocx2-backoffice.lock`)

/** The arguments of one backoffice run: exclusive where that is safe (rollback-journal mode). */
export const backofficeArgs = (repository: string): ReadonlyArray<string> =>
  [...(inRollbackMode(repository) ? ["--vfs", "unix-excl"] : []), "backoffice", "--nodelay", "--nolease", repository]

/** One backoffice run, waited for: its exit code (undefined when it could not start). */
export const runBackoffice = (repository: string): Promise<number | undefined> =>
  new Promise((resolve) => {
    const home = backofficeHomeOf(repository)
    try {
      Fs.mkdirSync(home, { recursive: true, mode: 0o700 })
    } catch {
      // fossil then says what is wrong with it
    }
    // util-linux flock, as the node's writes use it: two pollers never share the configuration at once
    const child = ChildProcess.spawn("flock", ["--exclusive", "--wait", "60", backofficeLockOf(repository), fossilBinary, ...backofficeArgs(repository)], {
      stdio: ["ignore", "ignore", "inherit"],
      env: { ...process.env, FOSSIL_HOME: home, OCX2_HOST_FOSSIL_HOME: process.env["FOSSIL_HOME"] ?? "" }
    })
    child.once("error", () => resolve(undefined))
    child.once("close", (code) => resolve(code ?? undefined))
  })

/** ocx2-hook's first act: a hook started by runBackoffice works with the host's configuration. */
export const restoreHostFossilHome = (): void => {
  const host = process.env["OCX2_HOST_FOSSIL_HOME"]
  if (host === undefined) return
  if (host === "") delete process.env["FOSSIL_HOME"]
  else process.env["FOSSIL_HOME"] = host
  delete process.env["OCX2_HOST_FOSSIL_HOME"]
}

/** Where the hook's cursor stands against the newest receipt; undefined when there are no hooks to run. */
export interface HookCursor {
  readonly cursor: number
  readonly newest: number
}

/** One short read (SHARED only: a reader refuses nobody). Throws when the repository cannot be read. */
export const hookCursorOf = (repository: string): HookCursor | undefined => {
  const db = openDatabase(repository, { readonly: true, fileMustExist: true })
  try {
    return db.transaction(() => {
      // Fossil's backoffice runs hooks, and moves the cursor, only where config 'hooks' exists
      if (db.prepare("SELECT 1 FROM config WHERE name = 'hooks'").get() === undefined) return undefined
      const cursor = db.prepare<[], { n: number | null }>("SELECT CAST(value AS INTEGER) AS n FROM config WHERE name = 'hook-last-rcvid'").get()?.n ?? 0
      const newest = db.prepare<[], { n: number | null }>("SELECT max(rcvid) AS n FROM rcvfrom").get()?.n ?? 0
      return { cursor, newest }
    })()
  } finally {
    db.close()
  }
}

/**
 * What the file is now, to see that it changed: its time, size and SQLite's change counter
 * (header bytes 24 to 27, bumped by every commit in rollback-journal mode, where the time's
 * granularity could hide a second commit in the same tick). Read from a descriptor of its own:
 * only for a process that holds no SQLite lock on the file (the poller, between its reads).
 */
export const changeOf = (file: string): string | undefined => {
  try {
    const stat = Fs.statSync(file, { bigint: true })
    const header = readHeader(file)
    return `${stat.ino}:${stat.mtimeNs}:${stat.size}:${header === undefined ? "" : header.readUInt32BE(24)}`
  } catch {
    return undefined // gone for now: looked at again
  }
}

export interface PollOptions {
  /** how often the file is looked at (1 s) */
  readonly everyMs?: number
  /** a run at least this often, changed or not (an hour, as Fossil's) */
  readonly atLeastMs?: number
  /** one backoffice run (runBackoffice) */
  readonly run?: (repository: string) => Promise<number | undefined>
  /** where it says what went wrong (standard error: a service's journal) */
  readonly say?: (line: string) => void
  readonly signal?: AbortSignal
}

const sleep = (ms: number, signal: AbortSignal | undefined) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms)
    function done() {
      clearTimeout(timer)
      signal?.removeEventListener("abort", done)
      resolve()
    }
    signal?.addEventListener("abort", done, { once: true })
  })

/** Runs until the signal: a backoffice whenever the repository changed, again while the hook's cursor lags, and at least every `atLeastMs`. */
export const pollBackoffice = async (repository: string, options: PollOptions = {}): Promise<void> => {
  const every = options.everyMs ?? 1000
  const atLeast = options.atLeastMs ?? 3_600_000
  const run = options.run ?? runBackoffice
  const say = options.say ?? ((line: string) => process.stderr.write(`ocx2-hook --poll ${repository}: ${line}\n`))
  let seen: string | undefined
  let lastRun = 0
  /** the cursor lagged after the last run: the streak's first lag, said once */
  let lagging: HookCursor | undefined
  while (options.signal?.aborted !== true) {
    const before = changeOf(repository)
    if (before !== undefined && (before !== seen || lagging !== undefined || Date.now() - lastRun >= atLeast)) {
      lastRun = Date.now()
      const code = await run(repository)
      if (code !== 0) say(`fossil backoffice ${code === undefined ? "could not start" : `exited ${code}`}`)
      // read before the cursor: a commit after this read is a change the next look sees, one before it is in the cursor's answer
      const after = changeOf(repository)
      let state: HookCursor | undefined
      let readable = true
      try {
        state = hookCursorOf(repository)
      } catch (e) {
        readable = false
        say(`the hook's cursor cannot be read: ${e instanceof Error ? e.message : String(e)}`)
      }
      if (state !== undefined && state.cursor < state.newest) {
        if (lagging === undefined) say(`the backoffice left the hook's cursor at ${state.cursor}, behind receipt ${state.newest}: run again each second until it catches up`)
        lagging = state
      } else {
        if (lagging !== undefined) say(`the hook's cursor caught up (${state?.cursor ?? "?"})`)
        lagging = undefined
        // unreadable: as Fossil's poller, the run's own writes make one more run
        seen = readable ? after : before
      }
    }
    await sleep(every, options.signal)
  }
}
