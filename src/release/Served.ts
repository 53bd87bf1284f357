import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { ReleaseRoot, type ReleaseState } from "../../services/ReleaseRoot.js"
import type { OperationsLog } from "../tools/Operations.js"
import type { EntryPoint } from "../tools/Tool.js"
import { hookProgram, hookTarget, type ProgramRelease, releasePaths } from "./ReleasePaths.js"

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

/**
 * The root a tool acts on from where it is called: at a terminal (or through MCP) as rootToActOn
 * says; on the web always the root the page's own program was released into, a root in the
 * request refused (seed 001: the page shows the release root as the server's, taking none from
 * the request).
 */
export const rootOfCall = (tool: string, given: string | undefined, programPath: string | undefined, entryPoint: EntryPoint | undefined) =>
  entryPoint === "cgi" && given !== undefined
    ? Effect.fail(new Refusal(`the web page takes no release root from the request (root ${JSON.stringify(given)}): ${tool} acts on the release root that serves the page; from a terminal, ocx2 ${tool} --root ROOT`))
    : rootToActOn(tool, entryPoint === "cgi" ? undefined : given, programPath)

/** What a root's served links name, as the release rule reads them. */
export interface ServedNames {
  readonly current?: string | undefined
  readonly next?: string | undefined
  readonly previous?: string | undefined
}

export const servedNamesOf = (state: ReleaseState): ServedNames => ({
  current: state.current?.name,
  next: state.next?.name,
  previous: state.previous?.name
})

/** What release NAME is to its root, in words: "the active release NAME of ROOT", ... */
export const releaseRole = (root: string, name: string, served: ServedNames): string => {
  if (name === served.current) {
    return `the active release ${name} of ${root} (current${name === served.next ? ", and next" : ""})`
  }
  if (name === served.next) return `the pre-release candidate ${name} of ${root} (next)`
  if (name === served.previous) return `release ${name} of ${root}, kept as previous (not the active release)`
  return `release ${name} of ${root}, staged but served as neither current nor next`
}

const verbs = {
  accept: { base: "accept", third: "accepts" },
  rollback: { base: "roll back", third: "rolls back" }
} as const

/** Who calls: a program run at a terminal (or by a program), or the web page a release serves. */
export type Calling = "program" | "page"

/**
 * The release rule (seed 001, "Stage, accept or roll back a release"), for a program released into
 * the root it acts on: once a release is served (ROOT/current), only the active release accepts;
 * the pre-release candidate (next) accepts only a node's first release, when none is current yet
 * (trusted on first use); either rolls back. A program of any other release of this root (previous,
 * or a stale staged one) does neither. A program released into no root (a checkout's, given --root
 * at a terminal, to recover) is not asked: the rule is for the releases themselves.
 *
 * Returns undefined when the call may go on; otherwise the refusal, saying which release the
 * caller is and what the rule is.
 */
export const releaseRule = (
  action: "accept" | "rollback",
  caller: ProgramRelease,
  served: ServedNames,
  calling: Calling = "program"
): string | undefined => {
  const { name, root } = caller
  const self = `${calling === "page" ? "this page" : "this program"} (${caller.program}) is ${releaseRole(root, name, served)}`
  const recover = `; from a terminal, a checkout's ocx2 (released into no root) can ${verbs[action].base} with --root ${root} to recover`
  const asCurrent = calling === "page"
    ? `on the active release's page (ocx2-cgi)`
    : `as ${releasePaths(root).current}/${caller.program} ${action}`
  if (action === "accept") {
    if (served.current !== undefined) {
      if (name === served.current) return undefined
      return `${self}: once a release is served, only the active release (current, ${served.current}) accepts, ${asCurrent}; ` +
        `the pre-release candidate accepts only a node's first release, and another release of this root never${recover}`
    }
    if (name === served.next) return undefined
    return served.next === undefined
      ? `${self}: no release is served yet and none is staged as next; stage one, and its own program (next) accepts it`
      : `${self}: no release is served yet, so only the pre-release candidate (next, ${served.next}) accepts this node's ` +
        `first release (trusted on first use)${recover}`
  }
  if (name === served.current || name === served.next) return undefined
  return `${self}: only the active release (current, ${served.current ?? "none served"}) or the pre-release candidate ` +
    `(next, ${served.next ?? "none staged"}) rolls back, ${asCurrent}${recover}`
}

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
        return yield* Effect.fail(
          new Refusal(
            `the web page takes no release root from the request (root ${JSON.stringify(given)}): it ${verbs[tool].third} on the release root ` +
              `that serves it${program !== undefined ? `, ${program.root}` : ""}; from a terminal, ocx2 ${tool} --root ROOT`
          )
        )
      }
      if (program === undefined) {
        return yield* Effect.fail(
          new Refusal(
            `this page's program is not inside a release root (ROOT/staged/NAME/ocx2-cgi, reached through ocx2-cgi -> ` +
              `ROOT/current/ocx2-cgi), so it ${verbs[tool].third} nothing; from a terminal, ocx2 ${tool} --root ROOT`
          )
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
  log: OperationsLog,
  action: "accept" | "rollback",
  acting: ActingOn,
  state: ReleaseState,
  entryPoint: EntryPoint | undefined
) =>
  Effect.gen(function*() {
    if (acting.program === undefined) return
    const served = servedNamesOf(state)
    const refused = releaseRule(action, acting.program, served, entryPoint === "cgi" ? "page" : "program")
    if (refused !== undefined) return yield* Effect.fail(new Refusal(refused))
    log.note("release", `${acting.program.program} is ${releaseRole(acting.root, acting.program.name, served)}: it may ${action}`)
  })

/** The release that serves the web pages (the CGI's program), and what its root serves. */
export interface ServingRelease extends ProgramRelease {
  readonly served: ServedNames
}

/** Which release the program at `programPath` is, and what its root serves; undefined outside a root. */
export const servingOf = (programPath: string | undefined) =>
  Effect.gen(function*() {
    const releases = yield* ReleaseRoot
    const program = yield* releases.releaseOfProgram(programPath)
    if (program === undefined) return undefined
    const served = yield* releases.read(program.root).pipe(
      Effect.map(servedNamesOf),
      Effect.orElseSucceed((): ServedNames => ({}))
    )
    return { ...program, served } satisfies ServingRelease
  })

/** One line for the pages: which release serves them, as the pre-release candidate or the active one. */
export const servingLine = (serving: ServingRelease | undefined): string => {
  if (serving === undefined) {
    return "These pages are served by a program that is not inside a release root: they accept and roll back nothing."
  }
  const { name, root, served } = serving
  const ofRoot = `of ${root}, the server's release root`
  if (name === served.current) return `This page is the active release ${name} ${ofRoot}.`
  if (name === served.next) {
    return `This page is the pre-release candidate ${name} ${ofRoot}; ` + (served.current !== undefined
      ? `the active release is ${served.current}, and only it accepts.`
      : "no release is served yet, so this page may accept this node's first release.")
  }
  return `This page is release ${name} ${ofRoot}, ${name === served.previous ? "kept as previous" : "staged"} but served as ` +
    `neither current nor next: it accepts and rolls back nothing.`
}

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
