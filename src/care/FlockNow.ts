// An exclusive flock on a descriptor this process holds, taken now or not at all, for code that
// is not an Effect or must not wait (the release root's lock, a spare watcher's): flock(2) through
// the addon (NativeFlock), else flock(1) on the descriptor. The lock belongs to the open file
// description, so it stays with this process after a flock child exits and goes when the
// descriptor is closed or the process dies. (CareDirectoryFs takes the runs' locks the same way,
// as Effects that may wait.)

import * as ChildProcess from "node:child_process"
import { tryFlock } from "./NativeFlock.js"

const conflict = 75

/** "held", "busy", or what went wrong in words. */
export const flockNow = (fd: number, flock = "flock"): "held" | "busy" | string => {
  // a flock program named by the caller (a test's) is the one that decides
  const native = flock === "flock" ? tryFlock(fd) : undefined
  if (native !== undefined) return native
  const r = ChildProcess.spawnSync(flock, ["--exclusive", "--nonblock", "--conflict-exit-code", String(conflict), "3"], {
    stdio: ["ignore", "ignore", "pipe", fd]
  })
  if (r.status === 0) return "held"
  if (r.status === conflict) return "busy"
  return `flock ended ${r.status ?? r.signal ?? r.error?.message}${r.stderr !== null && r.stderr.length > 0 ? `: ${r.stderr.toString().trim()}` : ""}`
}
