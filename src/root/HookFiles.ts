// The node's own files under ROOT/node, shared by the hook's lean entry (no Effect: it runs on
// every receipt) and by the round, the tools and status. Plain node only, on purpose.
//
//   ROOT/node/hook.log                  one JSON line per call of the hook
//   ROOT/node/node.json                 {"nodes": {"/abs/REPO.fossil": {"user": "lab", "serverUrl": "http://..."}}}
//   ROOT/node/cursor-HASH12-USER.json   {"rcvid": N, "rid": N}: what this node has decided, per repository and user

import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { releasePaths } from "../release/ReleasePaths.js"

export interface Cursor {
  readonly rcvid: number
  readonly rid: number
}

export interface NodeEntry {
  readonly user: string
  readonly serverUrl?: string
}

export interface NodesFile {
  readonly nodes: Readonly<Record<string, NodeEntry>>
}

export const hookLogOf = (root: string): string => Path.join(releasePaths(root).node, "hook.log")
export const nodesFileOf = (root: string): string => Path.join(releasePaths(root).node, "node.json")

/** A repository file named the one way everywhere: absolute, its links followed when it exists. */
export const canonicalRepository = (repository: string): string => {
  const absolute = Path.resolve(repository)
  try {
    return Fs.realpathSync(absolute)
  } catch {
    return absolute
  }
}

const safeUser = (user: string) => user.replace(/[^A-Za-z0-9._-]/g, (c) => `%${c.charCodeAt(0).toString(16)}`)

export const cursorFileOf = (root: string, repository: string, user: string): string => {
  const id = Crypto.createHash("sha1").update(canonicalRepository(repository)).digest("hex").slice(0, 12)
  return Path.join(releasePaths(root).node, `cursor-${id}-${safeUser(user)}.json`)
}

const writeAtomically = (file: string, text: string) => {
  Fs.mkdirSync(Path.dirname(file), { recursive: true, mode: 0o700 })
  const temporary = `${file}.${process.pid}.tmp`
  Fs.writeFileSync(temporary, text, { mode: 0o600 })
  Fs.renameSync(temporary, file)
}

export const readNodes = (root: string): NodesFile => {
  try {
    const parsed = JSON.parse(Fs.readFileSync(nodesFileOf(root), "utf8")) as NodesFile
    if (typeof parsed === "object" && parsed !== null && typeof parsed.nodes === "object" && parsed.nodes !== null) return parsed
  } catch {
    // absent or unreadable: no node on this root
  }
  return { nodes: {} }
}

export const nodeOf = (root: string, repository: string): NodeEntry | undefined => {
  const entry = readNodes(root).nodes[canonicalRepository(repository)]
  return entry !== undefined && typeof entry.user === "string" ? entry : undefined
}

export const writeNode = (root: string, repository: string, entry: NodeEntry): void => {
  const nodes = { ...readNodes(root).nodes, [canonicalRepository(repository)]: entry }
  writeAtomically(nodesFileOf(root), `${JSON.stringify({ nodes }, null, 2)}\n`)
}

export const readCursor = (file: string): Cursor | undefined => {
  try {
    const parsed = JSON.parse(Fs.readFileSync(file, "utf8")) as Cursor
    if (Number.isSafeInteger(parsed.rcvid) && Number.isSafeInteger(parsed.rid)) return { rcvid: parsed.rcvid, rid: parsed.rid }
  } catch {
    // absent: the node has not started on this repository
  }
  return undefined
}

const after = (a: Cursor, b: Cursor) => a.rcvid > b.rcvid || (a.rcvid === b.rcvid && a.rid > b.rid)

/**
 * Moves the cursor forward to `to`, never back: what is on disk now is read again just before
 * the write, so a call that read an older cursor cannot undo a later round's progress (a race
 * left between the read and the rename only makes a round read again what it decided, which
 * every decision tolerates: each is taken again under the run's lock).
 */
export const advanceCursor = (file: string, to: Cursor): boolean => {
  const now = readCursor(file)
  if (now !== undefined && !after(to, now)) return false
  writeAtomically(file, JSON.stringify({ rcvid: to.rcvid, rid: to.rid }))
  return true
}

/** Sets the cursor where it is told to (the node starting puts it at the newest receipt). */
export const writeCursor = (file: string, to: Cursor): void => writeAtomically(file, JSON.stringify({ rcvid: to.rcvid, rid: to.rid }))

/** One call of the hook, as hook.log keeps it. */
export interface HookLogEntry {
  readonly at: string
  readonly pid: number
  readonly repository: string
  /** the artifacts Fossil listed on standard input (a hint only) */
  readonly given: ReadonlyArray<string>
  readonly node?: string
  readonly from?: Cursor
  readonly to?: Cursor
  /** what the call did, one line each */
  readonly did: ReadonlyArray<string>
  readonly ms?: number
}

export const appendHookLog = (log: string, entry: HookLogEntry): void => {
  try {
    Fs.mkdirSync(Path.dirname(log), { recursive: true, mode: 0o700 })
    Fs.appendFileSync(log, `${JSON.stringify(entry)}\n`, { mode: 0o600 })
  } catch {
    // the log is the hook's only voice; with it gone there is nowhere left to say anything
  }
}

/** The last whole entry of a hook log, read from its end. */
export const lastHookLogEntry = (log: string): HookLogEntry | undefined => {
  let text: string
  try {
    const fd = Fs.openSync(log, "r")
    try {
      const size = Fs.fstatSync(fd).size
      const length = Math.min(size, 256 * 1024)
      const buffer = Buffer.alloc(length)
      Fs.readSync(fd, buffer, 0, length, size - length)
      text = buffer.toString("utf8")
    } finally {
      Fs.closeSync(fd)
    }
  } catch {
    return undefined
  }
  const lines = text.split("\n").filter((l) => l.trim().length > 0)
  for (let i = lines.length - 1; i >= 0; i--) {
    try {
      const parsed = JSON.parse(lines[i]!) as HookLogEntry
      if (typeof parsed.at === "string" && Array.isArray(parsed.did)) return parsed
    } catch {
      // a line cut by the window's start, or not ours
    }
  }
  return undefined
}
