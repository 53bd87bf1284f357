// A run's state in words, the same on the command line, the web pages and in watch's events:
// `exited 0`, `refused: refusal 4: ...`, `lost: its watcher is gone`, `waiting (manual)`, `started`.

import type { RunState, RunSummary } from "./RunStates.js"

export interface StateParts {
  readonly state: RunState
  readonly manual: boolean
  readonly outcome?: string | undefined
  readonly exit?: number | undefined
  readonly note?: string | undefined
  /** waiting for a node that has never answered any run */
  readonly node_silent?: boolean | undefined
}

export const stateWords = (r: StateParts): string =>
  r.state === "ended" ? (r.outcome === "exited" ? `exited ${r.exit ?? ""}`.trim() : `${r.outcome ?? "ended"}${r.note !== undefined ? `: ${r.note}` : ""}`)
  : r.state === "waiting" ? (r.manual ? "waiting (manual)" : r.node_silent === true ? "waiting: its node has never answered a run" : "waiting")
  : r.note !== undefined ? `${r.state}: ${r.note}` : r.state

export const stateWordsOf = (s: RunSummary): string =>
  stateWords({ state: s.state, manual: s.manual, outcome: s.ended?.outcome, exit: s.ended?.exit, note: s.ended?.note })
