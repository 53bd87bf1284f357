import * as Effect from "effect/Effect"

// Seed 001: "A write on the repository itself starts no hook, so when the run names the node
// of this host's hook, create has that node act on it at once, and its answer says what the
// node did (acted)"; stop likewise ends a running program or answers a run not started.
//
// THE HOOK POINT. create and stop call this right after their write lands on the served
// repository (never in a dry run, never after a refusal). It does nothing yet: the change that
// brings the hook (ocx2 hook --node USER) makes it run this host's node round when `to` is
// that node, and return what the node did, which create's and stop's answers carry as `acted`.

export interface WrittenOnServed {
  /** the served repository file */
  readonly repository: string
  /** the run the write is about */
  readonly run: string
  /** the run's node user (its `to`) */
  readonly to: string
  /** what was written: a run, or a stop */
  readonly kind: "run" | "stop"
}

/** What this host's node did at once, in words for the answer; undefined when it did nothing. */
export const nodeActsAtOnce = (_written: WrittenOnServed): Effect.Effect<string | undefined> => Effect.succeed(undefined)
