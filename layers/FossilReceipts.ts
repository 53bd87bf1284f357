/**
 * Receipts read from the served repository file on the server's host:
 * blob.rcvid -> rcvfrom.uid -> user, with the sender's fullcap. A caller without
 * 'o' is told nothing was received; a private artifact is hidden from a caller
 * without 'x' (admin and setup imply both, as in Fossil).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type BetterSqlite3 from "better-sqlite3"
import { openDatabase } from "../src/fossil/Sqlite.js"
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
  readonly busyTimeoutMs?: number
}

const message = (e: unknown) => (e instanceof Error ? e.message : String(e))

export const make = (config: FossilReceiptsConfig) =>
  Effect.gen(function*() {
    const path = Path.resolve(config.path)
    let db: BetterSqlite3.Database | undefined
    yield* Effect.addFinalizer(() => Effect.sync(() => db?.close()))

    const read = <A>(f: (db: BetterSqlite3.Database) => A) =>
      Effect.try({
        try: () => {
          if (db === undefined) {
            const d = openDatabase(path, { readonly: true, fileMustExist: true })
            d.pragma(`busy_timeout = ${config.busyTimeoutMs ?? 5000}`)
            db = d
          }
          return f(db)
        },
        catch: (e) => new ReceiptsUnavailable({ path, reason: message(e) })
      })

    /** the caller's effective capabilities; an unknown login is nobody */
    const callerCaps = (d: BetterSqlite3.Database, caller: string | undefined): string | undefined =>
      caller === undefined ? undefined : (Read.user(d, caller) ?? Read.user(d, "nobody"))?.fullcap ?? ""

    const service: ReceiptsService = {
      receipts: (hashes, options) =>
        Effect.gen(function*() {
          const bad = hashes.find((h) => !isFullHash(h))
          if (bad !== undefined) return yield* new InvalidHash({ hash: bad })
          return yield* read((d) =>
            d.transaction((): ReadonlyArray<ReceiptAnswer> => {
              const caps = callerCaps(d, options?.caller)
              const capsOf = new Map<string, string>()
              return hashes.map((hash): ReceiptAnswer => {
                const r = Read.receipt(d, hash)
                const hidden = caps !== undefined && (!grants(caps, "o") || (r?.private === true && !grants(caps, "x")))
                if (r === undefined || hidden) return { _tag: "NotReceived", hash }
                let senderCaps = capsOf.get(r.sender)
                if (senderCaps === undefined) {
                  senderCaps = Read.user(d, r.sender)?.fullcap ?? ""
                  capsOf.set(r.sender, senderCaps)
                }
                return { _tag: "Received", hash, sender: r.sender, capabilities: senderCaps, rcvid: r.rcvid, rid: r.rid }
              })
            })()
          )
        }),
      capabilitiesOf: (login) => read((d) => Read.user(d, login)?.fullcap)
    }
    return service
  })

export const layer = (config: FossilReceiptsConfig) => Layer.scoped(Receipts, make(config))
