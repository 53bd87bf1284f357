import * as Effect from "effect/Effect"
import type { Caller } from "../tools/Tool.js"

// Who is calling from the command line: the user --user names (or the account's USER), with
// the capabilities the repository named by --repository gives that user. Without a repository
// the caller holds nothing, so tools that need a capability are refused rather than guessed at.

export interface CliIdentity {
  readonly repository: string | undefined
  readonly user: string | undefined
}

export const resolveCaller = (identity: CliIdentity): Effect.Effect<Caller> => {
  const user = identity.user ?? process.env.USER
  const sandboxed = process.env.OCX_SANDBOX === "1"
  const repository = identity.repository
  if (repository === undefined || user === undefined) return Effect.succeed({ user, capabilities: "", sandboxed })
  return Effect.promise(() => import("./repositoryCapabilities.js")).pipe(
    Effect.flatMap(({ capabilitiesOf }) => capabilitiesOf(repository, user)),
    Effect.map((capabilities) => ({ user, capabilities, sandboxed }))
  )
}
