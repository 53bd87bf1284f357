// Following one run as it happens (watch, the run page's stream): its state from the record, read
// again whenever the repository file changes; what its process prints, from ROOT/care/RUN.stream as
// the launcher appends it; and, for a session, each delivery the node's rounds append to
// ROOT/care/RUN.inbox. Until the run is over (its ended counts), then the outcome.

import * as Fs from "node:fs"
import * as Path from "node:path"
import type { MessageRow } from "../fossil/ReadMessages.js"
import { capabilitiesReader, postMessage, threadPosts } from "../fossil/ReadMessages.js"
import { resolveName, ticketView } from "../fossil/ReadRecord.js"
import { openDatabase } from "../fossil/Sqlite.js"
import { type RunSummary, summarizeRuns } from "../runs/RunStates.js"
import { readStreamFrom, runStreamFile } from "./StreamFile.js"

export type WatchEvent =
  | { readonly type: "state"; readonly at: number; readonly summary: RunSummary }
  | { readonly type: "output"; readonly at: number; readonly stream: "stdout" | "stderr"; readonly text: string }
  | { readonly type: "delivery"; readonly at: number; readonly hash: string; readonly line: string }
  | { readonly type: "missed"; readonly at: number; readonly what: string }
  | { readonly type: "end"; readonly at: number; readonly summary: RunSummary }

export interface RunLocation {
  readonly path: string
  readonly role: "served" | "clone"
}

/** What a name that holds no run is told; the pages answer it 404 (isNoRun). */
export const noRunProblem = (name: string): string => `${name} names no run: no post or ticket change holding a run has that hash`
export const isNoRun = (message: string | undefined): boolean =>
  message !== undefined && / names no run: no post or ticket change holding a run has that hash$/.test(message)

/** The run's summary as the record holds it now, or a problem naming why there is none. */
export const readRunSummary = (repository: RunLocation, name: string): { readonly summary: RunSummary } | { readonly problem: string } => {
  const db = openDatabase(repository.path, { readonly: true, fileMustExist: true })
  try {
    const o = { senders: repository.role === "served" }
    const named = resolveName(db, name)
    let rows: ReadonlyArray<MessageRow> = []
    let hash: string | undefined
    if (named._tag === "Post") {
      const posts = threadPosts(db, named.root, o)
      const title = posts[0]?.title
      rows = posts.flatMap((p) => {
        const row = postMessage(p)
        return row === undefined ? [] : [{ ...row, place: { _tag: "Thread" as const, root: posts[0]?.hash ?? row.hash, title } }]
      })
      hash = named.hash
    } else if (named._tag === "Ticket" && named.change !== undefined) {
      const ticket = ticketView(db, named.ticket, o)
      rows = ticket.changes.flatMap((c) => {
        const row = postMessage({
          hash: c.hash, rid: c.rid, rcvid: c.rcvid, time: c.time, sender: c.sender, user: c.user, root: ticket.ticket,
          inReplyTo: undefined, editOf: undefined, title: undefined, mimetype: "text/x-markdown", text: c.text, private: c.private
        })
        return row === undefined ? [] : [{ ...row, place: { _tag: "Ticket" as const, ticket: ticket.ticket } }]
      })
      hash = named.change
    } else if (named._tag === "Ambiguous") {
      return { problem: `${name} names more than one ${named.what}: give more digits` }
    }
    const served = repository.role === "served"
    const summary = hash === undefined
      ? undefined
      : summarizeRuns(rows, (r) => (served ? r.sender : r.user || undefined), capabilitiesReader(db)).find((s) => s.run === hash)
    return summary === undefined ? { problem: noRunProblem(name) } : { summary }
  } finally {
    db.close()
  }
}

export const isOver = (summary: RunSummary): boolean => summary.state !== "waiting" && summary.state !== "started"

export interface FollowOptions {
  readonly repository: RunLocation
  readonly run: string
  /** ROOT/care of this host's node, when it has one: the output and deliveries are read there */
  readonly careDir: string | undefined
  /** where in RUN.stream to begin (0: everything printed so far) */
  readonly offset?: number
  /** stop following at this moment (milliseconds), the run still going */
  readonly deadline?: number
  readonly signal?: AbortSignal
  readonly emit: (event: WatchEvent) => void
  /** where RUN.stream has been read to, after each read that moved it (a reader that reconnects goes on from there) */
  readonly reached?: (offset: number) => void
}

export interface Followed {
  readonly summary: RunSummary
  readonly over: boolean
  /** where RUN.stream was read to: give it as offset to go on from there */
  readonly offset: number
}

