import * as Effect from "effect/Effect"
import type { Caller } from "../tools/Tool.js"

// Who is calling from the command line or from ocx2-mcp: the user named (--user, or OCX_USER for
// MCP), else the user the clone named by the repository remembers, else the account's USER; with
// the capabilities that repository gives that user. Capabilities come from the repository alone,
// never from the caller's own say-so; without a repository the caller holds nothing, so tools
// that need a capability are refused rather than guessed at.

export interface CliIdentity {
  readonly repository: string | undefined
  readonly user: string | undefined
}

export const resolveCaller = (identity: CliIdentity, env: NodeJS.ProcessEnv = process.env): Effect.Effect<Caller> => {
  const account = env.USER !== undefined && env.USER !== "" ? env.USER : undefined
  const sandboxed = env.OCX_SANDBOX === "1"
  const repository = identity.repository
  if (repository === undefined) return Effect.succeed({ user: identity.user ?? account, capabilities: "", sandboxed })
  return Effect.promise(() => import("./repositoryCapabilities.js")).pipe(
    Effect.flatMap(({ identityIn }) => identityIn(repository, identity.user, account)),
    Effect.map(({ user, capabilities }) => ({ user, capabilities, sandboxed }))
  )
}
