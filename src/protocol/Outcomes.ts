// 2.12: the outcomes of `ended`, with the parts each requires.
import type { LimitName } from "./Run.js"

export const outcomes = ["refused", "stopped", "exited", "budget", "lost"] as const
export type Outcome = (typeof outcomes)[number]

export const isKnownOutcome = (outcome: string): outcome is Outcome =>
  (outcomes as ReadonlyArray<string>).includes(outcome)

/** What each outcome requires of `exit` and `note` (2.12). */
export const outcomeTable: Readonly<
  Record<Outcome, { readonly exit: "required" | "absent"; readonly note: "required" | "absent"; readonly when: string }>
> = {
  refused: { exit: "absent", note: "required", when: "a refusal of 2.14 holds" },
  stopped: { exit: "absent", note: "absent", when: "a stop ended it, or came first" },
  exited: { exit: "required", note: "absent", when: "its process exited by itself" },
  budget: { exit: "absent", note: "required", when: "past a limit" },
  lost: { exit: "absent", note: "required", when: "OCX on the run's clone found its counted started but not the run in its care" }
}

/** The content of an `ended` (2.1). `outcome` is any text: a reader takes an unknown one as ended. */
export interface EndedContent {
  readonly outcome: string
  readonly exit?: number
  readonly note?: string
}

export const endedRefused = (note: string): EndedContent => ({ outcome: "refused", note })
export const endedStopped: EndedContent = { outcome: "stopped" }
export const endedBudget = (limit: LimitName): EndedContent => ({ outcome: "budget", note: limit })
export const endedLost = (why: string): EndedContent => ({ outcome: "lost", note: why })

/** `exit` is the code, or 128 plus N for signal N. */
export const exitStatus = (how: { readonly code: number } | { readonly signal: number }): number =>
  "code" in how ? how.code : 128 + how.signal

export const endedExited = (how: { readonly code: number } | { readonly signal: number }): EndedContent => ({
  outcome: "exited",
  exit: exitStatus(how)
})

/** A process's end as the watcher sees it. */
export interface ProcessEnd {
  /** the exit code, or null when a signal ended it */
  readonly code: number | null
  readonly signal: number | null
  /** the limit it went past, if any */
  readonly budget?: LimitName
  /** whether a stop (or OCX on a stop) ended it */
  readonly stopped: boolean
}

/** The ended of a run whose process ended (2.12): a stop first, then a limit, then the exit. */
export const endedOfProcess = (end: ProcessEnd): EndedContent =>
  end.stopped
    ? endedStopped
    : end.budget !== undefined
      ? endedBudget(end.budget)
      : endedExited(end.code !== null ? { code: end.code } : { signal: end.signal ?? 0 })

/** A problem with a known outcome's parts, or undefined when it is as 2.12 requires. */
export const endedProblem = (ended: EndedContent): string | undefined => {
  if (!isKnownOutcome(ended.outcome)) return undefined
  const rule = outcomeTable[ended.outcome]
  if (rule.exit === "required" && ended.exit === undefined) return `${ended.outcome} requires exit`
  if (rule.exit === "absent" && ended.exit !== undefined) return `${ended.outcome} has no exit`
  if (rule.note === "required" && (ended.note === undefined || ended.note === "")) return `${ended.outcome} requires a note`
  if (rule.note === "absent" && ended.note !== undefined) return `${ended.outcome} has no note`
  return undefined
}
