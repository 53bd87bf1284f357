// ocx2-hook [--root ROOT] --log ROOT/node/hook.log REPOSITORY
// ocx2-hook --poll REPOSITORY (fast mode's poller: src/node/BackofficePoller.ts)
//
// Fossil's after-receive hook (DECISIONS 5): a wake-up call, not the record. Fossil runs it
// detached through /bin/sh, gives it the arrived artifacts on standard input (a hint only),
// closes its stdout and stderr, and never waits for it. So it writes nowhere but its log, and
// it runs on every receipt: this entry loads no Effect and no protocol schema. It reads what
// arrived after its own cursor with plain SQLite and asks one cheap question, whether any of it
// is a message the round acts on: a run for this node, a stop or a publish in a forum post (read
// as the round reads it, with the protocol's plain reader), or any ticket change mentioning ocx.
// The node's own replies (each started, kept log and ended is a receipt) are none of these.
// Only then does it load the round (src/node/Round.ts), which decides under round.lock. When the
// node's supervisor runs (`ocx2 supervise`), the hook only wakes it: the supervisor decides.

import type BetterSqlite3 from "better-sqlite3"
import { openDatabase } from "../fossil/Sqlite.js"
import { parsePostCards } from "../fossil/PostCards.js"
import { readMessage } from "../protocol/Envelope.js"
import { actedOn } from "./ActedOn.js"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Zlib from "node:zlib"
import { rootOfProgram } from "../release/ReleasePaths.js"
import { hookRound } from "../Bundles.js"
import { exportDetached, exportWhenDue } from "../git/ExportHook.js"
import { pollBackoffice, restoreHostFossilHome } from "./BackofficePoller.js"
import { anySession } from "../care/SessionFiles.js"
import { unsettledAfter } from "./ReceiptSettled.js"
import { runningSupervisor, wakeSupervisor } from "../root/SupervisorFiles.js"
import { diskRoom, holdsBack } from "../root/DiskRoom.js"
import { nodeMismatch, releaseDirOfProgram } from "../release/StagedNode.js"
import { againMain, type AgainNode, startAgain } from "./HookAgain.js"
import {
  advanceCursor, appendHookLog, canonicalRepository, type Cursor, cursorFileOf, type HookLogEntry, nodeOf, readCursor
} from "../root/HookFiles.js"

export interface HookArgs {
  readonly log: string
  readonly repository: string
  readonly root: string | undefined
}

export const parseHookArgs = (argv: ReadonlyArray<string>): HookArgs | string => {
  let log: string | undefined
  let root: string | undefined
  const rest: Array<string> = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if ((arg === "--log" || arg === "--root" || arg === "--login") && i + 1 < argv.length) {
      const value = argv[++i]!
      if (arg === "--log") log = value
      else if (arg === "--root") root = value
      // --login LOGIN: an earlier release's hook; its value is unused (seed 001)
    } else if (arg.startsWith("--")) return `unknown option ${arg}`
    else rest.push(arg)
  }
  if (log === undefined) return "--log FILE is missing"
  if (rest.length !== 1) return "give the repository (Fossil's %R) once"
  return { log: Path.resolve(log), repository: Path.resolve(rest[0]!), root: root === undefined ? undefined : Path.resolve(root) }
}

/** ROOT: given, or the root this program was released into (ROOT/staged/NAME/ocx2-hook), or the log's ROOT/node/.. */
export const hookRoot = (args: HookArgs, program: string | undefined): string | undefined => {
  if (args.root !== undefined) return args.root
  if (program !== undefined) {
    try {
      const released = rootOfProgram(Fs.realpathSync(program))
      if (released !== undefined) return released
    } catch {
      // no such program path: fall back to the log's place
    }
  }
  const logDir = Path.dirname(args.log)
  return Path.basename(logDir) === "node" ? Path.dirname(logDir) : undefined
}

