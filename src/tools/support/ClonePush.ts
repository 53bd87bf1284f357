// From a clone's checkout a tool's artifact is put into the clone and pushed, and the server
// takes it as sent by the user that pushed (seed 001, "Write a plain post"). `fossil push`
// exits 0 when the server refuses, so its `Error:` lines are the answer.

import type BetterSqlite3 from "better-sqlite3"
import { openDatabase } from "../../fossil/Sqlite.js"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import type { Artifact } from "../../fossil/Artifact.js"
import { writeBundle } from "../../fossil/Bundle.js"
import { errorLines, runFossil } from "../../fossil/Command.js"
import { CallRefused } from "../../operations/Operations.js"
import type { CloneFile } from "./RepositoryFile.js"

/** The artifact could not be put into the clone or pushed (the server's own refusal is `Refused`). */
export class PushFailed extends Schema.TaggedError<PushFailed>()("PushFailed", { message: Schema.String }) {}

const fossilIn = (clone: CloneFile, args: ReadonlyArray<string>) =>
  Effect.tryPromise({
    try: () => runFossil(args, { user: clone.user }),
    catch: (e) => new PushFailed({ message: `cannot run fossil: ${(e as Error).message}` })
  })

/** Puts the artifact into the clone (one receipt, queued to send) and pushes it as the clone's user. */
export const putAndPush = (clone: CloneFile, artifact: Artifact): Effect.Effect<string, CallRefused | PushFailed> =>
  Effect.acquireUseRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-push-"))),
    (dir) =>
      Effect.gen(function*() {
        const bundle = Path.join(dir, "artifact.bundle")
        yield* Effect.try({ try: () => writeBundle(bundle, clone.projectCode, [artifact]), catch: (e) => new PushFailed({ message: `cannot write a bundle: ${(e as Error).message}` }) })
        const imported = yield* fossilIn(clone, ["bundle", "import", bundle, "--publish", "-R", clone.path])
        if (imported.code !== 0) return yield* Effect.fail(new PushFailed({ message: `fossil bundle import into ${clone.path}: ${(imported.stderr || imported.stdout).trim()}` }))
        // queued in `unsent`, the push carries it in one round trip (fossil-mechanics 1.3 b)
        yield* Effect.try({
          try: () => {
            const db = openDatabase(clone.path, { fileMustExist: true })
            try {
              db.prepare("INSERT OR IGNORE INTO unsent SELECT rid FROM blob WHERE uuid = ?").run(artifact.hash)
            } finally {
              db.close()
            }
          },
          catch: (e) => new PushFailed({ message: `cannot queue ${artifact.hash} in ${clone.path}: ${(e as Error).message}` })
        })
        const pushed = yield* fossilIn(clone, ["push", "-R", clone.path])
        const out = `${pushed.stdout}\n${pushed.stderr}`
        const errors = errorLines(out)
        if (errors.length > 0) {
          return yield* Effect.fail(new CallRefused({ message: `the server ${clone.url} refused the push as ${clone.user}: ${errors.join("; ")}` }))
        }
        if (pushed.code !== 0) return yield* Effect.fail(new PushFailed({ message: `fossil push exited ${String(pushed.code)}: ${out.trim().slice(-300)}` }))
        return out
      }),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )
