// 2.13 read for people: each run's state from the replies that count (2.4), as one list. Pure:
// the messages come from src/fossil/ReadMessages.ts, the filters from the runs tool.

import type { MessageRow } from "../fossil/ReadMessages.js"
import { tally, type Reply, type Tally } from "../protocol/Replies.js"
import type { EndedContent } from "../protocol/Outcomes.js"
import type { Sender } from "../protocol/Senders.js"

/**
 * A run's state. 2.13's none and waiting are both `waiting` (`manual` says for whom); an ended
 * run is `refused` or `lost` when its outcome is, since those are what a person looks for, and
 * `ended` otherwise (exited, stopped, budget, or an outcome this reader does not know).
 */
export type RunState = "waiting" | "started" | "ended" | "refused" | "lost"
export const runStates: ReadonlyArray<RunState> = ["waiting", "started", "ended", "refused", "lost"]

export interface RunSummary {
  readonly run: string
  /** the node user the run is for (its `to`) */
  readonly node: string
  /** who the served repository received it from; on a clone, who it says wrote it */
  readonly sender: string | undefined
  readonly place: MessageRow["place"]
  readonly private: boolean
  readonly objective: string | undefined
  readonly processUser: string | undefined
  readonly manual: boolean
  readonly session: boolean
  readonly state: RunState
  readonly ended: EndedContent | undefined
  /** milliseconds */
  readonly posted: number
  readonly startedAt: number | undefined
  readonly endedAt: number | undefined
  readonly startedHash: string | undefined
  readonly endedHash: string | undefined
  readonly stops: number
}

const stateOf = (counted: Tally): RunState => {
  if (counted.ended !== undefined) {
    const outcome = counted.ended.content.outcome
    return outcome === "refused" ? "refused" : outcome === "lost" ? "lost" : "ended"
  }
  return counted.started !== undefined ? "started" : "waiting"
}

const field = (content: unknown, ...path: ReadonlyArray<string>): unknown => {
  let at = content
  for (const key of path) {
    if (typeof at !== "object" || at === null || Array.isArray(at)) return undefined
    at = (at as Record<string, unknown>)[key]
  }
  return at
}
const text = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined)

/**
 * Every run among the messages, oldest first, each with what counts of its replies.
 * `senderOf` says who sent a message as this reader may know it (the receipt on the served
 * repository; on a clone, the writer's word), `capabilitiesOf` what that login may do.
 */
export const summarizeRuns = (
  rows: ReadonlyArray<MessageRow>,
  senderOf: (row: MessageRow) => string | undefined,
  capabilitiesOf: (login: string) => string
): ReadonlyArray<RunSummary> => {
  const repliesTo = new Map<string, Array<MessageRow>>()
  for (const row of rows) {
    const re = row.message.re
    if (re === undefined) continue
    const list = repliesTo.get(re)
    if (list === undefined) repliesTo.set(re, [row])
    else list.push(row)
  }
  const sender = (row: MessageRow): Sender | undefined => {
    const login = senderOf(row)
    return login === undefined ? undefined : { login, capabilities: capabilitiesOf(login) }
  }
  const summaries: Array<RunSummary> = []
  for (const row of rows) {
    const message = row.message
    if (message.kind !== "run" || message.to === undefined) continue
    const replies = repliesTo.get(row.hash) ?? []
    const counted = tally(
      { hash: row.hash, to: message.to, rcvid: row.rcvid, rid: row.rid },
      replies.map((r): Reply => ({ hash: r.hash, rcvid: r.rcvid, rid: r.rid, message: r.message, sender: sender(r) }))
    )
    const at = (hash: string | undefined) => (hash === undefined ? undefined : replies.find((r) => r.hash === hash)?.time)
    summaries.push({
      run: row.hash,
      node: message.to,
      sender: senderOf(row),
      place: row.place,
      private: row.private,
      objective: text(field(message.content, "objective")),
      processUser: text(field(message.content, "process", "user")),
      manual: field(message.content, "process", "manual") === true,
      session: field(message.content, "process", "session") === true,
      state: stateOf(counted),
      ended: counted.ended?.content,
      posted: row.time,
      startedAt: at(counted.started?.hash),
      endedAt: at(counted.ended?.hash),
      startedHash: counted.started?.hash,
      endedHash: counted.ended?.hash,
      stops: counted.stops.length
    })
  }
  return summaries
}
