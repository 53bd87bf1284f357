import * as Effect from "effect/Effect"
import { ReleaseRoot } from "../../services/ReleaseRoot.js"
import { finish, recording, refuse } from "../operations/Operations.js"
import { hookTarget, releasePaths } from "../release/ReleasePaths.js"
import { needsSetup } from "./support/Permissions.js"
import { checkReleaseRule, ensureHookLink, releaseToActOn, RootInput, Served, servedAfter } from "./support/ReleaseCall.js"
import { defineTool, type ToolContext } from "./Tool.js"

export const AcceptOutput = Served

/** accept: serve next as current, keeping the release it replaces as previous. */
export const acceptRelease = (input: RootInput, context: ToolContext, programPath: string | undefined) => {
  const act = recording(context.dryRun)
  return finish(
    act,
    Effect.scoped(Effect.gen(function*() {
      const releases = yield* ReleaseRoot
      const acting = yield* releaseToActOn("accept", input.root, programPath, context.entryPoint)
      const root = acting.root
      const paths = releasePaths(root)
      if (!context.dryRun) yield* releases.lock(root)
      const state = yield* releases.read(root)
      // who may accept: read under the lock, so the links it judges are the ones it switches
      yield* checkReleaseRule(act, "accept", acting, state, context.entryPoint)
      const next = state.next
      if (next === undefined) {
        return yield* refuse(`nothing is staged as next (${paths.next}): stage a checkout first`)
      }
      if (!next.present) {
        return yield* refuse(`next names ${next.name}, but ${paths.release(next.name)} is gone: stage it again`)
      }
      const current = state.current?.name
      let previous = state.previous?.name
      if (current === next.name) {
        act.note("accept", `${next.name} is already served as current: nothing to switch`)
      } else {
        if (current !== undefined) {
          yield* act(
            "link",
            `${paths.previous} -> ${paths.linkTarget(current)} (the release ${next.name} replaces)`,
            releases.switchLink(root, "previous", paths.linkTarget(current))
          )
          previous = current
        }
        yield* act(
          "link",
          `${paths.current} -> ${paths.linkTarget(next.name)}${
            current !== undefined ? ` (was ${paths.linkTarget(current)})` : " (the first release this root serves)"
          }`,
          releases.switchLink(root, "current", paths.linkTarget(next.name))
        )
      }
      yield* ensureHookLink(act, state, next.name)
      return yield* servedAfter(state, { current: next.name, previous, hookLink: hookTarget })
    }))
  )
}

export const accept = defineTool({
  name: "accept",
  summary: "Serve the next release as current",
  description:
    "Serves the release staged as next as the active release (ROOT/current), and keeps the release it replaces as " +
    "previous (ROOT/previous); next stays as it is, so the pre-release page runs the same release until the next " +
    "stage. Accepting what is already current changes nothing. ROOT/ocx2-hook links to current/ocx2-hook, so the " +
    "hook follows every accept and rollback. Each link is switched atomically, so a hook starting meanwhile runs the " +
    "old release or the new one. Refused when nothing is staged as next. Needs Fossil's setup capability (s). " +
    "Once a release is served, only the active release accepts (ROOT/current/ocx2, the page ocx2-cgi); the " +
    "pre-release candidate (ROOT/next/ocx2, the page ocx2-cgi-next) accepts only a node's first release, and a " +
    "program of any other release of the root is refused. --root ROOT defaults to the root this program was released " +
    "into; a program released into no root (a checkout's) accepts with --root ROOT from a terminal, to recover. The web " +
    "page acts on the release root that serves it and takes none from the request.",
  input: RootInput,
  positional: [],
  output: AcceptOutput,
  allow: needsSetup("accept"),
  destructive: true,
  handle: (input, context) => acceptRelease(input, context, process.argv[1])
})
