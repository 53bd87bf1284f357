import * as Effect from "effect/Effect"
import { ReleaseRoot } from "../../services/ReleaseRoot.js"
import { finish, recording, refuse } from "../operations/Operations.js"
import { hookTarget, releasePaths } from "../release/ReleasePaths.js"
import { needsSetup } from "./support/Permissions.js"
import { checkReleaseRule, ensureHookLink, releaseToActOn, RootInput, Served, servedAfter } from "./support/ReleaseCall.js"
import { defineTool, type ToolContext } from "./Tool.js"

export const RollbackOutput = Served

/**
 * rollback: serve previous again. The release it replaces becomes previous, so a second
 * rollback undoes the first (current and previous trade places each time).
 */
export const rollbackRelease = (input: RootInput, context: ToolContext, programPath: string | undefined) => {
  const act = recording(context.dryRun)
  return finish(
    act,
    Effect.scoped(Effect.gen(function*() {
      const releases = yield* ReleaseRoot
      const acting = yield* releaseToActOn("rollback", input.root, programPath, context.entryPoint)
      const root = acting.root
      const paths = releasePaths(root)
      if (!context.dryRun) yield* releases.lock(root)
      const state = yield* releases.read(root)
      // who may rollback: read under the lock, so the links it judges are the ones it switches
      yield* checkReleaseRule(act, "rollback", acting, state, context.entryPoint)
      const previous = state.previous
      if (previous === undefined) {
        return yield* refuse(`there is no previous release to roll back to (${paths.previous})`)
      }
      if (!previous.present) {
        return yield* refuse(`previous names ${previous.name}, but ${paths.release(previous.name)} is gone: there is nothing to roll back to`)
      }
      const current = state.current?.name
      if (current === undefined) {
        return yield* refuse(`${paths.current} serves no release to roll back from: accept one instead`)
      }
      // current first: the switch that matters to a hook starting now is one atomic rename
      yield* act(
        "link",
        `${paths.current} -> ${paths.linkTarget(previous.name)} (was ${paths.linkTarget(current)})`,
        releases.switchLink(root, "current", paths.linkTarget(previous.name))
      )
      yield* act(
        "link",
        `${paths.previous} -> ${paths.linkTarget(current)} (the release rolled back, so a second rollback undoes this one)`,
        releases.switchLink(root, "previous", paths.linkTarget(current))
      )
      yield* ensureHookLink(act, state, previous.name)
      return yield* servedAfter(state, { current: previous.name, previous: current, hookLink: hookTarget })
    }))
  )
}

export const rollback = defineTool({
  name: "rollback",
  summary: "Serve the previous release again",
  description:
    "Serves the previous release (ROOT/previous) as current again, and keeps the release it replaces as previous: " +
    "current and previous trade places, so a second rollback undoes the first. The hook (ROOT/ocx2-hook, a link to " +
    "current/ocx2-hook) follows. Each link is switched atomically. Refused when there is no previous release. Needs " +
    "Fossil's setup capability (s). Only the active release (current) or the pre-release candidate (next) rolls back; " +
    "a program of any other release of the root is refused. --root ROOT defaults to the root this program was released " +
    "into; a program released into no root (a checkout's) rolls back with --root ROOT from a terminal, to recover. The " +
    "web page acts on the release root that serves it and takes none from the request.",
  input: RootInput,
  positional: [],
  output: RollbackOutput,
  allow: needsSetup("rollback"),
  destructive: true,
  handle: (input, context) => rollbackRelease(input, context, process.argv[1])
})
