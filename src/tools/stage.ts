import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Path from "node:path"
import * as Schema from "effect/Schema"
import { ReleaseRoot } from "../../services/ReleaseRoot.js"
import { type Act, finish, recording, refuse } from "../operations/Operations.js"
import { releaseNameOf, releasePaths } from "../release/ReleasePaths.js"
import { rootToActOn } from "../release/Served.js"
import { smokeArguments } from "../release/SmokeAnswer.js"
import { needsSetup } from "./support/Permissions.js"
import { servedAfter, servedFields } from "./support/ReleaseCall.js"
import { defineTool, type ToolContext } from "./Tool.js"

export const StageInput = Schema.Struct({
  checkout: Schema.String.annotations({ description: "the git or Fossil checkout to check, build and stage" }),
  root: Schema.optionalWith(
    Schema.String.annotations({ description: "the release root (by default the root this program was released into)" }),
    { exact: true }
  )
})
export type StageInput = typeof StageInput.Type

export const StageOutput = Schema.Struct({
  ...servedFields,
  staged: Schema.String.annotations({ description: "the release staged: its check-in's first twelve hex digits" }),
  checkin: Schema.String.annotations({ description: "the checkout's check-in, in full" }),
  vcs: Schema.Literal("git", "fossil"),
  modified: Schema.Boolean.annotations({ description: "whether the checkout held changes not checked in" }),
  programs: Schema.optionalWith(Schema.Array(Schema.String), { exact: true })
})
export type StageOutput = typeof StageOutput.Type

/** stage CHECKOUT: gate, build, copy, smoke, and offer the copy as next. */
export const stageRelease = (input: StageInput, context: ToolContext, programPath: string | undefined) => {
  const recorded = recording(context.dryRun)
  const { act, printed } = narrated(recorded, context.dryRun ? undefined : context.steps)
  return finish(
    act,
    Effect.scoped(Effect.gen(function*() {
      const releases = yield* ReleaseRoot
      const root = yield* rootToActOn("stage", input.root, programPath)
      const paths = releasePaths(root)
      const checkout = Path.resolve(input.checkout)
      const checkin = yield* releases.checkinOf(checkout)
      const name = releaseNameOf(checkin.hash)
      act.note("checkout", `${checkout} is a ${checkin.vcs} checkout of check-in ${checkin.hash}: its release is ${name}`)
      if (checkin.modified) {
        act.note("checkout", `${checkout} holds changes not checked in: ${name} is built from them as they stand`)
      }
      if (!context.dryRun) yield* releases.lock(root)
      const state = yield* releases.read(root)
      for (const link of ["current", "previous"] as const) {
        if (state[link]?.name === name) {
          return yield* refuse(`${name} is served as ${link} (${paths.release(name)}); a served release is never replaced`)
        }
      }
      const plan = yield* releases.planCopy(checkout)
      const carried = plan.packages.map((p) => p.relativeDir)
      act.note(
        "plan",
        plan.externals.length === 0
          ? "the build bundles everything: the release carries no packages"
          : `the build leaves ${plan.externals.join(", ")} out of its bundles: the release carries ${carried.join(", ")}`
      )

      yield* act(
        "gate",
        `npm run -s gate in ${checkout}, its output written to ${paths.gateLog} as it runs`,
        releases.runScript(checkout, "gate", paths.gateLog, printed("gate"))
      )
      yield* act(
        "build",
        `npm run -s build in ${checkout}, its output written to ${paths.buildLog}`,
        releases.runScript(checkout, "build", paths.buildLog, printed("build"))
      )
      const partial = paths.partial(name)
      const programs = yield* act(
        "copy",
        `each ${Path.join(checkout, "dist")}/PROGRAM.mjs as the executable PROGRAM, a package.json of type module, release.json${
          carried.length > 0 ? ` and ${carried.join(", ")}` : ""
        } into ${partial}`,
        releases.assemble(checkout, plan, partial, { name, checkin, buildLog: paths.buildLog })
      )
      yield* act(
        "smoke",
        `${Path.join(partial, "ocx2")} ${smokeArguments.join(" ")} must answer as the list tool answers; its output written to ${paths.smokeLog}`,
        releases.smoke(partial, paths.smokeLog).pipe(Effect.tapError(() => releases.remove(partial)))
      )
      // an earlier copy of this check-in, served as next or not at all, is replaced whole
      const replaced = state.next?.name === name || (yield* releases.hasProgram(root, name, ""))
      yield* act(
        "place",
        `${partial} becomes ${paths.release(name)}${replaced ? ", replacing the copy staged before" : ""}`,
        releases.place(partial, paths.release(name))
      )
      yield* act(
        "link",
        `${paths.next} -> ${paths.linkTarget(name)}${state.next !== undefined ? ` (was ${paths.linkTarget(state.next.name)})` : ""}`,
        releases.switchLink(root, "next", paths.linkTarget(name))
      )
      const served = yield* servedAfter(state, { next: name })
      const output: StageOutput = {
        ...served,
        staged: name,
        checkin: checkin.hash,
        vcs: checkin.vcs,
        modified: checkin.modified,
        ...(programs !== undefined ? { programs } : {})
      }
      return output
    }))
  )
}

