// Part of the RemoteReceipts layer. What the server's page said a moment ago, shared by the node's processes on a clone's host
// (ROOT/node/receipts-remembered.json): the supervisor's held question learns a run's receipt and its
// process user's capabilities, and the watcher it hands the run to, a process of its own, reads its
// record a second later; without this it asks the page the same again. Only what the server gave
// (a receipt received, a user's capabilities), only for the same server and the same signed-in user,
// and only while younger than the memory's span (RemoteReceipts: 5 s). The file is the node's own,
// under ROOT beside its code; one that cannot be read or is malformed is ignored, and its answers
// are asked of the server as before.

import * as Fs from "node:fs"
import * as Path from "node:path"
import { isFullHash } from "../src/fossil/Hash.js"

export interface SharedReceipt {
  readonly hash: string
  readonly sender: string
  readonly capabilities: string
  readonly rcvid: number
  readonly rid: number
  readonly at: number
}

export interface SharedCapabilities {
  readonly user: string
  readonly capabilities: string | undefined
  readonly at: number
}

export interface Shared {
  readonly receipts: ReadonlyArray<SharedReceipt>
  readonly capabilities: ReadonlyArray<SharedCapabilities>
}

/** Entries kept in the file at most: past it the oldest go (a burst's, already decided). */
const maxEntries = 2000

const isCount = (n: unknown): n is number => typeof n === "number" && Number.isSafeInteger(n) && n > 0
const isTime = (n: unknown): n is number => typeof n === "number" && Number.isFinite(n)

/** The file's entries for `server` and `user` younger than `spanMs`; nothing when it is missing or malformed. */
export const readShared = (file: string, server: string, user: string, spanMs: number, now = Date.now()): Shared => {
  const none: Shared = { receipts: [], capabilities: [] }
  let parsed: unknown
  try {
    parsed = JSON.parse(Fs.readFileSync(file, "utf8"))
  } catch {
    return none
  }
  if (typeof parsed !== "object" || parsed === null) return none
  const { server: s, user: u, receipts, capabilities } = parsed as Record<string, unknown>
  if (s !== server || u !== user || !Array.isArray(receipts) || !Array.isArray(capabilities)) return none
  const fresh = (at: unknown) => isTime(at) && now - at < spanMs && at <= now + 1000
  const rows: Array<SharedReceipt> = []
  for (const row of receipts as Array<Record<string, unknown>>) {
    if (typeof row !== "object" || row === null) return none
    const { hash, sender, capabilities: caps, rcvid, rid, at } = row
    if (typeof hash !== "string" || !isFullHash(hash) || typeof sender !== "string" || sender === "" || typeof caps !== "string" ||
      !isCount(rcvid) || !isCount(rid) || !isTime(at)) return none
    if (fresh(at)) rows.push({ hash, sender, capabilities: caps, rcvid, rid, at })
  }
  const users: Array<SharedCapabilities> = []
  for (const entry of capabilities as Array<Record<string, unknown>>) {
    if (typeof entry !== "object" || entry === null) return none
    const { user: login, capabilities: caps, at } = entry
    if (typeof login !== "string" || login === "" || (caps !== undefined && typeof caps !== "string") || !isTime(at)) return none
    if (fresh(at)) users.push({ user: login, capabilities: caps as string | undefined, at })
  }
  return { receipts: rows, capabilities: users }
}

/**
 * Adds what was just learnt to the file (what it holds still young kept, the newer of two entries
 * taken), written whole by rename: two processes writing at once lose at most an entry, asked again.
 */
export const writeShared = (file: string, server: string, user: string, spanMs: number, learnt: Shared, now = Date.now()): void => {
  const kept = readShared(file, server, user, spanMs, now)
  const receipts = new Map<string, SharedReceipt>()
  for (const r of [...kept.receipts, ...learnt.receipts]) if ((receipts.get(r.hash)?.at ?? -Infinity) <= r.at) receipts.set(r.hash, r)
  const capabilities = new Map<string, SharedCapabilities>()
  for (const c of [...kept.capabilities, ...learnt.capabilities]) if ((capabilities.get(c.user)?.at ?? -Infinity) <= c.at) capabilities.set(c.user, c)
  const newest = <A extends { readonly at: number }>(entries: Iterable<A>) => [...entries].sort((a, b) => b.at - a.at).slice(0, maxEntries)
  const temporary = `${file}.${process.pid}`
  try {
    Fs.mkdirSync(Path.dirname(file), { recursive: true, mode: 0o700 })
    Fs.writeFileSync(temporary, JSON.stringify({ server, user, receipts: newest(receipts.values()), capabilities: newest(capabilities.values()) }), { mode: 0o600 })
    Fs.renameSync(temporary, file)
  } catch {
    // a memory only: what could not be written is asked of the server again
    Fs.rmSync(temporary, { force: true })
  }
}
