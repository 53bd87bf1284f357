/**
 * What stage, accept and rollback share as tools: the answer saying what is served, the root a
 * call acts on from where it is called (a terminal or the web page), the release rule applied to
 * the calling program, and the hook's link, which follows current.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { ReleaseRoot, type ReleaseState } from "../../../services/ReleaseRoot.js"
import { type Act, refuse } from "../../operations/Operations.js"
import { hookProgram, hookTarget, type ProgramRelease, releasePaths } from "../../release/ReleasePaths.js"
import { releaseRole, releaseRule, rootToActOn, servedNamesOf, verbs } from "../../release/Served.js"
import type { EntryPoint } from "../Tool.js"

const optionalName = (description: string) =>
  Schema.optionalWith(Schema.String.annotations({ description }), { exact: true })

/** Where the hook's link stands after the call. */
export const HookLink = Schema.Struct({
  link: Schema.String.annotations({ description: "ROOT/ocx2-hook" }),
  target: Schema.String.annotations({ description: "what the link points to, as written" }),
  present: Schema.Boolean.annotations({ description: "whether the served release holds the program the link reaches" })
})

export const RootInput = Schema.Struct({
  root: Schema.optionalWith(
    Schema.String.annotations({ description: "the release root (by default the root this program was released into; the web page takes none: it acts on its own)" }),
    { exact: true }
  )
})
export type RootInput = typeof RootInput.Type

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

/**
 * The root a tool acts on from where it is called: at a terminal (or through MCP) as rootToActOn
 * says; on the web always the root the page's own program was released into, a root in the
 * request refused (seed 001: the page shows the release root as the server's, taking none from
 * the request).
 */
export const rootOfCall = (tool: string, given: string | undefined, programPath: string | undefined, entryPoint: EntryPoint | undefined) =>
  entryPoint === "cgi" && given !== undefined
    ? refuse(`the web page takes no release root from the request (root ${JSON.stringify(given)}): ${tool} acts on the release root that serves the page; from a terminal, ocx2 ${tool} --root ROOT`)
    : rootToActOn(tool, entryPoint === "cgi" ? undefined : given, programPath)

/** The root accept or rollback acts on, and which release of it the calling program is. */
export interface ActingOn {
  readonly root: string
  /** The caller's release when it was released into this root; undefined for any other program. */
  readonly program: ProgramRelease | undefined
}

/**
 * The root accept or rollback acts on. At a terminal (or through MCP): the one given, or the one
 * the program was released into. On the web (the CGI): always the root the page's own program was
 * released into, read off its real path; a root in the request is refused, and a page whose
 * program is in no release root accepts and rolls back nothing.
 */
export const releaseToActOn = (
  tool: "accept" | "rollback",
  given: string | undefined,
  programPath: string | undefined,
  entryPoint: EntryPoint | undefined
) =>
  Effect.gen(function*() {
    const releases = yield* ReleaseRoot
    const program = yield* releases.releaseOfProgram(programPath)
    if (entryPoint === "cgi") {
      if (given !== undefined) {
        return yield* refuse(
          `the web page takes no release root from the request (root ${JSON.stringify(given)}): it ${verbs[tool].third} on the release root ` +
            `that serves it${program !== undefined ? `, ${program.root}` : ""}; from a terminal, ocx2 ${tool} --root ROOT`
        )
      }
      if (program === undefined) {
        return yield* refuse(
          `this page's program is not inside a release root (ROOT/staged/NAME/ocx2-cgi, reached through ocx2-cgi -> ` +
            `ROOT/current/ocx2-cgi), so it ${verbs[tool].third} nothing; from a terminal, ocx2 ${tool} --root ROOT`
        )
      }
      return { root: program.root, program } satisfies ActingOn
    }
    const root = yield* rootToActOn(tool, given, programPath)
    return { root, program: program !== undefined && program.root === root ? program : undefined } satisfies ActingOn
  })

/**
 * Refuses the call when the caller is a release of this root the rule does not let do it; notes
 * which release it is when it may.
 */
export const checkReleaseRule = (
  act: Act,
  action: "accept" | "rollback",
  acting: ActingOn,
  state: ReleaseState,
  entryPoint: EntryPoint | undefined
) =>
  Effect.gen(function*() {
    if (acting.program === undefined) return
    const served = servedNamesOf(state)
    const refused = releaseRule(action, acting.program, served, entryPoint === "cgi" ? "page" : "program")
    if (refused !== undefined) return yield* refuse(refused)
    act.note("release", `${acting.program.program} is ${releaseRole(acting.root, acting.program.name, served)}: it may ${action}`)
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
export const ensureHookLink = (act: Act, state: ReleaseState, served: string) =>
  Effect.gen(function*() {
    const releases = yield* ReleaseRoot
    const paths = releasePaths(state.root)
    if (state.hookLink === hookTarget) act.note("hook", `${paths.hook} already links to ${hookTarget}`)
    else {
      yield* act(
        "link",
        `${paths.hook} -> ${hookTarget}${state.hookLink !== undefined ? ` (was ${state.hookLink})` : ""}`,
        releases.switchLink(state.root, hookProgram, hookTarget)
      )
    }
    const present = yield* releases.hasProgram(state.root, served, hookProgram)
    act.note(
      "hook",
      present
        ? `current (${served}) holds ${hookProgram}: the hook runs it`
        : `current (${served}) holds no ${hookProgram}: ${paths.hook} dangles until a release that has one is served`
    )
  })
