// ROOT/care/RUN.outbox (2.15): every report a watcher has to send for its run, kept on disk
// before it is sent, so that neither the server being down nor the watcher's own death loses it.
// Each report is composed once, as an artifact with a fixed hash: sending it again is the same
// artifact (the server keeps one), so a resend never makes a second started or ended. The file is
// one JSON line per event: {"keep": REPORT} when a report is composed, {"sent": HASH} once the
// server holds it, {"dropped": HASH, "why": ...} when it must not be sent (another ended counts).
// Only the run's lock holder reads or writes it: the watcher while it lives, then whoever takes
// the free lock (the node's next call, or recovery), which sends what is left.

import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { CareDirectory } from "../../services/CareDirectory.js"
import { ReceiptsUnavailable, ServerUnreachable } from "../../services/Receipts.js"
import { Repository, RepositoryUnavailable, WriteFailed, WriteNotConfirmed } from "../../services/Repository.js"
import { type Artifact, cardValue, composeForumPost, composeTicketChange, parseArtifact } from "../fossil/Artifact.js"
import { sha3 } from "../fossil/Hash.js"
import { readRunRecord, type RunRecord } from "../pickup/RunRecord.js"

/** "report": kept logs; "verdict": the ci tag */
export type ReportKind = "started" | "ended" | "report" | "verdict"

export interface OutboxReport {
  readonly kind: ReportKind
  readonly hash: string
  /** the user it is written as (the node user) */
  readonly user: string
  /** the artifact's bytes, base64 */
  readonly bytes: string
  /** the publications entry this reply names the files of */
  readonly for?: string
}

/**
 * An unversioned file of the run's `unversioned_files`, kept once its process ended: its bytes in
 * RUN.outbox.d/CONTENT (the outbox's lines stay small). `hash` names the entry (the file's name
 * and content), `content` is the bytes' SHA3-256.
 */
export interface OutboxUnversioned {
  readonly kind: "unversioned"
  readonly hash: string
  readonly user: string
  readonly name: string
  readonly content: string
  readonly size: number
}

/**
 * The reply naming the run's published files (2.10), to be composed once every file in it is
 * sent or dropped: what each became is known only then. `files` in the run's order; `entry` for
 * a file kept to be sent, `why` for one that is not published.
 */
export interface OutboxPublications {
  readonly kind: "publications"
  readonly hash: string
  readonly user: string
  readonly files: ReadonlyArray<{ readonly as: string; readonly entry?: string; readonly why?: string }>
}

export type OutboxEntry = OutboxReport | OutboxUnversioned | OutboxPublications

export interface OutboxState {
  readonly reports: ReadonlyArray<OutboxEntry>
  /** kept and neither sent nor dropped, in the order kept */
  readonly unsent: ReadonlyArray<OutboxEntry>
  /** entries dropped, and why */
  readonly dropped: ReadonlyMap<string, string>
}

const isArtifactReport = (e: OutboxEntry): e is OutboxReport =>
  e.kind === "started" || e.kind === "ended" || e.kind === "report" || e.kind === "verdict"

export const outboxFile = (careDir: string, run: string): string => Path.join(careDir, `${run}.outbox`)
/** where kept unversioned files wait, by their content's hash */
const filesDir = (careDir: string, run: string): string => Path.join(careDir, `${run}.outbox.d`)

const appendLine = (file: string, value: object) => {
  const fd = Fs.openSync(file, "a", 0o600)
  try {
    Fs.writeSync(fd, `${JSON.stringify(value)}\n`)
    Fs.fsyncSync(fd)
  } finally {
    Fs.closeSync(fd)
  }
}

/** What the outbox holds; a line cut short by a death while writing it is passed by. */
export const readOutbox = (careDir: string, run: string): OutboxState => {
  let text: string
  try {
    text = Fs.readFileSync(outboxFile(careDir, run), "utf8")
  } catch {
    return { reports: [], unsent: [], dropped: new Map() }
  }
  const reports: Array<OutboxEntry> = []
  const settled = new Set<string>()
  const dropped = new Map<string, string>()
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue
    let event: { keep?: OutboxEntry; sent?: unknown; dropped?: unknown; why?: unknown }
    try {
      event = JSON.parse(line) as typeof event
    } catch {
      continue
    }
    const kept = event.keep
    if (kept !== undefined && typeof kept.hash === "string" && typeof kept.user === "string" && wellFormed(kept)) {
      if (!reports.some((r) => r.hash === kept.hash)) reports.push(kept)
    }
    if (typeof event.sent === "string") settled.add(event.sent)
    if (typeof event.dropped === "string") {
      settled.add(event.dropped)
      dropped.set(event.dropped, typeof event.why === "string" ? event.why : "dropped")
    }
  }
  return { reports, unsent: reports.filter((r) => !settled.has(r.hash)), dropped }
}