const sameState = (a: RunSummary, b: RunSummary) => a.state === b.state && a.endedHash === b.endedHash && a.startedHash === b.startedHash

/** A file's change stamp, to read the record again only when it changed. */
const stamp = (file: string): string => {
  const parts: Array<string> = []
  for (const f of [file, `${file}-journal`, `${file}-wal`]) {
    try {
      const s = Fs.statSync(f)
      parts.push(`${s.mtimeMs}:${s.size}`)
    } catch {
      parts.push("-")
    }
  }
  return parts.join("/")
}

/**
 * Follows the run until it is over (or the deadline, or the signal), emitting what happens in
 * order. The stream is looked at every 50 ms and whenever the care directory changes; the record
 * when the repository file changed, and every 2 s anyway.
 */
export const follow = async (options: FollowOptions): Promise<Followed> => {
  const first = readRunSummary(options.repository, options.run)
  if ("problem" in first) throw new Error(first.problem)
  const run = first.summary.run
  let summary = first.summary
  options.emit({ type: "state", at: Date.now(), summary })
  const streamFile = options.careDir === undefined ? undefined : runStreamFile(options.careDir, run)
  const inboxFile = options.careDir === undefined ? undefined : Path.join(options.careDir, `${run}.inbox`)
  let offset = options.offset ?? 0
  let inboxOffset = 0
  let inboxRest = ""

  const drainStream = () => {
    if (streamFile === undefined) return
    const read = readStreamFrom(streamFile, offset)
    if (read.restarted) options.emit({ type: "missed", at: Date.now(), what: "output printed while this reader was behind (the stream keeps its last 4 MiB)" })
    const moved = read.offset !== offset
    offset = read.offset
    for (const chunk of read.chunks) options.emit({ type: "output", at: chunk.at, stream: chunk.stream, text: chunk.text })
    if (moved) options.reached?.(offset)
  }
  const drainInbox = () => {
    if (inboxFile === undefined || !summary.session) return
    let text: string
    try {
      const fd = Fs.openSync(inboxFile, "r")
      try {
        const size = Fs.fstatSync(fd).size
        if (size <= inboxOffset) return
        const buffer = Buffer.alloc(size - inboxOffset)
        Fs.readSync(fd, buffer, 0, buffer.length, inboxOffset)
        inboxOffset = size
        text = inboxRest + buffer.toString("utf8")
      } finally {
        Fs.closeSync(fd)
      }
    } catch {
      return
    }
    const lines = text.split("\n")
    inboxRest = lines.pop() ?? ""
    for (const line of lines) {
      try {
        const value = JSON.parse(line) as { deliver?: unknown; line?: unknown }
        if (typeof value.deliver === "string" && typeof value.line === "string") {
          options.emit({ type: "delivery", at: Date.now(), hash: value.deliver, line: value.line })
        }
      } catch {
        // not a line of the inbox's
      }
    }
  }

  let recordStamp = stamp(options.repository.path)
  let recordRead = Date.now()
  const readRecordIfChanged = (force: boolean) => {
    const now = stamp(options.repository.path)
    if (!force && now === recordStamp && Date.now() - recordRead < 2000) return
    recordStamp = now
    recordRead = Date.now()
    const next = readRunSummary(options.repository, run)
    if ("problem" in next) return
    if (!sameState(next.summary, summary)) {
      summary = next.summary
      options.emit({ type: "state", at: Date.now(), summary })
    } else summary = next.summary
  }

  let wake: (() => void) | undefined
  let watcher: Fs.FSWatcher | undefined
  if (options.careDir !== undefined) {
    try {
      watcher = Fs.watch(options.careDir, { persistent: false }, (_event, name) => {
        if (name === null || String(name).startsWith(run)) wake?.()
      })
    } catch {
      // no care directory to watch: the timer alone
    }
  }
  const onAbort = () => wake?.()
  options.signal?.addEventListener("abort", onAbort)
  try {
    for (;;) {
      drainStream()
      drainInbox()
      readRecordIfChanged(false)
      if (isOver(summary)) {
        // what the process printed before its end lands before its ended is written
        drainStream()
        options.emit({ type: "end", at: Date.now(), summary })
        return { summary, over: true, offset }
      }
      if (options.signal?.aborted === true || (options.deadline !== undefined && Date.now() >= options.deadline)) {
        return { summary, over: false, offset }
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          wake = undefined
          resolve()
        }, 50)
        wake = () => {
          clearTimeout(timer)
          wake = undefined
          resolve()
        }
      })
    }
  } finally {
    watcher?.close()
    options.signal?.removeEventListener("abort", onAbort)
  }
}
