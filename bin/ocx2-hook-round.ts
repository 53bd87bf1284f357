// The hook's slow path as a bundle of its own: src/node/HookFast.ts loads it only when
// something that arrived may hold a message, so a receipt carrying no run costs little; the
// tools that have this host's node act at once (create, stop, run) load it the same way, and
// `ocx2 supervise` runs the node's supervisor from it (it is the round, resident). Each is
// given this host's live layers here, plain values across the bundle's boundary.

import * as Effect from "effect/Effect"
import * as LiveHosts from "../layers/LiveHosts.js"
import type { NodeConfig } from "../src/root/NodeConfig.js"
import { servedHookRound, servedPersonStart } from "../src/node/Round.js"
import * as Supervisor from "../src/node/Supervisor.js"

export const runHookRound = (config: NodeConfig) => Effect.runPromise(servedHookRound(config).pipe(Effect.provide(LiveHosts.layer)))

export const runPersonStart = (config: NodeConfig, run: string, dryRun: boolean): Promise<string> =>
  Effect.runPromise(servedPersonStart(config, run, dryRun).pipe(Effect.provide(LiveHosts.layer)))

export const runSupervisor = (argv: ReadonlyArray<string>, program: string | undefined = process.argv[1]): Promise<number> =>
  Effect.runPromise(Supervisor.runSupervisor(argv, LiveHosts.hosts, program))
