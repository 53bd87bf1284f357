// 2.11 on the node's side: as the node acts on what arrived (the hook's round on the server, the
// poll's round on a clone), each arrival that passes a session's seven filters is appended to
// that session's ROOT/care/RUN.inbox as {"deliver": HASH, "line": LINE}, in the server's order.
// The run's watcher gives the line to its process. An arrival already in the inbox is not
// appended again, so a round that died after appending and before moving its cursor repeats
// nothing when the next round reads the same arrivals.

import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { CareDirectory } from "../../services/CareDirectory.js"
import { Receipts } from "../../services/Receipts.js"
import type { Item } from "../../services/Repository.js"
import { deliveryLine, filterArrival, type Arrival, type SessionView } from "../protocol/Subscriptions.js"
import { releasePaths } from "../release/ReleasePaths.js"
import { cloneUsers } from "../root/CloneUsers.js"
import type { NodeConfig } from "../root/NodeConfig.js"
import { readRunRecord } from "../pickup/RunRecord.js"
import type { SessionFile } from "../care/SessionFiles.js"
import { deliveryDiskBound, inboxWaiting } from "../watcher/Inbox.js"

/** What a session may be given, from what a round read; undefined for anything else. */
export const arrivalOf = (item: Item): Arrival | undefined => {
  const at = { hash: item.hash, sender: item.sender, order: { rcvid: item.rcvid, rid: item.rid } }
  switch (item._tag) {
    case "Post":
      return { _tag: "Post", ...at, thread: item.root, text: item.text }
    case "TicketChange":
      return { _tag: "Change", ...at, ticket: item.ticket, text: item.text }
    case "Checkin":
      return item.branch === undefined ? undefined : { _tag: "Checkin", ...at, branch: item.branch, comment: item.comment }
    default:
      return undefined
  }
}

/** 2.11's filter 6 alone: whether an arrival is where some session listens (a clone asks the server about those only). */
export const whereSomeSessionListens = (sessions: ReadonlyArray<SessionFile>, arrival: Arrival): boolean =>
  sessions.some((s) =>
    arrival._tag === "Post" ? s.thread === arrival.thread
    : arrival._tag === "Change" ? s.ticket === arrival.ticket
    : s.checkins.includes(arrival.branch)
  )

/** The place of the session's started in the server's order, read from the record when its file has none yet. */
const startedOf = (session: SessionFile) =>
  Effect.gen(function*() {
    if (session.started !== undefined) return { rcvid: session.started.rcvid, rid: session.started.rid }
    const record = yield* readRunRecord(session.run)
    if (record.started === undefined) return undefined
    const [answer] = yield* (yield* Receipts).receipts([record.started.hash])
    return answer?._tag === "Received" ? { rcvid: answer.rcvid, rid: answer.rid } : undefined
  })

/**
 * Which of `wanted` (this round's arrivals for the session) its inbox already holds a delivery of:
 * a round that died after appending and before moving its cursor left them at the inbox's end.
 * The inbox is read backwards from its end, a window at a time, only until a delivery of something
 * else: the rounds append in the server's order, so what lies before that was delivered before
 * this round's arrivals. The whole inbox was read on every round, which made a round of one post
 * in a thread of 5,000 read 5,000 lines (bench/sessions); the watcher drops a hash it has given
 * anyway, so this spares the inbox a second copy, and is not what keeps a delivery once.
 */
const alreadyInInbox = (run: string, wanted: ReadonlySet<string>) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    const size = inboxSize(care.path, run)
    const hashes = new Set<string>()
    for (let window = 16 * 1024; ; window *= 4) {
      const from = Math.max(0, size - window)
      // read from inside a line, the window's first line is a piece of it: no piece of a line opens
      // as a delivery does (the line inside is JSON in a string, its quotes escaped)
      const lines = (yield* care.readInbox(run, from)).lines
      let before = from === 0
      for (let i = lines.length - 1; i >= 0; i--) {
        // written by deliverArrivals below, in this form: the hash is read without parsing the line
        const hash = /^\{"deliver":"([0-9a-f]+)"/.exec(lines[i]!)?.[1]
        if (hash === undefined) continue // a stop, or the window's first piece
        if (!wanted.has(hash)) {
          before = true
          break
        }
        hashes.add(hash)
      }
      if (before) return hashes
    }
  })

/** The size of the run's inbox on disk (0 when there is none yet, or the care directory is not on disk: then it is read whole). */
const inboxSize = (careDir: string, run: string): number => {
  try {
    return Fs.statSync(Path.join(careDir, `${run}.inbox`)).size
  } catch {
    return 0
  }
}

/**
 * Appends a delivery to the run's inbox unless the inbox would then hold more than the disk bound
 * (ROOT/settings/delivery-disk-bound) that its watcher has not given: such a delivery is never
 * given (2.11: a process that does not read is given nothing more), and the run's log names it.
 */
export const appendWithinBound = (root: string, run: string, line: string, hash: string) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    const bound = deliveryDiskBound(releasePaths(root).settings).bytes
    const waiting = inboxWaiting(care.path, run)
    const bytes = Buffer.byteLength(line) + 1
    if (waiting + bytes > bound) {
      yield* care.appendLog(run,
        `${new Date().toISOString()} delivery ${hash} not given: its inbox holds ${waiting} bytes its process has not read, and ${bytes} more would pass the disk bound of ${bound}\n`
      ).pipe(Effect.ignore)
      return false
    }
    yield* care.appendInbox(run, line)
    return true
  })

/**
 * Appends each arrival (in the server's order) to the inbox of every session in care it passes
 * the filters of; says what it did, one line per session given anything.
 */
export const deliverArrivals = (config: NodeConfig, arrivals: ReadonlyArray<Arrival>) =>
  Effect.gen(function*() {
    const did: Array<string> = []
    if (arrivals.length === 0) return did
    const care = yield* CareDirectory
    const sessions = yield* care.sessions
    if (sessions.length === 0) return did
    const clones = yield* cloneUsers(releasePaths(config.root).node)
    // the lock is not probed: a file whose watcher died (and no recovery removed it yet) only has
    // lines appended to an inbox nobody reads, and recovery answers that run lost
    for (const session of sessions) {
      const view: SessionView = {
        session: true,
        started: yield* startedOf(session),
        processUser: session.processUser,
        cloneUsers: clones,
        ...(session.thread !== undefined ? { thread: session.thread } : {}),
        ...(session.ticket !== undefined ? { ticket: session.ticket } : {}),
        checkins: session.checkins,
        hears: session.hears
      }
      const passing = arrivals.filter((a) => filterArrival(view, a)._tag === "Pass")
      if (passing.length === 0) continue
      const inInbox = yield* alreadyInInbox(session.run, new Set(passing.map((a) => a.hash)))
      let appended = 0
      let past = 0
      for (const arrival of passing) {
        if (inInbox.has(arrival.hash)) continue
        const line = JSON.stringify({ deliver: arrival.hash, line: deliveryLine(arrival) })
        if (!(yield* appendWithinBound(config.root, session.run, line, arrival.hash))) {
          past++
          continue
        }
        appended++
      }
      did.push(`${session.run}: ${appended} ${appended === 1 ? "delivery" : "deliveries"} to its inbox` +
        (past > 0 ? `; ${past} not given: its inbox holds past the disk bound what its process has not read` : ""))
    }
    return did
  })
