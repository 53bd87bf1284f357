import * as Path from "node:path"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { ReleaseRoot } from "../../services/ReleaseRoot.js"
import { OperationsLog } from "../tools/Operations.js"
import type { ToolContext } from "../tools/Tool.js"
import { finish } from "./finish.js"
import { releaseNameOf, releasePaths } from "./ReleasePaths.js"
import { Refusal, rootToActOn, servedAfter, servedFields } from "./Served.js"
import { smokeArguments } from "./smokeAnswer.js"

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
  const log = new OperationsLog(context.dryRun)
  return finish(
    log,
    Effect.scoped(Effect.gen(function*() {
      const releases = yield* ReleaseRoot
      const root = yield* rootToActOn("stage", input.root, programPath)
      const paths = releasePaths(root)
      const checkout = Path.resolve(input.checkout)
      const checkin = yield* releases.checkinOf(checkout)
      const name = releaseNameOf(checkin.hash)
      log.note("checkout", `${checkout} is a ${checkin.vcs} checkout of check-in ${checkin.hash}: its release is ${name}`)
      if (checkin.modified) {
        log.note("checkout", `${checkout} holds changes not checked in: ${name} is built from them as they stand`)
      }
      if (!context.dryRun) yield* releases.lock(root)
      const state = yield* releases.read(root)
      for (const link of ["current", "previous"] as const) {
        if (state[link]?.name === name) {
          return yield* Effect.fail(
            new Refusal(`${name} is served as ${link} (${paths.release(name)}); a served release is never replaced`)
          )
        }
      }
      const plan = yield* releases.planCopy(checkout)
      const carried = plan.packages.map((p) => p.relativeDir)
      log.note(
        "plan",
        plan.externals.length === 0
          ? "the build bundles everything: the release carries no packages"
          : `the build leaves ${plan.externals.join(", ")} out of its bundles: the release carries ${carried.join(", ")}`
      )

      yield* log.perform(
        "gate",
        `npm run -s gate in ${checkout}, its output written to ${paths.gateLog} as it runs`,
        releases.runScript(checkout, "gate", paths.gateLog)
      )
      yield* log.perform(
        "build",
        `npm run -s build in ${checkout}, its output written to ${paths.buildLog}`,
        releases.runScript(checkout, "build", paths.buildLog)
      )
      const partial = paths.partial(name)
      const programs = yield* log.perform(
        "copy",
        `each ${Path.join(checkout, "dist")}/PROGRAM.mjs as the executable PROGRAM, a package.json of type module, release.json${
          carried.length > 0 ? ` and ${carried.join(", ")}` : ""
        } into ${partial}`,
        releases.assemble(checkout, plan, partial, { name, checkin, buildLog: paths.buildLog })
      )
      yield* log.perform(
        "smoke",
        `${Path.join(partial, "ocx2")} ${smokeArguments.join(" ")} must answer as the list tool answers; its output written to ${paths.smokeLog}`,
        releases.smoke(partial, paths.smokeLog).pipe(Effect.tapError(() => releases.remove(partial)))
      )
      // an earlier copy of this check-in, served as next or not at all, is replaced whole
      const replaced = state.next?.name === name || (yield* releases.hasProgram(root, name, ""))
      yield* log.perform(
        "place",
        `${partial} becomes ${paths.release(name)}${replaced ? ", replacing the copy staged before" : ""}`,
        releases.place(partial, paths.release(name))
      )
      yield* log.perform(
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
