// What a round decided for one run, in words: the round's answer lists one per run it acted on,
// and the node's recovery at its start says the same of each open run it decided again.

export interface RunDecision {
  readonly run: string
  /** what was done (or in a dry run would be), in words */
  readonly action: string
}
