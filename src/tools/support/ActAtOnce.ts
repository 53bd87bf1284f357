// Seed 001: "A write on the repository itself starts no hook, so when the run names the node
// of this host's hook, create has that node act on it at once, and its answer says what the
// node did (acted)"; stop likewise ends a running program or answers a run not started.
// create and stop call this right after their write lands on the served repository (never in
// a dry run, never after a refusal).

import * as Effect from "effect/Effect"
import * as Path from "node:path"
import { nodeOf } from "../../root/HookFiles.js"
import { readHooks, runsOcx2Hook } from "../../node/HookInstall.js"
import type { NodeConfig } from "../../root/NodeConfig.js"
import { hookRound } from "../../Bundles.js"

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

/** The round: the hook's round bundle beside this program, or that bundle's source. */
export const loadRound = () => hookRound.load()

/** The release root of the ocx2 hook installed on the repository: ROOT/ocx2-hook --log ROOT/node/hook.log %R. */
const hookRootOf = (repository: string) =>
  Effect.map(readHooks(repository), (hooks) => {
    for (const hook of hooks) {
      if (hook.type !== "after-receive" || !runsOcx2Hook(hook.command)) continue
      const log = /--log\s+'?([^'\s]+)'?/.exec(hook.command)?.[1]
      if (log !== undefined && Path.basename(log) === "hook.log") return Path.dirname(Path.dirname(log))
    }
    return undefined
  })

/** The node of this host's hook on the served repository, as its NodeConfig; undefined when there is none. */
export const thisHostNode = (repository: string) =>
  Effect.gen(function*() {
    const root = yield* hookRootOf(repository)
    if (root === undefined) return undefined
    const node = nodeOf(root, repository)
    if (node === undefined) return undefined
    const config: NodeConfig = {
      root,
      repository: Path.resolve(repository),
      nodeUser: node.user,
      serverUrl: node.serverUrl,
      passwordsFile: undefined
    }
    return config
  })

/** What this host's node did at once, in words for the answer; undefined when this host's node is not the run's. */
export const nodeActsAtOnce = (written: WrittenOnServed): Effect.Effect<string | undefined> =>
  Effect.gen(function*() {
    const config = yield* thisHostNode(written.repository)
    if (config === undefined || config.nodeUser !== written.to) return undefined
    const node = { user: config.nodeUser }
    // the round module is loaded only here: it brings the watcher's hand-off and the sandbox
    const { runHookRound } = yield* Effect.promise(loadRound)
    const result = yield* Effect.tryPromise(() => runHookRound(config))
    const decision = result.decisions.find((d) => d.run === written.run)
    return decision === undefined
      ? `this host's node ${node.user} found nothing to do for it`
      : `this host's node ${node.user}: ${decision.action}`
  }).pipe(Effect.catchAll((e) => Effect.succeed(`this host's node could not act at once: ${String((e as { message?: unknown }).message ?? e)}; its hook will`)))
