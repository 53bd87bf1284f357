// The runs list's filters, pure: which runs a query keeps, newest first.

import type { RunState, RunSummary } from "./RunStates.js"

/** The states a filter may name: one of 2.13's (RunStates), or `open` (waiting or started) and `over` (any ended). */
export const stateFilters = ["waiting", "started", "ended", "refused", "lost", "open", "over"] as const
export type StateFilter = (typeof stateFilters)[number]

export interface RunsQuery {
  readonly node?: string | undefined
  readonly state?: StateFilter | undefined
  readonly sender?: string | undefined
  /** milliseconds: posted at or after */
  readonly since?: number | undefined
  /** milliseconds: posted before */
  readonly until?: number | undefined
  /** at most this many, the newest; 0 for every one */
  readonly limit: number
}

const stateMatches = (filter: StateFilter, state: RunState): boolean =>
  filter === "open" ? state === "waiting" || state === "started"
  : filter === "over" ? state === "ended" || state === "refused" || state === "lost"
  : filter === state

/** The runs the query keeps, newest first (server order, last received first), and how many matched in all. */
export const queryRuns = (runs: ReadonlyArray<RunSummary>, query: RunsQuery): { readonly runs: ReadonlyArray<RunSummary>; readonly total: number } => {
  const kept: Array<RunSummary> = []
  let total = 0
  for (let i = runs.length - 1; i >= 0; i--) {
    const run = runs[i]!
    if (query.node !== undefined && run.node !== query.node) continue
    if (query.sender !== undefined && run.sender !== query.sender) continue
    if (query.state !== undefined && !stateMatches(query.state, run.state)) continue
    if (query.since !== undefined && run.posted < query.since) continue
    if (query.until !== undefined && run.posted >= query.until) continue
    total++
    if (query.limit === 0 || kept.length < query.limit) kept.push(run)
  }
  return { runs: kept, total }
}

const units: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }

/**
 * A moment as a person writes it: an ISO 8601 date or time (`2026-12-01`, `2026-12-01T17:00Z`),
 * or how long ago (`90m`, `2h`, `7d`). A problem names what is wrong.
 */
export const parseMoment = (text: string, now: number): { readonly at: number } | { readonly problem: string } => {
  const trimmed = text.trim()
  const ago = /^(\d+)\s*([smhdw])$/.exec(trimmed)
  if (ago !== null) return { at: now - Number(ago[1]) * units[ago[2]!]! }
  if (/^\d{4}-\d{2}-\d{2}([T ][0-9:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(trimmed)) {
    // a date or time without a zone is UTC, as Fossil's own times are
    const zoned = /T|\s/.test(trimmed) && !/(Z|[+-]\d{2}:?\d{2})$/.test(trimmed) ? `${trimmed.replace(" ", "T")}Z` : trimmed
    const at = Date.parse(zoned)
    if (Number.isFinite(at)) return { at }
  }
  return { problem: `${JSON.stringify(text)} is neither an ISO 8601 date or time (2026-12-01, 2026-12-01T17:00Z) nor a time ago (90m, 2h, 7d)` }
}
