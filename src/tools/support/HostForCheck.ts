// What create checks a run against (seed 001: "checked as a node checks it, and refused, writing
// nothing, if a node would refuse it as written").
//
// When the run names the node of this host's hook on the served repository (the after-receive
// hook's command names its ROOT; ROOT/node/node.json names the node user of each repository's
// hook), the host is that node's, read by the very code the node reads it with: its ROOT, its
// capability-R.json and unconfined, what its sandbox can provide (its kept measure,
// ROOT/node/capabilities.json), OCX's own paths, and which host paths exist. checkRun then judges
// every refusal as the node will.
//
// A run for another node (a clone's, on another host) is judged as far as this host can see:
// refusals 1 to 4, and 7's rules that hold on every host; its host's settings (refusals 5 and 6,
// what lies within its ROOT, which paths exist there) are left to that node. ROOT is then a
// stand-in (/), and OCX's own paths are the served repository file and its side files.

import * as Effect from "effect/Effect"
import * as Path from "node:path"
import { Hosts } from "../../../services/Hosts.js"
import { SandboxLauncher } from "../../../services/SandboxLauncher.js"
import { hostSettings, repositoryName } from "../../root/NodeConfig.js"
import { type HostSettings, providesAll } from "../../protocol/Refusals.js"
import { releasePaths } from "../../release/ReleasePaths.js"
import { resolveLoose } from "../../sandbox/MountPlan.js"
import { thisHostNode } from "./ActAtOnce.js"

export interface CheckHost {
  readonly host: HostSettings
  /** whose check it is, in words for the operations log */
  readonly whose: string
}

export const hostForCheck = (repository: string, nodeUser: string): Effect.Effect<CheckHost, never, Hosts> =>
  Effect.gen(function*() {
    const node = yield* thisHostNode(repository).pipe(Effect.orElseSucceed(() => undefined))
    if (node !== undefined && node.nodeUser === nodeUser) {
      const hosts = yield* Hosts
      const capabilities = yield* Effect.flatMap(SandboxLauncher, (sandbox) => sandbox.capabilities).pipe(Effect.provide(hosts.sandbox(node.root)))
      return {
        host: hostSettings(node, capabilities),
        whose: `checked as this host's node ${nodeUser} checks it, on the hook's root ${node.root}`
      }
    }
    const program = process.argv[1]
    return {
      host: {
        root: "/",
        rootKnown: false,
        nodeUser,
        repositoryName: repositoryName(repository),
        releaseDir: program === undefined ? "/" : Path.dirname(resolveLoose(program)),
        capabilityR: undefined,
        unconfined: true,
        provides: providesAll,
        ownPaths: [repository, `${repository}-journal`, `${repository}-wal`, `${repository}-shm`],
        resolve: resolveLoose
      },
      whose: `${nodeUser} is not the node of this host's hook${node === undefined ? " (no ocx2 hook is installed on it)" : ` (${node.nodeUser}, on ${node.root})`}: ` +
        "refusals 5 and 6, what lies within its ROOT and which paths exist on its host are left to it"
    }
  })