const wellFormed = (e: OutboxEntry): boolean =>
  e.kind === "unversioned" ? typeof e.name === "string" && typeof e.content === "string"
  : e.kind === "publications" ? Array.isArray(e.files)
  : typeof e.bytes === "string"

/** The runs whose outbox is on this host (settled or not). */
export const outboxRuns = (careDir: string): ReadonlyArray<string> => {
  try {
    return Fs.readdirSync(careDir).filter((n) => n.endsWith(".outbox")).map((n) => n.slice(0, -".outbox".length)).sort()
  } catch {
    return []
  }
}

export const artifactOf = (report: OutboxReport): Artifact => ({ hash: report.hash, bytes: Buffer.from(report.bytes, "base64") })

/** Composes a report where the run is (a reply in its thread, or a change to its ticket), once: its date is fixed now. */
export const composeReport = (record: Pick<RunRecord, "hash" | "place">, user: string, kind: ReportKind, text: string) =>
  Effect.gen(function*() {
    let artifact: Artifact
    if (record.place._tag === "Ticket") {
      artifact = composeTicketChange({ user, date: new Date(), ticket: record.place.ticket, fields: { icomment: text } })
    } else {
      // the thread's first post, as the run's own G card names it (the run is the first when it has none);
      // read from the repository file alone, so composing needs no server
      const repository = yield* Repository
      const root = cardValue(parseArtifact(yield* repository.artifact(record.hash)), "G") ?? record.hash
      artifact = composeForumPost({ user, date: new Date(), root, replyTo: record.hash, text })
    }
    const report: OutboxReport = { kind, hash: artifact.hash, user, bytes: artifact.bytes.toString("base64") }
    return report
  })

/** Keeps a composed report in the run's outbox (on disk, synced) before anything tries to send it. */
export const keepReport = (run: string, report: OutboxEntry) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    yield* Effect.try(() => appendLine(outboxFile(care.path, run), { keep: report }))
  })

/**
 * Keeps the run's files to publish (their bytes as they are now) and the reply that will name
 * them, before ended is written: a watcher that dies after ended leaves them to whoever takes
 * the run's lock next, and an outage of any length is waited out.
 */
export const keepPublications = (
  run: string,
  user: string,
  files: ReadonlyArray<{ readonly as: string; readonly content: Buffer } | { readonly as: string; readonly why: string }>
) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    const dir = filesDir(care.path, run)
    const listed: Array<{ as: string; entry?: string; why?: string }> = []
    for (const file of files) {
      if ("why" in file) {
        listed.push({ as: file.as, why: file.why })
        continue
      }
      const content = sha3(file.content)
      const entry: OutboxUnversioned = { kind: "unversioned", hash: sha3(Buffer.from(`${file.as}\0${content}`)), user, name: file.as, content, size: file.content.length }
      yield* Effect.try(() => {
        Fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
        const to = Path.join(dir, content)
        if (!Fs.existsSync(to)) {
          Fs.writeFileSync(`${to}.part`, file.content, { mode: 0o600 })
          Fs.renameSync(`${to}.part`, to)
        }
      })
      yield* keepReport(run, entry)
      listed.push({ as: file.as, entry: entry.hash })
    }
    const publications: OutboxPublications = { kind: "publications", hash: sha3(Buffer.from(`${run}\0${JSON.stringify(listed)}`)), user, files: listed }
    yield* keepReport(run, publications)
  })

const settle = (run: string, hash: string, how: "sent" | "dropped", why?: string) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    yield* Effect.try(() => appendLine(outboxFile(care.path, run), how === "sent" ? { sent: hash } : { dropped: hash, why }))
  })

/** The outbox file (and its kept files) go once everything in it is sent or dropped. */
export const removeIfSettled = (run: string) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    if (readOutbox(care.path, run).unsent.length === 0) {
      Fs.rmSync(filesDir(care.path, run), { recursive: true, force: true })
      Fs.rmSync(outboxFile(care.path, run), { force: true })
    }
  })

/**
 * Sends one kept unversioned file. The server being down fails it (it stays for the next try);
 * a server that will not take it has it dropped, with its words, for the reply to say.
 */