/** The hashes Fossil listed ("HASH SUMMARY" a line); a terminal or nothing gives none. */
export const readGiven = (): ReadonlyArray<string> => {
  try {
    const stat = Fs.fstatSync(0)
    if (!stat.isFIFO() && !stat.isFile() && !stat.isSocket()) return []
    const text = Fs.readFileSync(0, "utf8")
    return text.split("\n").map((l) => l.trim().split(/\s+/)[0] ?? "").filter((h) => /^[0-9a-f]{40,64}$/.test(h))
  } catch {
    return []
  }
}

export interface Arrivals {
  readonly count: number
  /** past every artifact looked at */
  readonly newest: Cursor | undefined
  /** posts and ticket changes that may hold a message the round acts on */
  readonly maybe: number
}

const tableExists = (db: BetterSqlite3.Database, name: string) =>
  db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined

/**
 * Whether a forum post's or ticket change's stored content may hold a message the round acts on
 * (ActedOn.ts, as the round's nodeMessagesAfter): a run addressed to `nodeUser`, a stop or a publish. A post's text
 * is read exactly as the round reads it; a ticket change's fields only for "ocx" (every OCX message
 * mentions it, 2.0). Anything not at hand cheaply (a delta, content that does not inflate or parse)
 * may: the round reads it.
 */
const mayHoldMessage = (content: Buffer | null, delta: number, post: boolean, nodeUser: string): boolean => {
  if (content === null) return false
  if (delta !== 0) return true
  let artifact: Buffer
  try {
    artifact = Zlib.inflateSync(content.subarray(4))
  } catch {
    return true
  }
  if (!artifact.includes("ocx")) return false
  if (!post) return true
  try {
    // a run with no valid to too: the round decides whether this node is the one to refuse it
    return actedOn(readMessage(parsePostCards(artifact).text ?? ""), "", nodeUser, true) !== undefined
  } catch {
    return true
  }
}

/** What arrived after the cursor, and whether any of it may hold a message for `nodeUser`'s round. One short read. */
export const readArrivals = (db: BetterSqlite3.Database, cursor: Cursor, nodeUser: string): Arrivals => {
  const forum = tableExists(db, "forumpost")
  const tickets = tableExists(db, "ticketchng")
  const rows = db.prepare<[number, number, number], { rid: number; rcvid: number; post: number; ticket: number }>(
    `SELECT b.rid, b.rcvid,
       ${forum ? "EXISTS (SELECT 1 FROM forumpost f WHERE f.fpid = b.rid)" : "0"} AS post,
       ${tickets ? "EXISTS (SELECT 1 FROM ticketchng c WHERE c.tkt_rid = b.rid)" : "0"} AS ticket
     FROM blob b WHERE b.rcvid >= ? AND (b.rcvid > ? OR b.rid > ?) AND b.size >= 0`
  ).all(cursor.rcvid, cursor.rcvid, cursor.rid)
  let newest: Cursor | undefined
  let maybe = 0
  const content = db.prepare<[number], { content: Buffer | null; delta: number }>(
    "SELECT b.content, EXISTS (SELECT 1 FROM delta d WHERE d.rid = b.rid) AS delta FROM blob b WHERE b.rid = ?"
  )
  for (const row of rows) {
    if (newest === undefined || row.rcvid > newest.rcvid || (row.rcvid === newest.rcvid && row.rid > newest.rid)) {
      newest = { rcvid: row.rcvid, rid: row.rid }
    }
    if (row.post !== 0 || row.ticket !== 0) {
      const stored = content.get(row.rid)
      if (stored !== undefined && mayHoldMessage(stored.content, stored.delta, row.post !== 0 && row.ticket === 0, nodeUser)) maybe++
    }
  }
  return { count: rows.length, newest, maybe }
}

/** Whether a message the round acts on is still after the node's cursor: a round held it back or failed (RoundAgain.ts). */
export const workWaits = (root: string, repository: string, nodeUser: string): boolean => {
  const from = readCursor(cursorFileOf(root, repository, nodeUser))
  if (from === undefined) return false
  const db = openDatabase(repository, { readonly: true, fileMustExist: true })
  try {
    return readArrivals(db, from, nodeUser).maybe > 0
  } finally {
    db.close()
  }
}

