/**
 * Receipts asked of the server over HTTP, for a node on a clone's host: a clone's own receipts
 * name only its pulls (2.3), so the node signs in to the server as its node user (Fossil's
 * /login form) and asks the server's receipt tool through the CGI's JSON answer: a POST of
 * {"artifacts": [...]} to BASE/ext/ocx2-cgi/receipt with that page as its Referer (the CGI's
 * rule for a change, which a client that is no browser meets by naming the page it posts to).
 * The server answers as it answers its own viewers: with the signed-in user's visibility.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { isFullHash } from "../src/fossil/Hash.js"
import {
  InvalidHash, type ReceiptAnswer, Receipts, ReceiptsUnavailable, type ReceiptsService, ServerUnreachable
} from "../services/Receipts.js"

export interface RemoteReceiptsConfig {
  /** the server's base URL, such as https://host/repo/ */
  readonly url: string
  /** the node user, and its password on the server */
  readonly user: string
  readonly password: string
  /** the CGI's path under the base URL (default ext/ocx2-cgi) */
  readonly extension?: string
  readonly timeoutMs?: number
}

/** Hashes asked per request: each is 67 bytes of JSON, far under the CGI's 1 MiB body. */
const batch = 1000
/**
 * How long a receipt the server gave is remembered in the process: a round on a clone's host asks
 * the same run's receipt three times (its sender, its record, the clone users), each a CGI process
 * on the server's host. Kept short, since the sender's capabilities come with it and may change; the
 * watcher, a process of its own, asks again under the run's lock. OCX2_RECEIPT_MEMO_MS=0 asks every
 * time (bench/pickup's baseline).
 */
const rememberMs = (() => {
  const n = Number(process.env.OCX2_RECEIPT_MEMO_MS ?? 5000)
  return Number.isFinite(n) && n >= 0 ? n : 5000
})()

interface ReceiptRow {
  readonly hash: string
  readonly received: boolean
  readonly sender?: string
  readonly capabilities?: string
  readonly rcvid?: number
  readonly rid?: number
}

interface Answer {
  readonly stopped?: { readonly reason?: string; readonly message?: string }
  readonly output?: {
    readonly receipts?: ReadonlyArray<ReceiptRow>
    readonly capabilities_of?: { readonly user: string; readonly capabilities?: string }
    readonly newest?: number
  }
}

const reasonOf = (e: unknown): string => {
  const error = e as Error & { cause?: Error }
  return error?.cause?.message ?? error?.message ?? String(e)
}

