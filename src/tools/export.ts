// export (seed 001, "Fetch the git export"): the served repository's git export brought up to
// date now, under the export's lock (src/git/ExportRun.ts), as the hook does after each check-in.

import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { openDatabase } from "../fossil/Sqlite.js"
import { exportUser } from "../git/ExportHook.js"
import { readExportState, readMirrorState } from "../git/ExportFiles.js"
import { exportNow } from "../git/ExportRun.js"
import { canonicalRepository } from "../root/HookFiles.js"
import { CallRefused, finish, recording, refuse } from "../operations/Operations.js"
import { defineTool } from "./Tool.js"
import { needsSetup } from "./support/Permissions.js"

const optionalText = (description: string) => Schema.optionalWith(Schema.String.annotations({ description }), { exact: true })

export const ExportInput = Schema.Struct({
  mirror: optionalText(
    "a directory for the export (an absolute path; absent, empty, or an export already): the first export, or a move; " +
      "by default where fossil git export last wrote"
  ),
  mainBranch: optionalText("the git branch trunk is exported as (fossil git export --mainbranch); by default the export's own"),
  autopush: optionalText(
    "a git remote each export is then pushed to (git push --mirror): an http, https, ssh or git URL, USER@HOST:PATH, or an " +
      "absolute path; off stops it; by default as it was"
  )
})
export type ExportInput = typeof ExportInput.Type

export const ExportOutput = Schema.Struct({
  repository: Schema.String,
  mirror: Schema.String.annotations({ description: "the git repository the export writes (its .git), and git fetch reads" }),
  awaits: Schema.String.annotations({ description: "what awaits export, as fossil git status says it (before this export)" }),
  autopush: Schema.String.annotations({ description: "where each export is pushed (fossil git export --autopush), or off" }),
  exported: Schema.optionalWith(Schema.String.annotations({ description: "what this export did, in Fossil's words" }), { exact: true }),
  lastExport: Schema.optionalWith(Schema.Struct({ at: Schema.String, said: Schema.String }), { exact: true }),
  lastFailure: Schema.optionalWith(Schema.Struct({ at: Schema.String, said: Schema.String }), { exact: true })
})
export type ExportOutput = typeof ExportOutput.Type

/** A new mirror directory: absolute, in a directory that exists, and absent, empty, or an export already. */
const checkMirror = (mirror: string): string | undefined => {
  if (!Path.isAbsolute(mirror)) return `mirror must be an absolute path, not ${mirror}`
  const parent = Path.dirname(mirror)
  let parentReal: string
  try {
    parentReal = Fs.realpathSync(parent)
  } catch {
    return `mirror ${mirror}: its directory ${parent} does not exist`
  }
  const resolved = Path.join(parentReal, Path.basename(mirror))
  let entries: ReadonlyArray<string>
  try {
    if (!Fs.lstatSync(resolved).isDirectory()) return `mirror ${resolved} exists and is not a directory`
    entries = Fs.readdirSync(resolved)
  } catch {
    return undefined // absent: fossil git export makes it
  }
  if (entries.length === 0 || entries.includes(".mirror_state")) return undefined
  return `mirror ${resolved} is neither empty nor a git export (it has no .mirror_state): give an empty or new directory`
}