/**
 * The whole call; resolves with the entry it logged. Never throws, never writes to stdout or stderr.
 * `again`: called by the hook's retrier (HookAgain.ts), which is not started again from here.
 */
export const runHook = async (argv: ReadonlyArray<string>, program: string | undefined, options: { readonly again?: boolean } = {}): Promise<HookLogEntry | undefined> => {
  const began = performance.now()
  const args = parseHookArgs(argv)
  if (typeof args === "string") return undefined // no log named: nowhere to say it
  const given = readGiven()
  const repository = canonicalRepository(args.repository)
  const base = { at: new Date().toISOString(), pid: process.pid, repository, given }
  // a host whose Node changed under the release: said plainly, before an addon fails to load
  const release = releaseDirOfProgram(program)
  const mismatch = release === undefined ? undefined : nodeMismatch(release)
  if (mismatch !== undefined) {
    const logged: HookLogEntry = { ...base, did: [mismatch], ms: Math.round(performance.now() - began) }
    appendHookLog(args.log, logged)
    return logged
  }
  // the git export first: a check-in exports whether or not this repository has a node
  let exporting: string | undefined
  try {
    exporting = await exportWhenDue(repository, program)
  } catch (e) {
    exporting = `the git export was not started: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`
  }
  // a round that left a message waiting (held back for want of room, or failed) is tried again
  let tryAgain = (): ReadonlyArray<string> => []
  const finish = (entry: Omit<HookLogEntry, "at" | "pid" | "repository" | "given">): HookLogEntry => {
    const did = [
      ...(options.again === true ? ["tried again by ocx2-hook --again: a message waited after the cursor"] : []),
      ...(exporting === undefined ? [] : [exporting]), ...entry.did, ...tryAgain()
    ]
    const logged: HookLogEntry = { ...base, ...entry, did, ms: Math.round(performance.now() - began) }
    appendHookLog(args.log, logged)
    return logged
  }
  try {
    const root = hookRoot(args, program)
    if (root === undefined) return finish({ did: ["no release root: give --root ROOT or run ROOT/ocx2-hook"] })
    const node = nodeOf(root, repository)
    if (node === undefined) return finish({ did: ["no node on this repository: nothing to decide (ocx2 hook --node USER starts one)"] })
    // a supervisor running for the node heard this receipt already (inotify); woken all the same, it decides
    const supervisor = wakeSupervisor(root, repository, node.user)
    if (supervisor !== undefined) return finish({ node: node.user, did: [`woke the node's supervisor (pid ${supervisor.pid}), which decides what arrived`] })
    const cursorFile = cursorFileOf(root, repository, node.user)
    const from = readCursor(cursorFile)
    if (from === undefined) return finish({ node: node.user, did: [`no cursor ${cursorFile}: run ocx2 hook --node ${node.user} to start the node`] })
    const db = openDatabase(repository, { readonly: true, fileMustExist: true })
    let arrivals: Arrivals
    let halfWritten: number
    try {
      // a post caught half-way through its page's statements (fast mode's poller can run the
      // backoffice between them) has no forumpost row yet and looks like no post: passed by here,
      // its run would wait for the node's next start. The round waits for it under round.lock.
      // Both questions are asked of one snapshot: asked apart, the row could land between them,
      // and a post read as no post would seem settled
      ;({ arrivals, halfWritten } = db.transaction(() => {
        const read = readArrivals(db, from, node.user)
        return { arrivals: read, halfWritten: read.maybe > 0 ? 0 : unsettledAfter(db, from).count }
      })())
    } finally {
      db.close()
    }
    // a session in care may be given any post, ticket change or check-in (2.11): the round reads them
    if (arrivals.maybe === 0 && halfWritten === 0 && (arrivals.count === 0 || !anySession(root))) {
      const to = arrivals.newest ?? from
      if (arrivals.newest !== undefined) advanceCursor(cursorFile, arrivals.newest)
      return finish({
        node: node.user, from, to,
        did: [arrivals.count === 0 ? "nothing arrived after the cursor" : `${arrivals.count} artifacts arrived, none a run for ${node.user}, a stop or a publish: nothing to decide`]
      })
    }
    // only past the cheap question: a call that loads no round moved the cursor past all it read
    if (options.again !== true) {
      tryAgain = () => {
        try {
          return workWaits(root, repository, node.user) ? [startAgain(argv, program)] : []
        } catch (e) {
          return [`whether a message still waits cannot be read (${e instanceof Error ? e.message.split("\n")[0] : String(e)}): ${startAgain(argv, program)}`]
        }
      }
    }
    const { runHookRound } = await loadRound(program)
    const round = await runHookRound({
      root,
      repository,
      nodeUser: node.user,
      serverUrl: node.serverUrl,
      passwordsFile: undefined
    })
    return finish({ node: node.user, from: round.from, to: round.to, did: round.did })
  } catch (e) {
    return finish({ did: [`failed: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`] })
  }
}

