// What reaches a watcher through ROOT/care/RUN.inbox, appended by the node's rounds: a stop
// ({"stop": HASH}) and deliveries ({"deliver": HASH, "line": LINE}, 2.11). Read in order from
// the start of the file; a delivery of a hash already read is dropped, so nothing is given twice.
//
// The inbox on disk is what waits for a session that does not read (DECISIONS 15): it is read by
// two cursors. The arrivals cursor reads every line as it lands, so a stop is acted on at once
// however far behind the deliveries are; the deliveries cursor hands each delivery on and waits
// while the handler waits (the process has not read what it was given: back-pressure), so what
// is not yet given stays on disk, not in memory, and is given later, in order. A delivery that
// lands while more than the disk bound (ROOT/settings/delivery-disk-bound, bytes; 1 GiB unless
// set) of the inbox waits ungiven before it is never given: the handler is told ("Overflow").
// The rounds that append deliveries hold to the same bound (RUN.inbox.given says how far the
// watcher has given), so the inbox on disk never grows past it with lines nobody will give.

import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { CareDirectory } from "../../services/CareDirectory.js"

export type InboxEntry =
  | { readonly _tag: "Stop"; readonly hash: string }
  | { readonly _tag: "Deliver"; readonly hash: string; readonly line: string }
  /** not a line of the inbox: a delivery that landed past the disk bound, never given */
  | { readonly _tag: "Overflow"; readonly hash: string; readonly waiting: number; readonly bound: number }

