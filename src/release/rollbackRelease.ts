import * as Effect from "effect/Effect"
import { ReleaseRoot } from "../../services/ReleaseRoot.js"
import { OperationsLog } from "../tools/Operations.js"
import type { ToolContext } from "../tools/Tool.js"
import type { RootInput } from "./acceptRelease.js"
import { finish } from "./finish.js"
import { hookTarget, releasePaths } from "./ReleasePaths.js"
import { checkReleaseRule, ensureHookLink, Refusal, releaseToActOn, Served, servedAfter } from "./Served.js"

export const RollbackOutput = Served

/**
 * rollback: serve previous again. The release it replaces becomes previous, so a second
 * rollback undoes the first (current and previous trade places each time).
 */
export const rollbackRelease = (input: RootInput, context: ToolContext, programPath: string | undefined) => {
  const log = new OperationsLog(context.dryRun)
  return finish(
    log,
    Effect.scoped(Effect.gen(function*() {
      const releases = yield* ReleaseRoot
      const acting = yield* releaseToActOn("rollback", input.root, programPath, context.entryPoint)
      const root = acting.root
      const paths = releasePaths(root)
      if (!context.dryRun) yield* releases.lock(root)
      const state = yield* releases.read(root)
      // who may rollback: read under the lock, so the links it judges are the ones it switches
      yield* checkReleaseRule(log, "rollback", acting, state, context.entryPoint)
      const previous = state.previous
      if (previous === undefined) {
        return yield* Effect.fail(new Refusal(`there is no previous release to roll back to (${paths.previous})`))
      }
      if (!previous.present) {
        return yield* Effect.fail(
          new Refusal(`previous names ${previous.name}, but ${paths.release(previous.name)} is gone: there is nothing to roll back to`)
        )
      }
      const current = state.current?.name
      if (current === undefined) {
        return yield* Effect.fail(new Refusal(`${paths.current} serves no release to roll back from: accept one instead`))
      }
      // current first: the switch that matters to a hook starting now is one atomic rename
      yield* log.perform(
        "link",
        `${paths.current} -> ${paths.linkTarget(previous.name)} (was ${paths.linkTarget(current)})`,
        releases.switchLink(root, "current", paths.linkTarget(previous.name))
      )
      yield* log.perform(
        "link",
        `${paths.previous} -> ${paths.linkTarget(current)} (the release rolled back, so a second rollback undoes this one)`,
        releases.switchLink(root, "previous", paths.linkTarget(current))
      )
      yield* ensureHookLink(log, state, previous.name)
      return yield* servedAfter(state, { current: previous.name, previous: current, hookLink: hookTarget })
    }))
  )
}
