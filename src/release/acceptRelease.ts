import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { ReleaseRoot } from "../../services/ReleaseRoot.js"
import { OperationsLog } from "../tools/Operations.js"
import type { ToolContext } from "../tools/Tool.js"
import { finish } from "./finish.js"
import { hookTarget, releasePaths } from "./ReleasePaths.js"
import { checkReleaseRule, ensureHookLink, Refusal, releaseToActOn, Served, servedAfter } from "./Served.js"

export const RootInput = Schema.Struct({
  root: Schema.optionalWith(
    Schema.String.annotations({ description: "the release root (by default the root this program was released into; the web page takes none: it acts on its own)" }),
    { exact: true }
  )
})
export type RootInput = typeof RootInput.Type

export const AcceptOutput = Served

/** accept: serve next as current, keeping the release it replaces as previous. */
export const acceptRelease = (input: RootInput, context: ToolContext, programPath: string | undefined) => {
  const log = new OperationsLog(context.dryRun)
  return finish(
    log,
    Effect.scoped(Effect.gen(function*() {
      const releases = yield* ReleaseRoot
      const acting = yield* releaseToActOn("accept", input.root, programPath, context.entryPoint)
      const root = acting.root
      const paths = releasePaths(root)
      if (!context.dryRun) yield* releases.lock(root)
      const state = yield* releases.read(root)
      // who may accept: read under the lock, so the links it judges are the ones it switches
      yield* checkReleaseRule(log, "accept", acting, state, context.entryPoint)
      const next = state.next
      if (next === undefined) {
        return yield* Effect.fail(new Refusal(`nothing is staged as next (${paths.next}): stage a checkout first`))
      }
      if (!next.present) {
        return yield* Effect.fail(new Refusal(`next names ${next.name}, but ${paths.release(next.name)} is gone: stage it again`))
      }
      const current = state.current?.name
      let previous = state.previous?.name
      if (current === next.name) {
        log.note("accept", `${next.name} is already served as current: nothing to switch`)
      } else {
        if (current !== undefined) {
          yield* log.perform(
            "link",
            `${paths.previous} -> ${paths.linkTarget(current)} (the release ${next.name} replaces)`,
            releases.switchLink(root, "previous", paths.linkTarget(current))
          )
          previous = current
        }
        yield* log.perform(
          "link",
          `${paths.current} -> ${paths.linkTarget(next.name)}${
            current !== undefined ? ` (was ${paths.linkTarget(current)})` : " (the first release this root serves)"
          }`,
          releases.switchLink(root, "current", paths.linkTarget(next.name))
        )
      }
      yield* ensureHookLink(log, state, next.name)
      return yield* servedAfter(state, { current: next.name, previous, hookLink: hookTarget })
    }))
  )
}
