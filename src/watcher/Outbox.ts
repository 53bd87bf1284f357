import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { CareDirectory } from "../../services/CareDirectory.js"
import { Repository } from "../../services/Repository.js"
import { type Artifact, cardValue, composeForumPost, composeTicketChange, parseArtifact } from "../fossil/Artifact.js"
import { readRunRecord, type RunRecord } from "../node/RunRecord.js"

// ROOT/care/RUN.outbox (2.15): every report a watcher has to send for its run, kept on disk
// before it is sent, so that neither the server being down nor the watcher's own death loses it.
// Each report is composed once, as an artifact with a fixed hash: sending it again is the same
// artifact (the server keeps one), so a resend never makes a second started or ended. The file is
// one JSON line per event: {"keep": REPORT} when a report is composed, {"sent": HASH} once the
// server holds it, {"dropped": HASH, "why": ...} when it must not be sent (another ended counts).
// Only the run's lock holder reads or writes it: the watcher while it lives, then whoever takes
// the free lock (the node's next call, or recovery), which sends what is left.

/** "report": kept logs; "verdict": the ci tag */
export type ReportKind = "started" | "ended" | "report" | "verdict"

export interface OutboxReport {
  readonly kind: ReportKind
  readonly hash: string
  /** the user it is written as (the node user) */
  readonly user: string
  /** the artifact's bytes, base64 */
  readonly bytes: string
}

export interface OutboxState {
  readonly reports: ReadonlyArray<OutboxReport>
  /** kept and neither sent nor dropped, in the order kept */
  readonly unsent: ReadonlyArray<OutboxReport>
}

export const outboxFile = (careDir: string, run: string): string => Path.join(careDir, `${run}.outbox`)

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
    return { reports: [], unsent: [] }
  }
  const reports: Array<OutboxReport> = []
  const settled = new Set<string>()
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue
    let event: { keep?: OutboxReport; sent?: unknown; dropped?: unknown }
    try {
      event = JSON.parse(line) as typeof event
    } catch {
      continue
    }
    const kept = event.keep
    if (kept !== undefined && typeof kept.hash === "string" && typeof kept.bytes === "string" && typeof kept.user === "string") {
      if (!reports.some((r) => r.hash === kept.hash)) reports.push(kept)
    }
    if (typeof event.sent === "string") settled.add(event.sent)
    if (typeof event.dropped === "string") settled.add(event.dropped)
  }
  return { reports, unsent: reports.filter((r) => !settled.has(r.hash)) }
}

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
export const keepReport = (run: string, report: OutboxReport) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    yield* Effect.try(() => appendLine(outboxFile(care.path, run), { keep: report }))
  })

const settle = (run: string, hash: string, how: "sent" | "dropped", why?: string) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    yield* Effect.try(() => appendLine(outboxFile(care.path, run), how === "sent" ? { sent: hash } : { dropped: hash, why }))
  })

/** The outbox file goes once everything in it is sent or dropped. */
export const removeIfSettled = (run: string) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    if (readOutbox(care.path, run).unsent.length === 0) Fs.rmSync(outboxFile(care.path, run), { force: true })
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
 * started), and the run is decided again. The rest go in one write; when the server does not
 * take it, they all stay for the next try.
 */
export const finishOutbox = (run: string) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    const { unsent } = readOutbox(care.path, run)
    if (unsent.length === 0) {
      yield* removeIfSettled(run)
      return [] as ReadonlyArray<string>
    }
    const record = yield* readRunRecord(run)
    const done: Array<string> = []
    const rest: Array<OutboxReport> = []
    for (const report of unsent) {
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
    yield* removeIfSettled(run)
    return done as ReadonlyArray<string>
  })

// ---------- the server being down ----------

/**
 * Whether a failure means the server did not answer (or answered, mid-restart, with an error):
 * what is waited out. Anything else is not an outage.
 */
export const serverDown = (e: unknown): boolean => {
  const error = e as { _tag?: unknown; reason?: unknown; message?: unknown }
  switch (error?._tag) {
    case "ServerUnreachable":
    case "ReceiptsUnavailable":
      return true
    case "WriteNotConfirmed":
      // the server not returning what was pushed, or no receipt yet; not a receipt naming another sender
      return /server|does not return/.test(String(error.reason ?? "")) && !/received it from/.test(String(error.reason ?? ""))
    case "WriteFailed":
      return /says:|xfer|HTTP|fetch|connect|socket|timed? ?out/i.test(String(error.reason ?? ""))
    case "RepositoryUnavailable":
      // a clone's pull that failed
      return /fossil pull -R/.test(String(error.reason ?? ""))
    default:
      return false
  }
}

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