/**
 * Stage's steps said as they happen, through `say` (the command line's standard error): each
 * note, each step's start and its end with its time, and what the gate and the build print, line
 * by line with the step's name before it. The answer's operations log is the same with or without.
 */
const narrated = (act: Act, say: ((text: string) => void) | undefined) => {
  if (say === undefined) return { act, printed: (_step: string) => undefined }
  const open = new Map<string, { rest: string }>()
  const printed = (step: string) => (text: string) => {
    const lines = open.get(step) ?? { rest: "" }
    open.set(step, lines)
    const parts = (lines.rest + text).split("\n")
    lines.rest = parts.pop() ?? ""
    for (const line of parts) say(`  ${step} | ${line}\n`)
  }
  const flush = (step: string) => {
    const lines = open.get(step)
    if (lines !== undefined && lines.rest !== "") say(`  ${step} | ${lines.rest}\n`)
    open.delete(step)
  }
  const seconds = (since: number) => `${((Date.now() - since) / 1000).toFixed(1)} s`
  const told = <A, E, R>(op: string, detail: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A | undefined, E, R> =>
    act(op, detail, Effect.suspend(() => {
      const started = Date.now()
      say(`stage: ${op}: ${detail}\n`)
      return Effect.onExit(effect, (exit) =>
        Effect.sync(() => {
          flush(op)
          say(Exit.isSuccess(exit) ? `stage: ${op} done (${seconds(started)})\n` : `stage: ${op} stopped after ${seconds(started)}\n`)
        }))
    }))
  return {
    act: Object.assign(told, {
      note: (op: string, detail: string) => {
        say(`stage: ${op}: ${detail}\n`)
        act.note(op, detail)
      },
      operations: act.operations,
      dryRun: act.dryRun
    }) as Act,
    printed
  }
}

export const stage = defineTool({
  name: "stage",
  summary: "Check, build and stage a checkout as the next release",
  description:
    "Runs the checkout's own checks (npm run -s gate, written to ROOT/staged/gate.log as they run), builds its " +
    "programs (npm run -s build, into ROOT/staged/build.log), copies each dist/PROGRAM.mjs as the executable " +
    "PROGRAM, with the packages the bundles leave external, into ROOT/staged/NAME (NAME: the first twelve hex digits " +
    "of the checkout's git or Fossil check-in), smokes that copy (ocx2 --json list, into ROOT/staged/smoke.log) and " +
    "offers it as next (ROOT/next). A failing gate, build or smoke leaves next as it was and names its log. A release " +
    "served as current or previous is never replaced. Runs the checkout's own code, so it needs Fossil's setup " +
    "capability (s) and is not offered on the web. --root ROOT defaults to the root this program was released into.",
  input: StageInput,
  positional: ["checkout"],
  output: StageOutput,
  allow: needsSetup("stage"),
  offeredBy: ["cli", "mcp"], notOfferedBecause: "it runs the checkout's own code",
  handle: (input, context) => stageRelease(input, context, process.argv[1])
})