export const make = (config: RemoteReceiptsConfig): ReceiptsService => {
  const base = config.url.endsWith("/") ? config.url : `${config.url}/`
  const page = `${base}${(config.extension ?? "ext/ocx2-cgi").replace(/^\/+|\/+$/g, "")}/receipt`
  const timeout = config.timeoutMs ?? 30_000
  let cookie: string | undefined

  const unreachable = (e: unknown) => new ServerUnreachable({ url: base, reason: reasonOf(e) })
  const unavailable = (reason: string) => new ReceiptsUnavailable({ path: page, reason })

  const login = Effect.gen(function*() {
    if (cookie !== undefined) return cookie
    const response = yield* Effect.tryPromise({
      try: () =>
        fetch(`${base}login`, {
          method: "POST",
          redirect: "manual",
          headers: { "Content-Type": "application/x-www-form-urlencoded", Referer: `${base}login` },
          body: new URLSearchParams({ u: config.user, p: config.password, in: "Login" }).toString(),
          signal: AbortSignal.timeout(timeout)
        }),
      catch: unreachable
    })
    yield* Effect.promise(() => response.arrayBuffer().catch(() => undefined))
    if (response.status >= 500) return yield* unreachable(new Error(`HTTP ${response.status} from ${base}login`))
    const found = response.headers.getSetCookie().map((c) => c.split(";")[0]!).find((c) => c.startsWith("fossil-") && !c.endsWith("="))
    if (found === undefined) {
      return yield* unavailable(`login failed: the server did not sign in ${config.user} (wrong password, or no such user)`)
    }
    cookie = found
    return found
  })

  const ask = (input: { artifacts?: ReadonlyArray<string>; capabilities_of?: string; newer_than?: number; wait?: number }, waitMs = 0) =>
    Effect.gen(function*() {
      const signedIn = yield* login
      const response = yield* Effect.tryPromise({
        // interrupted, the request is aborted: a supervisor stopping is not held by a long poll
        try: (interrupted) =>
          fetch(page, {
            method: "POST",
            redirect: "manual",
            headers: { "Content-Type": "application/json", Cookie: signedIn, Referer: page },
            body: JSON.stringify(input),
            signal: AbortSignal.any([interrupted, AbortSignal.timeout(timeout + waitMs)])
          }),
        catch: unreachable
      })
      const text = yield* Effect.tryPromise({ try: () => response.text(), catch: unreachable })
      if (response.status >= 500) return yield* unreachable(new Error(`HTTP ${response.status} from ${page}`))
      let answer: Answer
      try {
        answer = JSON.parse(text) as Answer
      } catch {
        return yield* unavailable(`HTTP ${response.status}: the answer is not JSON (is the OCX CGI served at ${page}?)`)
      }
      const reason = answer.stopped?.reason
      if ((reason !== "completed" && reason !== "dry_run") || answer.output === undefined) {
        return yield* unavailable(`the receipt tool ${reason ?? "did not answer"}${answer.stopped?.message !== undefined ? `: ${answer.stopped.message}` : ""}`)
      }
      return answer.output
    })

  const remembered = new Map<string, { readonly answer: ReceiptAnswer; readonly at: number }>()
  const recall = (hash: string, now: number): ReceiptAnswer | undefined => {
    const kept = remembered.get(hash)
    return kept !== undefined && now - kept.at < rememberMs ? kept.answer : undefined
  }

  return {
    receipts: (hashes) =>
      Effect.gen(function*() {
        const bad = hashes.find((h) => !isFullHash(h))
        if (bad !== undefined) return yield* new InvalidHash({ hash: bad })
        const now = Date.now()
        for (const [hash, kept] of remembered) if (now - kept.at >= rememberMs) remembered.delete(hash)
        // only receipts the server gave are remembered: one not received yet may arrive any moment
        const toAsk = [...new Set(hashes.filter((h) => recall(h, now) === undefined))]
        const fresh = new Map<string, ReceiptAnswer>()
        for (let at = 0; at < toAsk.length; at += batch) {
          const asked = toAsk.slice(at, at + batch)
          const output = yield* ask({ artifacts: asked })
          const rows = output.receipts ?? []
          for (const [i, hash] of asked.entries()) {
            const row = rows[i]
            if (row === undefined || row.hash !== hash) return yield* unavailable(`the answer does not follow the hashes asked (at ${hash})`)
            const answer: ReceiptAnswer = row.received && row.sender !== undefined && row.rcvid !== undefined && row.rid !== undefined
              ? { _tag: "Received", hash, sender: row.sender, capabilities: row.capabilities ?? "", rcvid: row.rcvid, rid: row.rid }
              : { _tag: "NotReceived", hash }
            fresh.set(hash, answer)
            if (answer._tag === "Received" && rememberMs > 0) remembered.set(hash, { answer, at: Date.now() })
          }
        }
        return hashes.map((h) => fresh.get(h) ?? recall(h, now)!)
      }),
    capabilitiesOf: (login) => Effect.map(ask({ capabilities_of: login }), (output) => output.capabilities_of?.capabilities),
    // a page of a release that predates newer-than refuses it as an argument it does not know:
    // undefined, so that the caller pulls on a timer instead
    newest: (after, waitMs) =>
      ask({ newer_than: after, wait: Math.ceil(waitMs / 1000) }, waitMs).pipe(
        Effect.map((output) => output.newest),
        Effect.catchIf(
          (e): e is ReceiptsUnavailable => e._tag === "ReceiptsUnavailable" && /\bnewer_than: is unexpected\b/.test(e.reason),
          () => Effect.succeed(undefined)
        )
      )
  }
}

/** The Receipts of the server at `url`, asked as `user`; it signs in once, at the first question. */
export const layer = (config: RemoteReceiptsConfig) => Layer.sync(Receipts, () => make(config))
