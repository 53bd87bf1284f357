// Who is calling from the command line or from ocx2-mcp: the user named (--user, or OCX_USER for
// MCP), else the user the clone named by the repository remembers, else the account's USER; with
// the capabilities that repository gives that user. Capabilities come from the repository alone,
// never from the caller's own say-so; without a repository the caller holds nothing, so tools
// that need a capability are refused rather than guessed at.

import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { Caller } from "../../tools/Tool.js"

export interface CliIdentity {
  readonly repository: string | undefined
  readonly user: string | undefined
}

const accountOf = (env: NodeJS.ProcessEnv) => (env.USER !== undefined && env.USER !== "" ? env.USER : undefined)

export const resolveCaller = (identity: CliIdentity, env: NodeJS.ProcessEnv = process.env): Effect.Effect<Caller> =>
  Effect.map(resolveCallerOrProblem(identity, env, { strict: false }), (found) => found.caller)

/**
 * Why the repository file named cannot be acted on, naming it: missing, not a file, or not
 * readable; undefined when it is a readable file (whether it holds a repository is read later).
 */
export const repositoryFileProblem = (repository: string): string | undefined => {
  const path = Path.resolve(repository)
  let stat: Fs.Stats
  try {
    stat = Fs.statSync(path)
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    return code === "ENOENT" || code === "ENOTDIR" ? `no repository file ${path}` : `the repository file ${path} cannot be read: ${(e as Error).message}`
  }
  if (stat.isDirectory()) return `the repository file ${path} is a directory, not a repository`
  try {
    Fs.accessSync(path, Fs.constants.R_OK)
  } catch (e) {
    return `the repository file ${path} cannot be read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`
  }
  return undefined
}

/**
 * The caller, as resolveCaller finds them; with `strict` (the command line), a repository named
 * that is missing, cannot be read or holds no Fossil repository is the problem, naming the file,
 * instead of a caller holding nothing there; so is a --user the served repository does not have
 * (with `unknownUser` alone, that only: MCP's OCX_USER).
 */
export const resolveCallerOrProblem = (
  identity: CliIdentity,
  env: NodeJS.ProcessEnv = process.env,
  options: { readonly strict: boolean; readonly unknownUser?: boolean } = { strict: true }
): Effect.Effect<{ readonly caller: Caller; readonly problem?: string }> => {
  const account = accountOf(env)
  const sandboxed = env.OCX_SANDBOX === "1"
  const repository = identity.repository
  if (repository === undefined) return Effect.succeed({ caller: { user: identity.user ?? account, capabilities: "", sandboxed } })
  const fileProblem = options.strict ? repositoryFileProblem(repository) : undefined
  if (fileProblem !== undefined) return Effect.succeed({ caller: { user: identity.user ?? account, capabilities: "", sandboxed }, problem: fileProblem })
  return Effect.promise(() => import("./RepositoryCapabilities.js")).pipe(
    Effect.flatMap(({ identityIn }) => identityIn(repository, identity.user, account)),
    Effect.map(({ user, capabilities, unreadable, unknownUser }) => {
      const problem = options.strict ? unreadable ?? unknownUser : options.unknownUser === true ? unknownUser : undefined
      return { caller: { user, capabilities, sandboxed }, ...(problem !== undefined ? { problem } : {}) }
    })
  )
}
