// 2.10 unversioned_files: each file `at`, within the workspace, sent as the unversioned file
// `as`, as the node user: only a regular file, never a link nor one leading out of the workspace.

import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Repository } from "../../services/Repository.js"
import { substitute, type Values } from "../protocol/Placeholders.js"
import type { Run } from "../protocol/Run.js"
import { isWithin } from "../sandbox/MountPlan.js"

export type Publication =
  | { readonly _tag: "Published"; readonly as: string; readonly at: string; readonly hash: string; readonly size: number }
  | { readonly _tag: "NotPublished"; readonly as: string; readonly at: string; readonly why: string }

/** The file's bytes, when it may be published; otherwise why not. Links are never followed. */
export const publishable = (at: string, workspace: string): { readonly content: Buffer } | { readonly why: string } => {
  if (!Path.isAbsolute(at)) return { why: "it is not an absolute path" }
  const given = Path.resolve(at)
  if (!isWithin(given, Path.resolve(workspace))) return { why: "it lies outside the workspace" }
  let real: string
  try {
    real = Fs.realpathSync(given)
  } catch {
    return { why: "there is no such file" }
  }
  // where the file would be if no link stood anywhere on its path inside the workspace
  const expected = Path.join(Fs.realpathSync(workspace), Path.relative(Path.resolve(workspace), given))
  if (real !== expected) return { why: "a link stands on its path" }
  // O_NOFOLLOW: a link swapped in after the check is refused by the kernel
  let fd: number
  try {
    fd = Fs.openSync(real, Fs.constants.O_RDONLY | Fs.constants.O_NOFOLLOW)
  } catch (e) {
    return { why: `it cannot be opened: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` }
  }
  try {
    if (!Fs.fstatSync(fd).isFile()) return { why: "it is not a regular file" }
    return { content: Fs.readFileSync(fd) }
  } finally {
    Fs.closeSync(fd)
  }
}

/** A file of a run's `unversioned_files` once its process has ended: its bytes, or why it is not published. */
export type PlannedFile =
  | { readonly _tag: "Publishable"; readonly as: string; readonly at: string; readonly content: Buffer }
  | { readonly _tag: "NotPublished"; readonly as: string; readonly at: string; readonly why: string }

/** What the files hold now, checked as 2.10 says; nothing is sent. */
export const planPublications = (run: Run, values: Values): ReadonlyArray<PlannedFile> =>
  run.process.unversioned_files.map((file) => {
    const atText = substitute(file.at, values)
    const asText = substitute(file.as, values)
    const at = atText._tag === "Right" ? atText.right : file.at
    const as = asText._tag === "Right" ? asText.right : file.as
    if (values.workspace === undefined) return { _tag: "NotPublished", as, at, why: "the run has no workspace" }
    const found = publishable(at, values.workspace)
    return "why" in found ? { _tag: "NotPublished", as, at, why: found.why } : { _tag: "Publishable", as, at, content: found.content }
  })

/** Publishes the files now, each tried once (a publish asked for again; a run's own go through its outbox). */
export const publish = (run: Run, values: Values, nodeUser: string) =>
  Effect.gen(function*() {
    const repository = yield* Repository
    const out: Array<Publication> = []
    for (const file of planPublications(run, values)) {
      if (file._tag === "NotPublished") {
        out.push(file)
        continue
      }
      const { as, at, content } = file
      const written = yield* repository.putUnversioned({ user: nodeUser, name: as, content }).pipe(Effect.either)
      out.push(written._tag === "Right"
        ? { _tag: "Published", as, at, hash: written.right.hash, size: content.length }
        : { _tag: "NotPublished", as, at, why: written.left.message })
    }
    return out
  })

/** The reply naming each file, with its hash or why not. */
export const publicationText = (publications: ReadonlyArray<Publication>): string =>
  [
    "Unversioned files:",
    "",
    ...publications.map((p) =>
      p._tag === "Published"
        ? `- ${p.as}: ${p.size} bytes, hash ${p.hash}`
        : `- ${p.as}: not published: ${p.why}`)
  ].join("\n")
