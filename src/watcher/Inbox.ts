import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Fs from "node:fs"
import { CareDirectory } from "../../services/CareDirectory.js"

// What reaches a watcher through ROOT/care/RUN.inbox, appended by the node's rounds: a stop
// ({"stop": HASH}) and deliveries ({"deliver": HASH, "line": LINE}, 2.11). Read in order from
// the start of the file; a delivery of a hash already read is dropped, so nothing is given twice.

export type InboxEntry =
  | { readonly _tag: "Stop"; readonly hash: string }
  | { readonly _tag: "Deliver"; readonly hash: string; readonly line: string }

export const parseInboxLine = (line: string): InboxEntry | undefined => {
  let parsed: unknown
  try {
    parsed = JSON.parse(line)
  } catch {
    return undefined
  }
  if (typeof parsed !== "object" || parsed === null) return undefined
  const entry = parsed as { stop?: unknown; deliver?: unknown; line?: unknown }
  if (typeof entry.deliver === "string" && typeof entry.line === "string" && !entry.line.includes("\n")) {
    return { _tag: "Deliver", hash: entry.deliver, line: entry.line }
  }
  if ("stop" in entry) return { _tag: "Stop", hash: String(entry.stop) }
  return undefined
}

/**
 * Calls `handle` with each entry as it is appended, forever (the caller's scope ends it). The care
 * directory is watched (inotify), so a line is read as soon as it lands; the poll every `every`
 * is only the fallback where watching is not possible.
 */
export const followInbox = <R>(
  run: string,
  handle: (entry: InboxEntry) => Effect.Effect<void, never, R>,
  every: Duration.DurationInput = "1 second"
) =>
  Effect.scoped(Effect.gen(function*() {
    const care = yield* CareDirectory
    const changed = yield* Queue.sliding<void>(1)
    const name = `${run}.inbox`
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        try {
          const watcher = Fs.watch(care.path, { persistent: false }, (_event, file) => {
            if (file === null || file === name) Queue.unsafeOffer(changed, undefined)
          })
          watcher.on("error", () => {})
          return watcher
        } catch {
          return undefined
        }
      }),
      (watcher) => Effect.sync(() => watcher?.close())
    )
    const seen = new Set<string>()
    let offset = 0
    for (;;) {
      const read = yield* care.readInbox(run, offset).pipe(Effect.orElseSucceed(() => ({ lines: [], nextOffset: offset })))
      offset = read.nextOffset
      for (const line of read.lines) {
        const entry = parseInboxLine(line)
        if (entry === undefined) continue
        if (entry._tag === "Deliver") {
          if (seen.has(entry.hash)) continue
          seen.add(entry.hash)
        }
        yield* handle(entry)
      }
      yield* Effect.race(Queue.take(changed), Effect.sleep(every))
    }
  }))
