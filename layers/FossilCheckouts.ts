/**
 * Checkouts through the `fossil` program, as root's account runs it (the watcher's): each command
 * a failure when it cannot start, exits non-zero, or prints an `Error:` line (Fossil's sync
 * commands exit 0 on some errors). A check-in's name is resolved in a read-only `fossil sql`, not
 * `fossil whatis`, which, like every fossil command that opens the repository for writing, ends
 * with `PRAGMA optimize` and so takes the write lock to store statistics (docs/locks.md).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { Checkouts, FossilCommandFailed, type CheckoutsService, UnpackFailed } from "../services/Checkouts.js"
import { AmbiguousName, NotFound } from "../services/Repository.js"
import { runFossil } from "../src/fossil/Command.js"

const fossil = (args: ReadonlyArray<string>, cwd?: string): Effect.Effect<string, FossilCommandFailed> =>
  Effect.tryPromise({
    try: () => runFossil(args, { user: "root", ...(cwd !== undefined ? { cwd } : {}) }),
    catch: (e) => new FossilCommandFailed({ reason: (e as Error).message })
  }).pipe(
    Effect.flatMap((r) =>
      r.code === 0 && !/^Error:/m.test(r.stdout)
        ? Effect.succeed(r.stdout)
        : Effect.fail(new FossilCommandFailed({ reason: (r.stderr.trim() || r.stdout.trim() || `exit ${r.code}`).split("\n")[0]! })))
  )

export const checkouts: CheckoutsService = {
  resolveCheckin: (repository, name) =>
    Effect.gen(function*() {
      const literal = `'${name.replace(/'/g, "''")}'`
      const out = yield* fossil([
        "sql", "--readonly", "-R", repository,
        `SELECT r.rid, (SELECT uuid FROM blob WHERE rid = r.rid) FROM (SELECT symbolic_name_to_rid(${literal}, 'ci') AS rid) r`
      ])
      // Fossil's answer: -1 for a prefix of more than one, NULL for none
      if (/^-1,/m.test(out)) return yield* new AmbiguousName({ what: "check-in", name })
      const hash = /^\d+,'([0-9a-f]{40,64})'$/m.exec(out)?.[1]
      if (hash === undefined) return yield* new NotFound({ what: "check-in", name })
      return hash
    }),

  exportFiles: (repository, checkin, into) =>
    Effect.acquireUseRelease(
      Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-files-"))),
      (dir) => {
        const tarball = Path.join(dir, "files.tar.gz")
        return fossil(["tarball", checkin, tarball, "--name", "tree", "-R", repository]).pipe(
          Effect.zipRight(Effect.try({
            try: () => {
              Fs.mkdirSync(into, { recursive: true })
              ChildProcess.execFileSync("tar", ["-xzf", tarball, "-C", into, "--strip-components=1", "--no-same-owner"], { stdio: "pipe" })
            },
            catch: (e) => new UnpackFailed({ into, reason: (e as Error).message })
          }))
        )
      },
      (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
    ),

  setPassword: (repository, user, password) =>
    Effect.asVoid(fossil(["user", "password", user, password, "-R", repository])),

  clone: (url, into) => Effect.asVoid(fossil(["clone", "--save-http-password", url, into])),

  open: (repository, checkin, into) => Effect.asVoid(fossil(["open", repository, checkin, "--workdir", into, "--force"], into))
}

export const layer: Layer.Layer<Checkouts> = Layer.succeed(Checkouts, checkouts)
