/**
 * Ending a launch's whole tree without leaving a zombie behind (PID 1 here does not
 * reap). The wrapper we spawned becomes bwrap, whose only child is the sandbox's pid
 * namespace init: killing that init makes the kernel kill and reap everything in the
 * namespace, and bwrap, our child, then exits and is reaped by Node. Stopping bwrap
 * first freezes its list of children, so no child is created between the look and the kill.
 */
import * as Fs from "node:fs"

const state = (pid: number): string | undefined => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0]
  } catch {
    return undefined
  }
}

export const childrenOf = (pid: number): ReadonlyArray<number> => {
  try {
    return Fs.readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").split(" ").filter((s) => s !== "").map(Number)
  } catch {
    return []
  }
}

const signal = (pid: number, sig: NodeJS.Signals) => {
  try {
    process.kill(pid, sig)
    return true
  } catch {
    return false
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** kills everything below `outer` and lets `outer` exit by itself (or kills it when it has no child yet) */
export const endTree = async (outer: number): Promise<void> => {
  if (!signal(outer, "SIGSTOP")) return
  for (let i = 0; i < 200; i++) {
    const s = state(outer)
    if (s === undefined || s === "T" || s === "t" || s === "Z") break
    await sleep(1)
  }
  const children = childrenOf(outer)
  for (const c of children) signal(c, "SIGKILL")
  if (children.length === 0) signal(outer, "SIGKILL")
  signal(outer, "SIGCONT")
}
