// What a node's round acts on, in one place for the round (Round.ts, nodeMessagesAfter) and for
// the hook's cheap question (HookFast.ts), which loads no Effect code: this module imports none.
import type { Reading } from "../protocol/Envelope.js"

export interface ActedOn {
  readonly kind: "run" | "stop" | "publish"
  /** the run the message is about: the message itself for a run, its `re` for a stop or publish */
  readonly run: string
}

/**
 * A run addressed to `nodeUser`, or any stop or publish naming a run; else undefined. `hash` is the
 * message's own. With `toless` (a node on the served repository), also a run with no valid `to`:
 * the served repository's own node refuses it (DECISIONS 16), and which node that is the round
 * decides (TolessAnswerer.ts).
 */
export const actedOn = (reading: Reading, hash: string, nodeUser: string, toless = false): ActedOn | undefined => {
  if (reading._tag !== "Message") return undefined
  if (reading.kind === "run") return reading.to === nodeUser || (toless && reading.to === undefined) ? { kind: "run", run: hash } : undefined
  if ((reading.kind === "stop" || reading.kind === "publish") && reading.re !== undefined) return { kind: reading.kind, run: reading.re }
  return undefined
}
