/**
 * Receipts read from the served repository file on the server's host:
 * blob.rcvid -> rcvfrom.uid -> user, with the sender's fullcap. A caller without
 * 'o' is told nothing was received; a private artifact is hidden from a caller
 * without 'x' (admin and setup imply both, as in Fossil).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type BetterSqlite3 from "better-sqlite3"
import { busyTimeoutMs, heldReader, openDatabase } from "../src/fossil/Sqlite.js"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { grants } from "../src/fossil/Fullcap.js"
import { isFullHash } from "../src/fossil/Hash.js"
import * as Read from "../src/fossil/Read.js"
import {
  InvalidHash, type ReceiptAnswer, Receipts, ReceiptsUnavailable, type ReceiptsService
} from "../services/Receipts.js"

export interface FossilReceiptsConfig {
  /** the served repository file */
  readonly path: string
  /** how long a read waits for a writer's commit to end (default 15000 ms, Fossil's own) */
  readonly busyTimeoutMs?: number
}

const message = (e: unknown) => (e instanceof Error ? e.message : String(e))

/** The served file, opened: its held read connection and the read through it. */
interface Opened {
  readonly path: string
  readonly held: ReturnType<typeof heldReader>
  /** a synchronous read on the held connection, its throws made ReceiptsUnavailable */
  readonly read: <A>(f: (db: BetterSqlite3.Database) => A) => Effect.Effect<A, ReceiptsUnavailable>
}

/** the caller's effective capabilities; an unknown login is nobody */
const callerCaps = (d: BetterSqlite3.Database, caller: string | undefined): string | undefined =>
  caller === undefined ? undefined : (Read.user(d, caller) ?? Read.user(d, "nobody"))?.fullcap ?? ""

/** the newest receipt's number (0 in a repository that has received nothing) */
const newestOf = (d: BetterSqlite3.Database) => (d.prepare("SELECT coalesce(max(rcvid), 0) AS n FROM rcvfrom").get() as { n: number }).n

// The wait of a long poll: the repository's directory heard through inotify (the file, its
// journal, its WAL: the journal's removal follows the commit), and looked at every second
// as well, should inotify be unavailable or miss; what was received is read after each.
const waitPast = (r: Opened, after: number, waitMs: number) =>
  Effect.async<number, ReceiptsUnavailable>((resume) => {
    const { path, held } = r
    const base = Path.basename(path)
    const names = new Set([base, `${base}-journal`, `${base}-wal`])
    let done = false
    let watcher: Fs.FSWatcher | undefined
    const cleanup = () => {
      watcher?.close()
      clearInterval(poll)
      clearTimeout(deadline)
    }
    const finish = (result: Effect.Effect<number, ReceiptsUnavailable>) => {
      if (done) return
      done = true
      cleanup()
      resume(result)
    }
    const look = () => {
      if (done || held.current() === undefined) return
      try {
        const now = held.read(newestOf)
        if (now !== after) finish(Effect.succeed(now))
      } catch (e) {
        finish(Effect.fail(new ReceiptsUnavailable({ path, reason: message(e) })))
      }
    }
    const poll = setInterval(look, 1000)
    const deadline = setTimeout(() => finish(Effect.succeed(after)), waitMs)
    try {
      watcher = Fs.watch(Path.dirname(path), { persistent: false }, (_event, name) => {
        if (name === null || names.has(name)) look()
      }).on("error", () => watcher?.close())
    } catch {
      // no inotify (its limit reached): the poll above still answers within a second
    }
    look() // what arrived between the first read and the watch
    return Effect.sync(cleanup)
  })

const receipts = (r: Opened): ReceiptsService["receipts"] => (hashes, options) =>
  Effect.gen(function*() {
    const bad = hashes.find((h) => !isFullHash(h))
    if (bad !== undefined) return yield* new InvalidHash({ hash: bad })
    return yield* r.read((d) =>
      d.transaction((): ReadonlyArray<ReceiptAnswer> => {
        const caps = callerCaps(d, options?.caller)
        const capsOf = new Map<string, string>()
        return hashes.map((hash): ReceiptAnswer => {
          const receipt = Read.receipt(d, hash)
          const hidden = caps !== undefined && (!grants(caps, "o") || (receipt?.private === true && !grants(caps, "x")))
          if (receipt === undefined || hidden) return { _tag: "NotReceived", hash }
          let senderCaps = capsOf.get(receipt.sender)
          if (senderCaps === undefined) {
            senderCaps = Read.user(d, receipt.sender)?.fullcap ?? ""
            capsOf.set(receipt.sender, senderCaps)
          }
          return { _tag: "Received", hash, sender: receipt.sender, capabilities: senderCaps, rcvid: receipt.rcvid, rid: receipt.rid }
        })
      })()
    )
  })

const newest = (r: Opened): ReceiptsService["newest"] => (after, waitMs, options) =>
  Effect.gen(function*() {
    const now = yield* r.read((d) => {
      const caps = callerCaps(d, options?.caller)
      return caps !== undefined && !grants(caps, "o") ? undefined : newestOf(d)
    })
    if (now === undefined || now !== after || waitMs <= 0) return now
    return yield* waitPast(r, after, waitMs)
  })

/** The service over the served file, opened for the layer's life: each operation above, given the file. */
export const make = (config: FossilReceiptsConfig) =>
  Effect.gen(function*() {
    const path = Path.resolve(config.path)
    const held = heldReader(path, () => openDatabase(path, { readonly: true, fileMustExist: true, timeout: config.busyTimeoutMs ?? busyTimeoutMs }))
    yield* Effect.addFinalizer(() => Effect.sync(held.close))
    const r: Opened = {
      path,
      held,
      read: (f) => Effect.try({ try: () => held.read(f), catch: (e) => new ReceiptsUnavailable({ path, reason: message(e) }) })
    }
    const service: ReceiptsService = {
      receipts: receipts(r),
      capabilitiesOf: (login) => r.read((d) => Read.user(d, login)?.fullcap),
      newest: newest(r)
    }
    return service
  })

export const layer = (config: FossilReceiptsConfig) => Layer.scoped(Receipts, make(config))
