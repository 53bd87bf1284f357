import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as BwrapSandbox from "../../../layers/BwrapSandbox.js"
import { hostSettings, repositoryName } from "../../node/NodeConfig.js"
import { type HostSettings, providesAll } from "../../protocol/Refusals.js"
import { rootOfProgram } from "../../release/ReleasePaths.js"
import { resolveLoose } from "../../sandbox/mountPlan.js"

// What create checks a run against: this host as its node would see it (2.14).
//
// Reading: when this program runs from a release root (ROOT/staged/NAME/PROGRAM), the host's
// own settings are used (capability-R.json, unconfined, what the sandbox can provide, OCX's
// own paths). Otherwise no node's settings are known, and the check is permissive where it
// would have to guess: refusals 5 and 6 hold for nothing, ROOT is /, and OCX's own paths are
// the served repository file and its side files; refusals 1 to 4 and 7 apply as written.

export const releaseRootOfThisProgram = (): string | undefined => {
  const program = process.argv[1]
  if (program === undefined) return undefined
  try {
    return rootOfProgram(Fs.realpathSync(program))
  } catch {
    return undefined
  }
}

export const hostForCheck = (repository: string, nodeUser: string): Effect.Effect<HostSettings> =>
  Effect.sync(() => {
    const root = releaseRootOfThisProgram()
    if (root !== undefined) {
      return hostSettings(
        { root, repository, nodeUser, serverUrl: undefined, passwordsFile: undefined },
        Effect.runSync(BwrapSandbox.make().capabilities)
      )
    }
    const program = process.argv[1]
    return {
      root: "/",
      nodeUser,
      repositoryName: repositoryName(repository),
      releaseDir: program === undefined ? "/" : Path.dirname(resolveLoose(program)),
      capabilityR: undefined,
      unconfined: true,
      provides: providesAll,
      ownPaths: [repository, `${repository}-journal`, `${repository}-wal`, `${repository}-shm`],
      resolve: resolveLoose
    } satisfies HostSettings
  })