/**
 * The round (Effect, the protocol's schemas, the sandbox) is a bundle of its own beside the hook
 * (ocx2-hook-round), loaded only when something may hold a message: parsing it is most of what
 * a call that decides nothing would cost. From source (tests), that bundle's source.
 */
const loadRound = (program: string | undefined) => hookRound.load(program)

/** What the hook's retrier (HookAgain.ts) needs of the hook. */
const againDeps = {
  nodeOf: (argv: ReadonlyArray<string>, program: string | undefined): AgainNode | undefined => {
    const args = parseHookArgs(argv)
    if (typeof args === "string") return undefined
    const root = hookRoot(args, program)
    const repository = canonicalRepository(args.repository)
    const node = root === undefined ? undefined : nodeOf(root, repository)
    if (root === undefined || node === undefined) return undefined
    return { root, repository, user: node.user, cursorFile: cursorFileOf(root, repository, node.user) }
  },
  // a node removed (its repository, or its entry in node.json, gone) has nothing waiting any more
  waits: (node: AgainNode) =>
    Fs.existsSync(node.repository) && nodeOf(node.root, node.repository)?.user === node.user && workWaits(node.root, node.repository, node.user),
  short: (node: AgainNode) => holdsBack(diskRoom(node.root)),
  supervised: (node: AgainNode) => runningSupervisor(node.root, node.repository, node.user) !== undefined,
  hook: runHook
}

/** The program's entry: output guarded (Fossil closed it), one call, then exit. */
export const hookMain = (argv: ReadonlyArray<string>, program: string | undefined): void => {
  // a write to the closed pipe raises EPIPE asynchronously; nothing here writes, but a library might
  process.stdout.on("error", () => {})
  process.stderr.on("error", () => {})
  if (argv[0] === "--poll" && argv.length === 2) {
    // fast mode's poller (src/node/BackofficePoller.ts), run as a service or started by hook --fast:
    // a failure exits non-zero, so that a service manager starts it again
    const failed = (e: unknown) => {
      process.stderr.write(`ocx2-hook --poll: ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`)
      process.exit(1)
    }
    process.on("uncaughtException", failed)
    process.on("unhandledRejection", failed)
    pollBackoffice(Path.resolve(argv[1]!)).then(() => process.exit(0), failed)
    return
  }
  process.on("uncaughtException", () => process.exit(0))
  process.on("unhandledRejection", () => process.exit(0))
  // started by the node's backoffice (fast mode): the configuration of its own is not the hook's
  restoreHostFossilHome()
  if (argv[0] === "--again") {
    againMain(argv.slice(1), program, againDeps).then(
      () => process.exit(0),
      () => process.exit(0)
    )
    return
  }
  if (argv[0] === "--export" && argv.length === 2) {
    // the hook's detached exporter (src/git/ExportHook.ts): its outcome is kept beside the repository
    exportDetached(Path.resolve(argv[1]!)).then(
      () => process.exit(0),
      () => process.exit(0)
    )
    return
  }
  runHook(argv, program).then(
    () => process.exit(0),
    () => process.exit(0)
  )
}
