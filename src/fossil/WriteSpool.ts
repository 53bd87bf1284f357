/**
 * The node's writes to the served repository, gathered: every process that writes (a watcher, the
 * hook, a tool) leaves what it has to write in a spool beside the repository, then takes the
 * write lock; whoever holds the lock writes every waiting entry of live writers in one `fossil`
 * process, and the others find theirs received when their turn comes. The served file is then
 * held once for many writes, not once for each (docs/architecture.md, "Writing beside the
 * server"): a burst of watchers ending at once costs people's posts a few holds, not dozens.
 *
 * An entry is only ever written by the lock holder, and withdrawn under the same lock: so once
 * recovery has withdrawn a dead watcher's entries (under the lock), none of them can land after
 * it read the run's record, and a dead watcher's ended never lands after recovery answered lost.
 */
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { tryFlock } from "../care/NativeFlock.js"
import type { Artifact } from "./Artifact.js"

export interface SpoolEntry {
  readonly file: string
  readonly user: string
  readonly pid: number
  readonly artifacts: ReadonlyArray<Artifact>
}

/** `.REPO.ocx2-writes/` beside the repository, like its write lock */
export const spoolDirOf = (repository: string): string =>
  Path.join(Path.dirname(repository), `.${Path.basename(repository)}.ocx2-writes`)

/** Leaves `artifacts`, to be written as `user`, in the spool; the entry's file. Names sort in arrival order. */
export const addEntry = (dir: string, user: string, artifacts: ReadonlyArray<Artifact>): string => {
  Fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  const name = `${String(Date.now()).padStart(15, "0")}-${String(process.pid).padStart(8, "0")}-${Crypto.randomBytes(6).toString("hex")}.json`
  const file = Path.join(dir, name)
  const body = JSON.stringify({ user, pid: process.pid, artifacts: artifacts.map((a) => ({ hash: a.hash, bytes: a.bytes.toString("base64") })) })
  Fs.writeFileSync(`${file}.part`, body, { mode: 0o600 })
  Fs.renameSync(`${file}.part`, file)
  return file
}

/** The entries waiting, in arrival order; one that cannot be read (cut short) is passed by. */
export const readEntries = (dir: string): ReadonlyArray<SpoolEntry> => {
  let names: Array<string>
  try {
    names = Fs.readdirSync(dir).filter((n) => n.endsWith(".json")).sort()
  } catch {
    return []
  }
  const entries: Array<SpoolEntry> = []
  for (const name of names) {
    const file = Path.join(dir, name)
    try {
      const parsed = JSON.parse(Fs.readFileSync(file, "utf8")) as { user?: unknown; pid?: unknown; artifacts?: unknown }
      if (typeof parsed.user !== "string" || typeof parsed.pid !== "number" || !Array.isArray(parsed.artifacts)) continue
      const artifacts = (parsed.artifacts as Array<{ hash?: unknown; bytes?: unknown }>)
        .filter((a) => typeof a.hash === "string" && typeof a.bytes === "string")
        .map((a) => ({ hash: a.hash as string, bytes: Buffer.from(a.bytes as string, "base64") }))
      entries.push({ file, user: parsed.user, pid: parsed.pid, artifacts })
    } catch {
      // gone meanwhile, or not whole
    }
  }
  return entries
}

export const removeEntry = (file: string): void => Fs.rmSync(file, { force: true })

/** Whether the process that left an entry still lives (an entry of a dead one is never written). */
export { alive } from "../care/ProcessAlive.js"

export interface HeldLock {
  /** the descriptor the lock belongs to: a child given it keeps the lock until it ends */
  readonly fd: number
  readonly release: () => void
}

/**
 * Takes the write lock (flock(2) on `lockFile`: tried in this process, else through util-linux
 * `flock` on a descriptor of ours, so the lock is ours after `flock` exits), waiting up to
 * `waitSeconds`.
 */
export const holdLock = (lockFile: string, waitSeconds = 60): Promise<HeldLock> =>
  new Promise((resolve, reject) => {
    let fd: number
    try {
      fd = Fs.openSync(lockFile, "a", 0o600)
    } catch (e) {
      reject(e)
      return
    }
    if (tryFlock(fd) === "held") {
      resolve({ fd, release: () => Fs.closeSync(fd) })
      return
    }
    const child = ChildProcess.spawn("flock", ["--exclusive", "--wait", String(waitSeconds), "3"], { stdio: ["ignore", "ignore", "pipe", fd] })
    const err: Array<Buffer> = []
    child.stderr!.on("data", (c: Buffer) => err.push(c))
    child.once("error", (e) => {
      Fs.closeSync(fd)
      reject(e)
    })
    child.once("close", (code) => {
      if (code === 0) resolve({ fd, release: () => Fs.closeSync(fd) })
      else {
        Fs.closeSync(fd)
        reject(new Error(`could not take ${lockFile} within ${waitSeconds} s (flock ended ${String(code)}${err.length > 0 ? `: ${Buffer.concat(err).toString().trim()}` : ""})`))
      }
    })
  })
