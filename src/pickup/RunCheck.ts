// The one check of a run (refusals 1 to 7, seed 2.5) that the round and the watcher both make,
// from the record and what the host and the server say; checkRun (src/protocol) decides.

import * as Effect from "effect/Effect"
import { Receipts } from "../../services/Receipts.js"
import { SandboxLauncher } from "../../services/SandboxLauncher.js"
import type { Message } from "../protocol/Envelope.js"
import { checkRun } from "../protocol/Refusals.js"
import { releasePaths } from "../release/ReleasePaths.js"
import { cloneUsers } from "../root/CloneUsers.js"
import { hostSettings, type NodeConfig } from "../root/NodeConfig.js"
import { processUserOf, type RunRecord } from "./RunRecord.js"

// the process user a run names is read off its record; the round, the watcher and the tools ask it here too
export { processUserOf }

export interface RunCheckOptions {
  /**
   * How the server is asked for the process user's capabilities: the watcher waits out an
   * outage (it holds the run), the round fails and is called again.
   */
  readonly askServer?: <A, E, R>(question: Effect.Effect<A, E, R>) => Effect.Effect<A, unknown, R>
  /** whether the clone users read are written back to the cache (the watcher leaves it to the round) */
  readonly keepCloneUsers?: boolean
}

/** The run of `record` (which holds one) checked as this node would start it. */
export const checkRecord = (config: NodeConfig, record: RunRecord & { readonly message: Message }, options: RunCheckOptions = {}) =>
  Effect.gen(function*() {
    const launcher = yield* SandboxLauncher
    const receipts = yield* Receipts
    const host = hostSettings(config, yield* launcher.capabilities)
    const processUser = processUserOf(record.message)
    const ask = options.askServer ?? (<A, E, R>(question: Effect.Effect<A, E, R>) => question)
    const processUserCapabilities = processUser === undefined ? undefined : yield* ask(receipts.capabilitiesOf(processUser))
    const clones = yield* cloneUsers(releasePaths(config.root).node, { keep: options.keepCloneUsers ?? true })
    return checkRun({
      message: record.message,
      runHash: record.hash,
      sender: record.sender,
      processUserCapabilities,
      cloneUsers: clones,
      host
    })
  })