export const parseInboxLine = (line: string): Exclude<InboxEntry, { _tag: "Overflow" }> | undefined => {
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

export const defaultDeliveryDiskBound = 1024 * 1024 * 1024

/** The disk bound (ROOT/settings/delivery-disk-bound), and what was wrong with the file when it could not be used. */
export const deliveryDiskBound = (settings: string): { readonly bytes: number; readonly problem?: string } => {
  const file = Path.join(settings, "delivery-disk-bound")
  let text: string
  try {
    text = Fs.readFileSync(file, "utf8").trim()
  } catch {
    return { bytes: defaultDeliveryDiskBound } // not set
  }
  const n = Number(text)
  return /^\d+$/.test(text) && n > 0 && Number.isSafeInteger(n)
    ? { bytes: n }
    : { bytes: defaultDeliveryDiskBound, problem: `${file} holds ${JSON.stringify(text.slice(0, 40))}, not a number of bytes above 0: the disk bound is ${defaultDeliveryDiskBound}` }
}

/**
 * How far the run's watcher has given its inbox (bytes from its start), in RUN.inbox.given: what
 * lies past it waits on disk, and the node's rounds append nothing that would take that past the
 * disk bound. Written by the watcher after each batch it gives, atomically.
 */
export const givenFile = (careDir: string, run: string): string => Path.join(careDir, `${run}.inbox.given`)

const writeGiven = (careDir: string, run: string, offset: number) => {
  const file = givenFile(careDir, run)
  Fs.writeFileSync(`${file}.part`, String(offset), { mode: 0o600 })
  Fs.renameSync(`${file}.part`, file)
}

/** The bytes of the run's inbox its watcher has not given yet (all of it before it gave any). */
export const inboxWaiting = (careDir: string, run: string): number => {
  let size: number
  try {
    size = Fs.statSync(Path.join(careDir, `${run}.inbox`)).size
  } catch {
    return 0
  }
  let given = 0
  try {
    const n = Number(Fs.readFileSync(givenFile(careDir, run), "utf8").trim())
    if (Number.isSafeInteger(n) && n >= 0) given = n
  } catch {
    // not given anything yet
  }
  return Math.max(0, size - given)
}

/**
 * The whole lines of `file` from `offset`, reading at most about `most` bytes (more only to finish
 * a line longer than that) and nothing at or past `limit`; each line with the offset after it.
 */
const readLines = (file: string, offset: number, limit: number, most: number): ReadonlyArray<{ readonly text: string; readonly end: number }> => {
  let fd: number
  try {
    fd = Fs.openSync(file, "r")
  } catch {
    return [] // not there yet
  }
  try {
    const end = Math.min(limit, Fs.fstatSync(fd).size)
    let want = Math.min(most, end - offset)
    for (;;) {
      if (want <= 0) return []
      const data = Buffer.alloc(want)
      const got = Fs.readSync(fd, data, 0, want, offset)
      const last = data.subarray(0, got).lastIndexOf(0x0a)
      if (last < 0) {
        // a line longer than `most`: read on to its end, if it has one yet
        if (offset + got >= end) return []
        want = Math.min(want * 2, end - offset)
        continue
      }
      const out: Array<{ text: string; end: number }> = []
      let start = 0
      while (start <= last) {
        const nl = data.indexOf(0x0a, start)
        out.push({ text: data.subarray(start, nl).toString("utf8"), end: offset + nl + 1 })
        start = nl + 1
      }
      return out
    }
  } finally {
    Fs.closeSync(fd)
  }
}

/**
 * Watches the inbox itself (inotify), made empty first if no round has appended to it yet: a watch
 * of the care directory woke every watcher of the node at each line appended to any inbox, each
 * round's deliveries to S sessions S times S wake-ups (bench/sessions). Undefined where it cannot.
 */
const watchInbox = (file: string, changed: () => void): Fs.FSWatcher | undefined => {
  try {
    Fs.closeSync(Fs.openSync(file, "a", 0o600))
    const watcher = Fs.watch(file, { persistent: false }, changed)
    watcher.on("error", () => {})
    return watcher
  } catch {
    return undefined
  }
}

/**
 * Calls `handle` with each entry as it is appended, forever (the caller's scope ends it): each
 * stop as soon as it lands; each delivery in order, the next only once `handle` returned for the
 * one before (so a handler that waits for the process to read holds the rest back on disk). The
 * inbox is watched (inotify), so a line is read as soon as it lands; the poll every
 * `every` is only the fallback where watching is not possible.
 */
export const followInbox = <R>(
  run: string,
  handle: (entry: InboxEntry) => Effect.Effect<void, never, R>,
  every: Duration.DurationInput = "1 second",
  /** the disk bound; read from ROOT/settings/delivery-disk-bound (ROOT the care directory's parent) unless given */
  diskBound?: number
) =>
  Effect.scoped(Effect.gen(function*() {
    const care = yield* CareDirectory
    const changed = yield* Queue.sliding<void>(1)
    const arrived = yield* Queue.sliding<void>(1)
    const name = `${run}.inbox`
    const file = Path.join(care.path, name)
    const bound = diskBound ?? deliveryDiskBound(Path.join(Path.dirname(care.path), "settings")).bytes
    // a name the care directory would refuse names no inbox: nothing ever arrives
    if (!/^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/.test(run)) return yield* Effect.never
    yield* Effect.acquireRelease(
      Effect.sync(() => watchInbox(file, () => Queue.unsafeOffer(changed, undefined))),
      (watcher) => Effect.sync(() => watcher?.close())
    )
    /** how far the arrivals cursor has read: the deliveries cursor reads nothing it has not */
    let arrivals = 0
    /** how far the deliveries cursor has given (or passed by) */
    let given = 0
    const heard = new Set<string>()
    const overflowed = new Set<string>()
    const deliveries = Effect.gen(function*() {
      const handed = new Set<string>()
      for (;;) {
        const lines = yield* Effect.sync(() => readLines(file, given, arrivals, 64 * 1024))
        if (lines.length === 0) {
          yield* Effect.race(Queue.take(arrived), Effect.sleep(every))
          continue
        }
        for (const line of lines) {
          const entry = parseInboxLine(line.text)
          if (entry?._tag === "Deliver" && !handed.has(entry.hash) && !overflowed.has(entry.hash)) {
            handed.add(entry.hash)
            yield* handle(entry)
          }
          given = line.end
        }
        const reached = given
        yield* Effect.sync(() => writeGiven(care.path, run, reached)).pipe(Effect.ignore)
      }
    })
    yield* Effect.forkScoped(deliveries)
    for (;;) {
      const lines = yield* Effect.sync(() => readLines(file, arrivals, Number.MAX_SAFE_INTEGER, 1024 * 1024))
      for (const line of lines) {
        const entry = parseInboxLine(line.text)
        if (entry?._tag === "Stop") yield* handle(entry)
        else if (entry?._tag === "Deliver" && !heard.has(entry.hash)) {
          heard.add(entry.hash)
          const waiting = line.end - given
          if (waiting > bound) {
            overflowed.add(entry.hash)
            yield* handle({ _tag: "Overflow", hash: entry.hash, waiting, bound })
          }
        }
        arrivals = line.end
      }
      if (lines.length > 0) {
        yield* Queue.offer(arrived, undefined)
        continue // read on until nothing more is there
      }
      yield* Effect.race(Queue.take(changed), Effect.sleep(every))
    }
  }))