export const gitExport = defineTool({
  name: "export",
  summary: "Bring the git export up to date now",
  description:
    "Exports the served repository (the global --repository) into its git export now, with fossil git export, where it " +
    "last wrote (its last-git-export-repo) or, for the first export or a move, into --mirror DIR; one export at a time " +
    "(it waits for one already running). The hook does the same after each receipt that brought a check-in. A failing " +
    "export is refused with what Fossil said, and kept as the last failure. The dry run says what awaits export, the " +
    "autopush, the last export and the last failure, and changes nothing. The export is served read-only to git clone " +
    "from the extension root's git program. Needs Fossil's setup capability (s).",
  input: ExportInput,
  positional: [],
  output: ExportOutput,
  allow: needsSetup("export"),
  offeredBy: ["cli", "cgi"], notOfferedBecause: "a sandbox has no served repository",
  handle: (input, context) => {
    const act = recording(context.dryRun)
    return finish(act, Effect.gen(function*() {
      if (context.repository === undefined) {
        return yield* refuse("export acts on the served repository: name it with --repository REPO before the tool's name")
      }
      const repository = canonicalRepository(context.repository)
      if (!Fs.existsSync(repository)) return yield* refuse(`no repository file ${repository}`)
      if (input.mirror !== undefined) {
        const wrong = checkMirror(input.mirror)
        if (wrong !== undefined) return yield* refuse(wrong)
      }
      if (input.autopush !== undefined && !/^(off|(https?|ssh|git):\/\/\S+|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:\S*|\/\S*)$/.test(input.autopush)) {
        return yield* refuse(`autopush ${input.autopush} is not a git remote: an http, https, ssh or git URL, USER@HOST:PATH, an absolute path, or off`)
      }
      if (input.mainBranch !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._/-]*$/.test(input.mainBranch)) {
        return yield* refuse(`mainBranch ${input.mainBranch} is not a git branch name of letters, digits, ., _, / and -`)
      }
      const status = yield* Effect.try({
        try: () => readMirrorState(repository, (path, readonly) => openDatabase(path, { readonly, fileMustExist: true })),
        catch: (e) => new CallRefused({ message: `the repository or its export's state cannot be read: ${(e as Error).message}` })
      })
      const current = status.mirror
      const mirror = input.mirror ?? current
      if (mirror === undefined) {
        return yield* refuse(`${repository} has no git export yet: give the directory for the first one with --mirror DIR`)
      }
      const state = readExportState(repository)
      const moving = input.mirror !== undefined && Path.resolve(input.mirror) !== current
      const awaits = moving
        ? "every check-in (an export into a new directory)"
        : status.awaiting === 0 ? "up-to-date" : `${status.awaiting} check-in${status.awaiting === 1 ? "" : "s"} awaiting export`
      const autopush = input.autopush ?? status.autopush ?? "off"
      act.note("awaits", `${awaits}, in ${mirror}`)
      act.note("autopush", autopush)
      if (state.failed !== undefined) act.note("last failure", `${state.failed.at}: ${state.failed.said}`)
      const args = ["git", "export", ...(input.mirror !== undefined ? [input.mirror] : []), ...(input.mainBranch !== undefined ? ["--mainbranch", input.mainBranch] : []), ...(input.autopush !== undefined ? ["--autopush", input.autopush, ...(input.autopush !== "off" ? ["--force"] : [])] : []), "-R", repository]
      const result = yield* act("export", `fossil ${args.join(" ")}, holding ${Path.basename(repository)}'s export lock`,
        Effect.promise(() => exportNow(repository, {
          ...(input.mirror !== undefined ? { mirror: input.mirror } : {}),
          ...(input.mainBranch !== undefined ? { mainBranch: input.mainBranch } : {}),
          ...(input.autopush !== undefined ? { autopush: input.autopush } : {}),
          waitSeconds: 120,
          user: exportUser()
        })))
      const output: ExportOutput = {
        repository, mirror, awaits, autopush,
        ...(state.exported !== undefined ? { lastExport: { at: state.exported.at, said: state.exported.said } } : {}),
        ...(state.failed !== undefined ? { lastFailure: { at: state.failed.at, said: state.failed.said } } : {})
      }
      if (result === undefined) return output
      switch (result._tag) {
        case "Exported": return { ...output, exported: result.said === "" ? "nothing new" : result.said }
        case "Current": return { ...output, exported: "nothing new" }
        case "Queued": return { ...output, exported: "left to the export waiting" }
        case "Busy": return yield* refuse(`another export of ${repository} held its lock for ${result.waited} s: try again`)
        case "NoMirror": return yield* refuse(`${repository} has no git export yet: give the directory for the first one with --mirror DIR`)
        case "Failed": return yield* refuse(`fossil git export into ${result.mirror} failed: ${result.said}`)
      }
    }))
  }
})

