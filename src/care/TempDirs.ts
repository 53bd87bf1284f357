// The node's temporary directories under the system's: a write's bundle (ocx2-write-), a spare's
// rehearsal (ocx2-rehearsal-). Each is removed by the process that made it when it is done; a
// process killed with SIGKILL cannot, and its directory would stay until the machine is cleaned.
// So each name carries its maker's pid, and a sweep (a spare's warm-up, off any run's path)
// removes those whose maker is gone. A pid that is alive, or that belongs to another user's
// process (EPERM), keeps its directory: a reused pid only delays a sweep.

import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { alive } from "./ProcessAlive.js"

export const tempPrefixes = ["ocx2-write-", "ocx2-rehearsal-"] as const
export type TempPrefix = (typeof tempPrefixes)[number]

/** A new directory PREFIX-PID-XXXXXX in the system's temporary directory. */
export const makeTempDir = (prefix: TempPrefix): string => Fs.mkdtempSync(Path.join(Os.tmpdir(), `${prefix}${process.pid}-`))

/** Removes the directories whose maker is gone; returns what it removed. */
export const sweepTempDirs = (tmp = Os.tmpdir()): ReadonlyArray<string> => {
  let names: Array<string>
  try {
    names = Fs.readdirSync(tmp)
  } catch {
    return []
  }
  const removed: Array<string> = []
  for (const name of names) {
    const prefix = tempPrefixes.find((p) => name.startsWith(p))
    if (prefix === undefined) continue
    const pid = /^(\d+)-[A-Za-z0-9]{6}$/.exec(name.slice(prefix.length))?.[1]
    if (pid === undefined || Number(pid) === process.pid || alive(Number(pid))) continue
    const dir = Path.join(tmp, name)
    try {
      // only a directory of ours: a link or another user's file of that name is left alone
      const stat = Fs.lstatSync(dir)
      if (!stat.isDirectory() || stat.uid !== process.getuid?.()) continue
      Fs.rmSync(dir, { recursive: true, force: true })
      removed.push(dir)
    } catch {
      // gone meanwhile, or not ours to remove
    }
  }
  return removed
}
