// A launch's ending as the protocol reads a process's end, so that the watcher's "what next" when
// a process ends is the run's one decision (decideExit), not a mapping of its own.
import type { Ending } from "../../services/SandboxLauncher.js"
import type { ProcessEnd } from "../protocol/Outcomes.js"

/** The launcher already counts a signal N as exit 128+N, so no signal is left to name. */
export const processEndOf = (ending: Ending): ProcessEnd => ({
  code: ending.exit ?? null,
  signal: null,
  stopped: ending.outcome === "stopped",
  ...(ending.outcome === "budget" ? { budget: ending.limit } : {})
})
