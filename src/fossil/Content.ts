/**
 * Reading an artifact's bytes from a repository's blob table (fossil-mechanics 4.3):
 * content is a 4-byte big-endian size then a zlib stream, and when delta(rid) has a
 * row it is a delta against srcid's full content (chains occur). A phantom has size
 * -1 and no content.
 */
import type BetterSqlite3 from "better-sqlite3"
import { applyDelta } from "./Delta.js"
import { inflateStored } from "./InflateStored.js"

/** blob.content (or an unversioned file's stored content) inflated. */
export const inflate = (stored: Uint8Array): Buffer => inflateStored(stored)

interface Row {
  content: Buffer | null
  size: number
  srcid: number | null
}

const statements = new WeakMap<BetterSqlite3.Database, BetterSqlite3.Statement<[number], Row>>()
const statement = (db: BetterSqlite3.Database) => {
  let s = statements.get(db)
  if (s === undefined) {
    s = db.prepare<[number], Row>("SELECT b.content, b.size, d.srcid FROM blob b LEFT JOIN delta d ON d.rid = b.rid WHERE b.rid = ?")
    statements.set(db, s)
  }
  return s
}

/**
 * The bytes of an artifact whose stored row is already in hand (one query per batch
 * reads content, as bytes or as SQLite's hex(), and delta.srcid with the rest): only a
 * delta costs another read, of its source. Undefined when the row or its delta source
 * is a phantom.
 */
export const contentOfRow = (
  db: BetterSqlite3.Database, rid: number, stored: Uint8Array | string | null, size: number, srcid: number | null
): Buffer | undefined => {
  if (stored === null || size < 0) return undefined
  const data = inflate(typeof stored === "string" ? Buffer.from(stored, "hex") : stored)
  if (srcid === null || srcid === 0) return data
  const source = content(db, srcid, rid)
  return source === undefined ? undefined : applyDelta(source, data)
}

/**
 * The artifact's bytes, or undefined when it is a phantom or not there. `from`: the
 * artifact whose delta chain this continues (a chain back to it is a loop).
 */
export const content = (db: BetterSqlite3.Database, rid: number, from: number = rid): Buffer | undefined => {
  const stmt = statement(db)
  // walk the chain down to a full text, then apply the deltas back up (no recursion)
  const chain: Array<Buffer> = []
  let at: number | null = rid
  let base: Buffer | undefined
  const seen = new Set<number>(from === rid ? [] : [from])
  while (at !== null) {
    if (seen.has(at)) throw new Error(`delta chain of rid ${from} loops at rid ${at}`)
    seen.add(at)
    const row: Row | undefined = stmt.get(at)
    if (row === undefined || row.content === null || row.size < 0) return undefined
    const data = inflate(row.content)
    if (row.srcid === null || row.srcid === 0) {
      base = data
      at = null
    } else {
      chain.push(data)
      at = row.srcid
    }
  }
  let out = base!
  for (let i = chain.length - 1; i >= 0; i--) out = applyDelta(out, chain[i]!)
  return out
}
