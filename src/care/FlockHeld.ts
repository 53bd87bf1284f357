// Whether a file is flock(2)-locked by anyone, read from the kernel's table of locks
// (/proc/locks) without taking the lock. Looking by taking it (flock --nonblock, then letting go)
// holds it for as long as the look takes, a spawned flock's life, and a watcher that tries to take
// the lock in that instant is refused as if a run held it: the watcher of a run handed to it
// exited, or a process user's next run wrote itself down as waiting behind nobody, and stayed.

import * as Fs from "node:fs"

/** The device and inode a line of /proc/locks names (`MAJ:MIN:INODE`, the first two in hex). */
const lockedFiles = (table: string): Set<string> => {
  const held = new Set<string>()
  for (const line of table.split("\n")) {
    const words = line.trim().split(/\s+/)
    // `N: -> FLOCK ...` is a request waiting for the lock, not a holder
    if (words[1] !== "FLOCK") continue
    const [major, minor, inode] = (words[5] ?? "").split(":")
    if (major === undefined || minor === undefined || inode === undefined) continue
    held.add(`${Number.parseInt(major, 16)}:${Number.parseInt(minor, 16)}:${inode}`)
  }
  return held
}

/** stat's st_dev split as glibc's major() and minor() do */
const keyOf = (stat: Fs.BigIntStats): string => {
  const dev = stat.dev
  const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn)
  const minor = (dev & 0xffn) | ((dev >> 12n) & ~0xffn)
  return `${major}:${minor}:${stat.ino}`
}

const readTable = (): string | undefined => {
  try {
    return Fs.readFileSync("/proc/locks", "latin1")
  } catch {
    return undefined
  }
}

/**
 * "held" or "free" for `file` by the kernel's table; "absent" when there is no such file;
 * undefined when the table cannot be read (the caller looks another way).
 */
export const flockHeld = (file: string): "held" | "free" | "absent" | undefined => {
  let stat: Fs.BigIntStats
  try {
    stat = Fs.statSync(file, { bigint: true })
  } catch {
    return "absent"
  }
  const table = readTable()
  if (table === undefined) return undefined
  return lockedFiles(table).has(keyOf(stat)) ? "held" : "free"
}