export const sendUnversioned = (run: string, entry: OutboxUnversioned) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    const repository = yield* Repository
    const content = yield* Effect.try({
      try: () => Fs.readFileSync(Path.join(filesDir(care.path, run), entry.content)),
      catch: () => "its kept bytes are gone" as const
    }).pipe(Effect.either)
    if (content._tag === "Left") {
      yield* settle(run, entry.hash, "dropped", content.left)
      return "dropped" as Sent
    }
    const written = yield* repository.putUnversioned({ user: entry.user, name: entry.name, content: content.right }).pipe(
      Effect.catchAll((e) => serverDown(e) ? Effect.fail(e) : Effect.succeed(e.message))
    )
    if (typeof written === "string") {
      yield* settle(run, entry.hash, "dropped", written)
      return "dropped" as Sent
    }
    yield* settle(run, entry.hash, "sent")
    return "sent" as Sent
  })

/**
 * The reply naming the published files, composed once every file it names is settled (sent, or
 * dropped with the server's words) and kept like every report; composed at most once, even by
 * a next holder of the run's lock after a death between the two.
 */
export const composePublicationsReply = (run: string, publications: OutboxPublications) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    const state = readOutbox(care.path, run)
    const already = state.reports.find((r): r is OutboxReport => isArtifactReport(r) && r.for === publications.hash)
    if (already !== undefined) {
      yield* settle(run, publications.hash, "sent")
      return already
    }
    const entries = new Map(state.reports.filter((r): r is OutboxUnversioned => r.kind === "unversioned").map((r) => [r.hash, r]))
    const lines = publications.files.map((f) => {
      const entry = f.entry === undefined ? undefined : entries.get(f.entry)
      if (entry === undefined) return `- ${f.as}: not published: ${f.why ?? "it was not kept"}`
      const why = state.dropped.get(entry.hash)
      return why === undefined ? `- ${f.as}: ${entry.size} bytes, hash ${entry.content}` : `- ${f.as}: not published: ${why}`
    })
    const record = yield* readRunRecord(run)
    const composed = yield* composeReport(record, publications.user, "report", ["Unversioned files:", "", ...lines].join("\n"))
    const reply: OutboxReport = { ...composed, for: publications.hash }
    yield* keepReport(run, reply)
    yield* settle(run, publications.hash, "sent")
    return reply
  })

export type Sent = "sent" | "already" | "dropped"

/**
 * Sends kept reports, idempotently, in one write where they share a user (one `fossil` process
 * on the server's host holds the served file once, not once per report). A started or ended is
 * sent only while none counts in `record` (read under the run's lock just before); one of the
 * same hash counting is this one, already received. Each is settled in the outbox once the
 * server holds it. All of one write land or none does.
 */
export const sendReports = (run: string, reports: ReadonlyArray<OutboxReport>, record: RunRecord | undefined) =>
  Effect.gen(function*() {
    const repository = yield* Repository
    const outcome = new Map<string, Sent>()
    const toSend: Array<OutboxReport> = []
    for (const report of reports) {
      const counted = report.kind === "ended" ? record?.ended : report.kind === "started" ? record?.started : undefined
      if (counted === undefined) toSend.push(report)
      else if (counted.hash === report.hash) {
        yield* settle(run, report.hash, "sent")
        outcome.set(report.hash, "already")
      } else {
        yield* settle(run, report.hash, "dropped", `another ${report.kind} counts: ${counted.hash}`)
        outcome.set(report.hash, "dropped")
      }
    }
    for (const user of [...new Set(toSend.map((r) => r.user))]) {
      const own = toSend.filter((r) => r.user === user)
      yield* repository.putAll(user, own.map(artifactOf))
      for (const report of own) {
        yield* settle(run, report.hash, "sent")
        outcome.set(report.hash, "sent")
      }
    }
    return reports.map((r) => outcome.get(r.hash)!)
  })

/** One kept report, as `sendReports`. */
export const sendReport = (run: string, report: OutboxReport, record: RunRecord | undefined) =>
  Effect.map(sendReports(run, [report], record), (sent) => sent[0]!)

/**
 * What a watcher that is gone left unsent, sent now by whoever holds the run's lock (the node's
 * next call, recovery, or the run's next watcher), after reading the run's record: an ended while
 * none counts, kept logs and other reports always (the same artifact is kept once). A started
 * left unsent is dropped: its program was never launched (it waits for the server's receipt of
 * started), and the run is decided again. The rest go in one write, then the unversioned files
 * and the reply naming them; what the server does not take because it is down stays for the
 * next try.
 */
