import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { ReleaseRoot, type ReleaseState } from "../../services/ReleaseRoot.js"
import type { OperationsLog } from "../tools/Operations.js"
import { hookProgram, hookTarget, releasePaths } from "./ReleasePaths.js"

// What stage, accept and rollback share: the root they act on, the answer saying what is
// served, and the hook's link, which follows current.

/** A refusal: the call was not made, and this says why. */
export class Refusal {
  readonly _tag = "Refusal"
  constructor(readonly message: string) {}
}

const optionalName = (description: string) =>
  Schema.optionalWith(Schema.String.annotations({ description }), { exact: true })

/** Where the hook's link stands after the call. */
export const HookLink = Schema.Struct({
  link: Schema.String.annotations({ description: "ROOT/ocx2-hook" }),
  target: Schema.String.annotations({ description: "what the link points to, as written" }),
  present: Schema.Boolean.annotations({ description: "whether the served release holds the program the link reaches" })
})

/** What the root serves after the call (in a dry run, what it would serve). */
export const servedFields = {
  root: Schema.String.annotations({ description: "the release root" }),
  current: optionalName("the release served as current (the active release)"),
  previous: optionalName("the release kept as previous, which rollback serves again"),
  next: optionalName("the release offered as next (the pre-release candidate)"),
  hook: Schema.optionalWith(HookLink, { exact: true })
}
export const Served = Schema.Struct(servedFields)
export type Served = typeof Served.Type

/** The root to act on: the one given, or the one this program was released into. */
export const rootToActOn = (tool: string, given: string | undefined, programPath: string | undefined) =>
  Effect.gen(function*() {
    const releases = yield* ReleaseRoot
    if (given !== undefined) {
      return yield* releases.resolveRoot(given).pipe(
        Effect.mapError((e) => new Refusal(`the release root ${given} cannot be used: ${e.reason}`))
      )
    }
    const root = yield* releases.rootOfProgram(programPath)
    if (root === undefined) {
      return yield* Effect.fail(
        new Refusal(
          `${tool} needs --root ROOT: this program (${programPath ?? "unknown"}) was not released into a root (ROOT/staged/NAME/PROGRAM)`
        )
      )
    }
    return root
  })

/** The answer's account of what is served, from the state after the call. */
export const servedAfter = (
  state: ReleaseState,
  after: { readonly current?: string | undefined; readonly previous?: string | undefined; readonly next?: string | undefined; readonly hookLink?: string | undefined }
) =>
  Effect.gen(function*() {
    const releases = yield* ReleaseRoot
    const current = "current" in after ? after.current : state.current?.name
    const previous = "previous" in after ? after.previous : state.previous?.name
    const next = "next" in after ? after.next : state.next?.name
    const hookLink = "hookLink" in after ? after.hookLink : state.hookLink
    const present = hookLink === hookTarget && current !== undefined
      ? yield* releases.hasProgram(state.root, current, hookProgram)
      : false
    const served: Served = {
      root: state.root,
      ...(current !== undefined ? { current } : {}),
      ...(previous !== undefined ? { previous } : {}),
      ...(next !== undefined ? { next } : {}),
      ...(hookLink !== undefined ? { hook: { link: releasePaths(state.root).hook, target: hookLink, present } } : {})
    }
    return served
  })

/**
 * Makes ROOT/ocx2-hook link to current/ocx2-hook (once made, it follows every accept and
 * rollback), and notes whether the release now served holds the hook's program.
 */
export const ensureHookLink = (log: OperationsLog, state: ReleaseState, served: string) =>
  Effect.gen(function*() {
    const releases = yield* ReleaseRoot
    const paths = releasePaths(state.root)
    if (state.hookLink === hookTarget) log.note("hook", `${paths.hook} already links to ${hookTarget}`)
    else {
      yield* log.perform(
        "link",
        `${paths.hook} -> ${hookTarget}${state.hookLink !== undefined ? ` (was ${state.hookLink})` : ""}`,
        releases.switchLink(state.root, hookProgram, hookTarget)
      )
    }
    const present = yield* releases.hasProgram(state.root, served, hookProgram)
    log.note(
      "hook",
      present
        ? `current (${served}) holds ${hookProgram}: the hook runs it`
        : `current (${served}) holds no ${hookProgram}: ${paths.hook} dangles until a release that has one is served`
    )
  })
