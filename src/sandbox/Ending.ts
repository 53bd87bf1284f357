/**
 * How a launch ended, from what was seen: pure, so every rule is unit-tested.
 * bwrap (and the shell for an unconfined run) reports a signal N as exit 128+N. `processes`
 * never ends a run (2.9): past it a fork fails with EAGAIN, and the process decides.
 */
import type { Ending, Limits } from "../../services/SandboxLauncher.js"

export const SIGKILL = 9
export const SIGXCPU = 24
export const SIGXFSZ = 25

export interface Seen {
  /** exit code, or 128+N for signal N; undefined when no code could be read */
  readonly exit: number | undefined
  readonly stopped: boolean
  readonly wallExpired: boolean
  /** the memory cgroup's oom_kill count rose */
  readonly oomKilled: boolean
  readonly limits: Limits
}

export const decideEnding = (seen: Seen): Ending => {
  const exit = seen.exit
  if (seen.stopped) return { outcome: "stopped", exit }
  if (seen.wallExpired) return { outcome: "budget", limit: "wall", exit }
  if (seen.oomKilled && seen.limits.memoryBytes !== undefined) return { outcome: "budget", limit: "memory", exit }
  if (exit === 128 + SIGXCPU && seen.limits.cpuSeconds !== undefined) return { outcome: "budget", limit: "cpu", exit }
  if (exit === 128 + SIGXFSZ && seen.limits.fileSizeBytes !== undefined) return { outcome: "budget", limit: "file_size", exit }
  // past processes no new process starts (its fork fails); the run goes on, and ends as its process does
  return { outcome: "exited", exit: exit ?? 128 + SIGKILL }
}
