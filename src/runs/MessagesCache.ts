// The messages the runs list read last time, kept so that the next call reads only what arrived
// since (the posts after its cursor in server order) instead of every post again. What was read
// before the cursor is taken again only while nothing could have changed it (messagesFingerprint:
// no artifact made private or public, shunned or removed); otherwise everything is read again. The
// cache is the OCX account's (ROOT/node/cache, for the release's own programs) or the user's
// ($XDG_CACHE_HOME or ~/.cache/ocx2), mode 0600; without either, nothing is kept.

import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type BetterSqlite3 from "better-sqlite3"
import { type MessageRow, messagesFingerprint, type ReadCursor, readMessagesAfter } from "../fossil/ReadMessages.js"
import { releaseOfProgram } from "../release/ReleasePaths.js"

const VERSION = 2

interface Cached {
  readonly version: number
  readonly repository: string
  readonly senders: boolean
  readonly cursor: ReadCursor
  readonly fingerprint: string
  readonly rows: ReadonlyArray<MessageRow>
}

/** Where this program keeps its caches, if anywhere. */
export const cacheDir = (program: string | undefined = process.argv[1], env: NodeJS.ProcessEnv = process.env): string | undefined => {
  if (program !== undefined) {
    try {
      const release = releaseOfProgram(Fs.realpathSync(program))
      if (release !== undefined) return Path.join(release.root, "node", "cache")
    } catch {
      // not a file: no release
    }
  }
  const base = env.XDG_CACHE_HOME !== undefined && env.XDG_CACHE_HOME !== ""
    ? env.XDG_CACHE_HOME
    : env.HOME !== undefined && env.HOME !== "" ? Path.join(env.HOME, ".cache") : undefined
  return base === undefined ? undefined : Path.join(base, "ocx2")
}

const fileFor = (dir: string, repository: string, senders: boolean): string =>
  Path.join(dir, `messages-${Crypto.createHash("sha1").update(`${repository}\n${senders}`).digest("hex").slice(0, 16)}.json`)

const readCache = (file: string): Cached | undefined => {
  try {
    const cached = JSON.parse(Fs.readFileSync(file, "utf8")) as Cached
    return cached.version === VERSION ? cached : undefined
  } catch {
    return undefined
  }
}

const pick = (value: unknown, keys: ReadonlyArray<string>): Record<string, unknown> | undefined => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined
  const out: Record<string, unknown> = {}
  for (const key of keys) if (key in value) out[key] = (value as Record<string, unknown>)[key]
  return out
}

/**
 * A message as the runs list reads it, and no more: a run's objective and its process's user,
 * manual and session (not its whole block), a reply's content (started, ended: small).
 */
const slim = (row: MessageRow): MessageRow => {
  const message = row.message
  const content = message.kind === "run"
    ? { ...pick(message.content, ["objective"]), process: pick(pick(message.content, ["process"])?.["process"], ["user", "manual", "session"]) }
    : message.content
  return { ...row, message: { ...message, content, block: {} } }
}

const writeCache = (file: string, cached: Cached): void => {
  try {
    Fs.mkdirSync(Path.dirname(file), { recursive: true, mode: 0o700 })
    const partial = `${file}.${process.pid}`
    Fs.writeFileSync(partial, JSON.stringify({ ...cached, rows: cached.rows.map(slim) }), { mode: 0o600 })
    Fs.renameSync(partial, file)
  } catch {
    // a cache that cannot be written is not kept; the next call reads everything again
  }
}

/** Every message of the file, in server order: what the cache holds and what arrived since, or everything read again. */
export const cachedMessages = (
  db: BetterSqlite3.Database,
  repository: string,
  o: { readonly senders: boolean },
  dir: string | undefined = cacheDir()
): { readonly rows: ReadonlyArray<MessageRow>; readonly from: "cache" | "file" } => {
  if (dir === undefined) return { rows: readMessagesAfter(db, o, undefined).rows, from: "file" }
  const file = fileFor(dir, repository, o.senders)
  const cached = readCache(file)
  const usable = cached !== undefined && cached.repository === repository && cached.senders === o.senders
  const read = db.transaction(() => {
    if (usable && messagesFingerprint(db, cached.cursor) === cached.fingerprint) {
      const fresh = readMessagesAfter(db, o, cached.cursor)
      return { rows: fresh.rows.length === 0 ? cached.rows : [...cached.rows, ...fresh.rows], cursor: fresh.cursor, fingerprint: fresh.fingerprint, from: "cache" as const, changed: fresh.rows.length > 0 || fresh.cursor.rid !== cached.cursor.rid || fresh.cursor.rcvid !== cached.cursor.rcvid }
    }
    const all = readMessagesAfter(db, o, undefined)
    return { ...all, from: "file" as const, changed: true }
  })()
  if (read.changed) writeCache(file, { version: VERSION, repository, senders: o.senders, cursor: read.cursor, fingerprint: read.fingerprint, rows: read.rows })
  return { rows: read.rows, from: read.from }
}
