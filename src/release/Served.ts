// Which release serves a call: the root a program acts on, the release rule (which release of a
// root may accept or roll back), and the words the pages show of the release that serves them.

import * as Effect from "effect/Effect"
import { ReleaseRoot, type ReleaseState } from "../../services/ReleaseRoot.js"
import { CallRefused, refuse } from "../operations/Operations.js"
import { type ProgramRelease, releasePaths } from "./ReleasePaths.js"

/** The root to act on: the one given, or the one this program was released into. */
export const rootToActOn = (tool: string, given: string | undefined, programPath: string | undefined) =>
  Effect.gen(function*() {
    const releases = yield* ReleaseRoot
    if (given !== undefined) {
      return yield* releases.resolveRoot(given).pipe(
        Effect.mapError((e) => new CallRefused({ message: `the release root ${given} cannot be used: ${e.reason}` }))
      )
    }
    const root = yield* releases.rootOfProgram(programPath)
    if (root === undefined) {
      return yield* refuse(
        `${tool} needs --root ROOT: this program (${programPath ?? "unknown"}) was not released into a root (ROOT/staged/NAME/PROGRAM)`
      )
    }
    return root
  })

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

export const verbs = {
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