export const finishOutbox = (run: string) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    const { unsent } = readOutbox(care.path, run)
    if (unsent.length === 0) {
      yield* removeIfSettled(run)
      return [] as ReadonlyArray<string>
    }
    // what the watcher left waiting to be written with others' is taken back first: nothing of it
    // lands after the record is read below (it is sent from here, under the run's lock, or dropped)
    yield* (yield* Repository).withdraw(unsent.filter(isArtifactReport).map((r) => r.hash))
    const record = yield* readRunRecord(run)
    const done: Array<string> = []
    const rest: Array<OutboxReport> = []
    for (const report of unsent) {
      if (!isArtifactReport(report)) continue
      if (report.kind === "started" && record.started?.hash !== report.hash) {
        yield* settle(run, report.hash, "dropped", "its watcher ended before the server took it: its program was never launched")
        done.push(`started ${report.hash.slice(0, 12)} dropped (never launched)`)
      } else rest.push(report)
    }
    const sent = yield* sendReports(run, rest, record)
    rest.forEach((report, i) => {
      const name = report.kind === "report" ? "a report" : report.kind === "verdict" ? "the verdict" : report.kind
      done.push(sent[i] === "dropped" ? `${name} ${report.hash.slice(0, 12)} dropped (another counts)` : `${name} ${report.hash.slice(0, 12)} sent`)
    })
    // the published files, then the reply naming them
    for (const entry of unsent) {
      if (entry.kind !== "unversioned") continue
      const how = yield* sendUnversioned(run, entry)
      done.push(`the unversioned file ${entry.name} ${how === "dropped" ? "not published (the server would not take it)" : "published"}`)
    }
    for (const entry of unsent) {
      if (entry.kind !== "publications") continue
      const reply = yield* composePublicationsReply(run, entry)
      yield* sendReports(run, [reply], undefined)
      done.push(`the reply naming the published files ${reply.hash.slice(0, 12)} sent`)
    }
    yield* removeIfSettled(run)
    return done as ReadonlyArray<string>
  })

// ---------- the server being down ----------

/**
 * Whether a failure means the server did not answer (or answered, mid-restart, with an error):
 * what is waited out. Anything else is not an outage.
 */
export const serverDown = (e: unknown): boolean =>
  e instanceof ServerUnreachable || e instanceof ReceiptsUnavailable ||
  // the server not returning what was pushed, or no receipt yet; not a receipt naming another sender
  (e instanceof WriteNotConfirmed && /server|does not return/.test(e.reason) && !/received it from/.test(e.reason)) ||
  (e instanceof WriteFailed && /says:|xfer|HTTP|fetch|connect|socket|timed? ?out/i.test(e.reason)) ||
  // a clone's pull that failed
  (e instanceof RepositoryUnavailable && /fossil pull -R/.test(e.reason))

/** The first wait after a failure, doubling up to the last (2.15: "sent when the server takes it again"). */
export const backoff = { firstMillis: 1000, lastMillis: 30_000 } as const

const failureWords = (e: unknown): string => String((e as { message?: unknown })?.message ?? e).split("\n")[0]!.slice(0, 300)

/**
 * Runs `effect` until it succeeds while the server is down, waiting 1 s, then twice as long each
 * time up to 30 s: an outage of any length is waited out. Another failure is tried again
 * `otherTries` times (after 200 ms, doubling), then returned.
 */
export const untilServerAnswers = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  what: string,
  log: (line: string) => Effect.Effect<void>,
  options: { readonly otherTries?: number } = {}
): Effect.Effect<A, E, R> => {
  const loop = (failures: number, others: number, waitMillis: number): Effect.Effect<A, E, R> =>
    effect.pipe(
      Effect.catchAll((e) => {
        const down = serverDown(e)
        if (!down && others >= (options.otherTries ?? 0)) return Effect.fail(e)
        // another failure is tried again soon (200 ms, doubling), as writes always were
        const wait = down ? waitMillis : 200 * 2 ** others
        return log(`${what}: ${down ? "the server does not answer" : "failed"} (${failureWords(e)}); tried again in ${wait / 1000} s`).pipe(
          Effect.zipRight(Effect.sleep(wait)),
          Effect.zipRight(Effect.suspend(() =>
            down ? loop(failures + 1, others, Math.min(waitMillis * 2, backoff.lastMillis)) : loop(failures + 1, others + 1, waitMillis)
          ))
        )
      })
    )
  return loop(0, 0, backoff.firstMillis)
}
