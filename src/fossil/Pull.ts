// A clone learns what the server holds only by pulling, and what a node writes from a clone is
// pushed to the server, never into the clone: a record read from the clone is current only just
// after a pull. So the clone node pulls at the start of each call, and every read of a run's
// record on a clone's host (the round deciding a run, recovery under the run's lock, the watcher
// before it writes started or ended) pulls first: a record read under the lock then holds every
// started and ended the server had, and a second one is never written.

import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { errorLines, runFossil } from "./Command.js"

export class PullFailed extends Schema.TaggedError<PullFailed>()("PullFailed", {
  clone: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `fossil pull -R ${this.clone} failed: ${this.reason}`
  }
}

const pullOnce = (clone: string, holdFds: ReadonlyArray<number> | undefined) =>
  Effect.gen(function*() {
    const r = yield* Effect.tryPromise({
      try: () => runFossil(["pull", "-R", clone], { user: process.env.USER ?? "root", timeoutMs: 120_000, ...(holdFds !== undefined ? { holdFds } : {}) }),
      catch: (e) => new PullFailed({ clone, reason: `cannot run fossil: ${(e as Error).message}` })
    })
    const out = `${r.stdout}\n${r.stderr}`
    // fossil pull exits 0 on "Error: login failed" and the like: its Error: lines are the failure
    const errors = errorLines(out)
    if (r.code !== 0 || errors.length > 0) {
      return yield* new PullFailed({ clone, reason: (errors.join("; ") || out.trim().split("\n").slice(-2).join(" ") || `exit ${String(r.code)}`).slice(0, 500) })
    }
    return out
  })

/** `fossil pull -R CLONE` with the credentials the clone remembers; another process's pull holding the file is waited out. */
export const pullClone = (clone: string, options: { readonly holdFds?: ReadonlyArray<number> } = {}) =>
  pullOnce(clone, options.holdFds).pipe(
    Effect.retry({
      schedule: Schedule.exponential("50 millis", 1.5).pipe(Schedule.jittered, Schedule.upTo("15 seconds")),
      while: (e) => /database is locked|SQLITE_BUSY/i.test(e.reason)
    })
  )
