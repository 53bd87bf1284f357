// Refusal 4 needs "any clone's user": a login named as the `to` of a run that a user holding
// admin or setup sent (2.5). It is read from the record itself; a cache under ROOT/node keeps
// the scan proportional to what arrived since the last one.

import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Receipts } from "../../services/Receipts.js"
import { Repository, type Cursor } from "../../services/Repository.js"
import { readMessage } from "../protocol/Envelope.js"
import { isAdminOrSetup } from "../protocol/Senders.js"

interface Cache {
  readonly cursor: Cursor
  readonly users: ReadonlyArray<string>
}

const cacheFile = (nodeDir: string, repository: string) =>
  Path.join(nodeDir, `clone-users.${Path.basename(repository).replace(/[^A-Za-z0-9._-]/g, "_")}.json`)

const readCache = (file: string): Cache => {
  try {
    const parsed = JSON.parse(Fs.readFileSync(file, "utf8")) as Cache
    if (typeof parsed.cursor?.rcvid === "number" && Array.isArray(parsed.users)) return parsed
  } catch {
    // absent or unreadable: scan from the start
  }
  return { cursor: { rcvid: 0, rid: 0 }, users: [] }
}

const writeCache = (file: string, cache: Cache) => {
  try {
    Fs.mkdirSync(Path.dirname(file), { recursive: true })
    const temporary = `${file}.${process.pid}.tmp`
    Fs.writeFileSync(temporary, JSON.stringify(cache))
    Fs.renameSync(temporary, file)
  } catch {
    // a cache that cannot be written costs a longer scan next time, nothing more
  }
}

/**
 * The clone users the record names up to now. `keep: false` leaves the cache as it is: a watcher
 * reads what arrived since the round that handed it the run, and its run should not wait for a
 * file to be written that the next round writes anyway.
 */
export const cloneUsers = (nodeDir: string, options: { readonly keep?: boolean } = {}) =>
  Effect.gen(function*() {
    const repository = yield* Repository
    const receipts = yield* Receipts
    const file = cacheFile(nodeDir, repository.path)
    const cache = readCache(file)
    const users = new Set(cache.users)
    let cursor = cache.cursor
    for (;;) {
      const batch = yield* repository.readAfter(cursor, 2000)
      const runs = batch.items.flatMap((item) => {
        if (item._tag !== "Post" && item._tag !== "TicketChange") return []
        const reading = readMessage(item.text)
        return reading._tag === "Message" && reading.kind === "run" && reading.to !== undefined
          ? [{ hash: item.hash, to: reading.to }]
          : []
      })
      if (runs.length > 0) {
        const answers = yield* receipts.receipts(runs.map((r) => r.hash))
        answers.forEach((answer, i) => {
          if (answer._tag === "Received" && isAdminOrSetup(answer.capabilities)) users.add(runs[i]!.to)
        })
      }
      cursor = batch.cursor
      if (!batch.more) break
    }
    const result = [...users].sort()
    const moved = cursor.rcvid !== cache.cursor.rcvid || cursor.rid !== cache.cursor.rid
    if (options.keep !== false && moved) writeCache(file, { cursor, users: result })
    return new Set(result) as ReadonlySet<string>
  })
