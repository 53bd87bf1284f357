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
import * as Fs from "node:fs"
import { isFullHash } from "../src/fossil/Hash.js"
import { readShared, type Shared, writeShared } from "./SharedReceipts.js"
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
  /**
   * A file where what the server gave is shared with the node's other processes on this host
   * (layers/SharedReceipts.ts): a watcher reads there what the supervisor learnt a moment before.
   */
  readonly shareWith?: string
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

/**
 * Whether a question carries the one that would follow it (each a CGI process on the server's host):
 * the long poll asks what arrived with it (the receipt tool's arrived: the receipts and process users'
 * capabilities the round after the pull needs), and a record's receipts ask the capabilities of its
 * process user (capabilitiesNext); what comes back is remembered as receipts are. OCX2_ASK_AHEAD=0 asks
 * each question by itself (bench/pickup's baseline).
 */
const askAhead = process.env.OCX2_ASK_AHEAD !== "0"
/** The most rows an arrived answer may hold (the page gives at most 200); more is refused as malformed. */
const maxArrivedRows = 1000

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
    readonly arrived?: unknown
    readonly listener?: unknown
  }
}

/** What a long poll's answer says arrived, checked: the receipts and the process users' capabilities. */
export interface Arrived {
  readonly receipts: ReadonlyArray<ReceiptAnswer & { readonly _tag: "Received" }>
  readonly processUsers: ReadonlyArray<{ readonly user: string; readonly capabilities: string | undefined }>
}

/**
 * A listener that answered before and is cut (restarted, `systemctl restart`) is tried again for this
 * long, less and less often, before the question goes to the page: a fleet whose listener restarts
 * does not all start a process each at the page at once.
 */
const listenerRestartMs = 5000
/** After the listener could not be reached, the page is asked this long (doubling to `listenerAwayMaxMs`) before the listener is tried again. */
const listenerAwayMs = 15_000
const listenerAwayMaxMs = 10 * 60_000
/** How long a question to the listener may take beyond its wait before it counts as unreachable. */
const listenerTimeoutMs = 10_000

/**
 * The listener's address as a page's answer names it, if the node may send its sign-in there: an
 * http(s) address on the server's own host name, and https when the server is (the cookie never
 * travels in the clear where the page's did not).
 */
export const listenerPageOf = (named: unknown, server: string): string | undefined => {
  if (typeof named !== "string") return undefined
  try {
    const listener = new URL(named)
    const base = new URL(server)
    if (listener.protocol !== "http:" && listener.protocol !== "https:") return undefined
    if (base.protocol === "https:" && listener.protocol !== "https:") return undefined
    if (listener.hostname !== base.hostname || listener.username !== "" || listener.password !== "") return undefined
    return listener.href
  } catch {
    return undefined
  }
}

const isCount = (n: unknown): n is number => typeof n === "number" && Number.isSafeInteger(n) && n > 0

/**
 * The page's arrived, checked before anything in it is believed: every row a receipt (a full hash, a
 * sender, capabilities, a place) received after `after` and at most `newest`, each hash once, each
 * process user once. A string says what is wrong: the whole answer is refused, none of it remembered.
 */
export const checkArrived = (arrived: unknown, after: number, newest: number): Arrived | string => {
  if (typeof arrived !== "object" || arrived === null) return "arrived is not an object"
  const { receipts, process_users: users } = arrived as { receipts?: unknown; process_users?: unknown }
  if (!Array.isArray(receipts) || !Array.isArray(users)) return "arrived lacks its receipts or process_users list"
  if (receipts.length > maxArrivedRows || users.length > maxArrivedRows) return `arrived holds more than ${maxArrivedRows} rows`
  const rows: Array<ReceiptAnswer & { readonly _tag: "Received" }> = []
  const hashes = new Set<string>()
  for (const [i, row] of receipts.entries()) {
    const r = (typeof row === "object" && row !== null ? row : {}) as Record<string, unknown>
    const what = `arrived's receipt ${i}`
    if (typeof r["hash"] !== "string" || !isFullHash(r["hash"])) return `${what} has no full hash`
    if (hashes.has(r["hash"])) return `${what} repeats ${r["hash"]}`
    if (r["received"] !== true) return `${what} (${r["hash"]}) is not a receipt`
    if (typeof r["sender"] !== "string" || r["sender"] === "") return `${what} (${r["hash"]}) names no sender`
    if (typeof r["capabilities"] !== "string") return `${what} (${r["hash"]}) gives no capabilities`
    if (!isCount(r["rcvid"]) || !isCount(r["rid"])) return `${what} (${r["hash"]}) has no receipt number or row number`
    if (r["rcvid"] <= after || r["rcvid"] > newest) return `${what} (${r["hash"]}) has receipt ${r["rcvid"]}, not after ${after} up to ${newest}`
    hashes.add(r["hash"])
    rows.push({ _tag: "Received", hash: r["hash"], sender: r["sender"], capabilities: r["capabilities"], rcvid: r["rcvid"], rid: r["rid"] })
  }
  const processUsers: Array<Arrived["processUsers"][number]> = []
  const logins = new Set<string>()
  for (const [i, entry] of users.entries()) {
    const u = (typeof entry === "object" && entry !== null ? entry : {}) as Record<string, unknown>
    if (typeof u["user"] !== "string" || u["user"] === "") return `arrived's process user ${i} has no login`
    if (logins.has(u["user"])) return `arrived's process user ${i} repeats ${u["user"]}`
    if (u["capabilities"] !== undefined && typeof u["capabilities"] !== "string") return `arrived's process user ${u["user"]} has capabilities that are not a string`
    logins.add(u["user"])
    processUsers.push({ user: u["user"], capabilities: u["capabilities"] as string | undefined })
  }
  return { receipts: rows, processUsers }
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

  const ask = (input: { artifacts?: ReadonlyArray<string>; capabilities_of?: string; newer_than?: number; wait?: number; arrived?: boolean }, waitMs = 0, at = page, timeoutMs = timeout) =>
    Effect.gen(function*() {
      const signedIn = yield* login
      const response = yield* Effect.tryPromise({
        // interrupted, the request is aborted: a supervisor stopping is not held by a long poll
        try: (interrupted) =>
          fetch(at, {
            method: "POST",
            redirect: "manual",
            headers: { "Content-Type": "application/json", Cookie: signedIn, Referer: at },
            body: JSON.stringify(input),
            signal: AbortSignal.any([interrupted, AbortSignal.timeout(timeoutMs + waitMs)])
          }),
        catch: unreachable
      })
      const text = yield* Effect.tryPromise({ try: () => response.text(), catch: unreachable })
      if (response.status >= 500) return yield* unreachable(new Error(`HTTP ${response.status} from ${at}`))
      let answer: Answer
      try {
        answer = JSON.parse(text) as Answer
      } catch {
        return yield* unavailable(`HTTP ${response.status}: the answer is not JSON (is the OCX CGI served at ${at}?)`)
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
  /** process users' capabilities as a long poll's answer or a record's question gave them, remembered as receipts are */
  const rememberedCapabilities = new Map<string, { readonly capabilities: string | undefined; readonly at: number }>()
  const capabilitiesKnown = (login: string, now: number) => {
    const kept = rememberedCapabilities.get(login)
    return kept !== undefined && now - kept.at < rememberMs
  }
  /**
   * The fleet's listener on the server's host, as the page last named it: held questions go there (one
   * resident process for every waiting node) instead of to the page (a process each). `answered`: it
   * answered the last question asked of it; `awayUntil`: the page is asked until then, after the
   * listener could not be reached `misses` times in a row.
   */
  let listener: { page: string; answered: boolean; awayUntil: number; misses: number } | undefined
  /** what the page's answer says of the listener: named (tried at the next held question) or not (none runs: the page holds it) */
  const learnListener = (named: unknown) => {
    const at = listenerPageOf(named, base)
    if (at === undefined) listener = undefined
    else if (listener?.page !== at) listener = { page: at, answered: false, awayUntil: 0, misses: 0 }
  }
  /** A held question asked of the listener; undefined when it cannot be reached, and the page is to be asked instead. */
  const askListener = (input: { newer_than: number; wait: number; arrived?: boolean }, waitMs: number) =>
    Effect.gen(function*() {
      const l = listener!
      // cut while it answered: restarted, most likely; tried again a few times before the page is asked
      const until = l.answered ? Date.now() + listenerRestartMs : 0
      let pauseMs = 250
      for (;;) {
        const asked = yield* Effect.either(ask(input, waitMs, l.page, listenerTimeoutMs))
        if (asked._tag === "Right") {
          l.answered = true
          l.misses = 0
          return asked.right
        }
        if (Date.now() + pauseMs > until) {
          l.answered = false
          l.misses++
          l.awayUntil = Date.now() + Math.min(listenerAwayMaxMs, listenerAwayMs * 2 ** Math.min(l.misses - 1, 10))
          return undefined
        }
        // spread over a fleet: not every node at the listener's first moment
        yield* Effect.sleep(pauseMs + Math.floor(Math.random() * pauseMs))
        pauseMs = Math.min(pauseMs * 2, 2000)
      }
    })

  /** false once the page refused arrived (a release that predates it): the number alone is asked */
  let pageSaysArrived = askAhead && rememberMs > 0

  // what the node's other processes on this host learnt from the server, and what this one learns
  const shared = askAhead && rememberMs > 0 ? config.shareWith : undefined
  let sharedSeen = ""
  const absorbShared = () => {
    if (shared === undefined) return
    let seen: string
    try {
      const stat = Fs.statSync(shared)
      seen = `${stat.mtimeMs}:${stat.size}:${stat.ino}`
    } catch {
      return
    }
    if (seen === sharedSeen) return
    sharedSeen = seen
    const told = readShared(shared, base, config.user, rememberMs)
    for (const { at, ...r } of told.receipts) {
      if ((remembered.get(r.hash)?.at ?? -Infinity) < at) remembered.set(r.hash, { answer: { _tag: "Received", ...r }, at })
    }
    for (const { at, user, capabilities } of told.capabilities) {
      if ((rememberedCapabilities.get(user)?.at ?? -Infinity) < at) rememberedCapabilities.set(user, { capabilities, at })
    }
  }
  const shareLearnt = (learnt: Shared) => {
    if (shared === undefined || (learnt.receipts.length === 0 && learnt.capabilities.length === 0)) return
    writeShared(shared, base, config.user, rememberMs, learnt)
  }

  return {
    receipts: (hashes, options) =>
      Effect.gen(function*() {
        const bad = hashes.find((h) => !isFullHash(h))
        if (bad !== undefined) return yield* new InvalidHash({ hash: bad })
        absorbShared()
        const now = Date.now()
        for (const [hash, kept] of remembered) if (now - kept.at >= rememberMs) remembered.delete(hash)
        // only receipts the server gave are remembered: one not received yet may arrive any moment
        const toAsk = [...new Set(hashes.filter((h) => recall(h, now) === undefined))]
        const fresh = new Map<string, ReceiptAnswer>()
        // the capabilities asked next, with the first batch: one request where there were two
        const next = options?.capabilitiesNext
        let alsoAsk = askAhead && rememberMs > 0 && next !== undefined && toAsk.length > 0 && !capabilitiesKnown(next, now) ? next : undefined
        for (let at = 0; at < toAsk.length; at += batch) {
          const asked = toAsk.slice(at, at + batch)
          const output = yield* ask({ artifacts: asked, ...(alsoAsk !== undefined ? { capabilities_of: alsoAsk } : {}) })
          if (alsoAsk !== undefined) {
            const told = output.capabilities_of
            if (told?.user !== alsoAsk || (told.capabilities !== undefined && typeof told.capabilities !== "string")) {
              return yield* unavailable(`the answer's capabilities_of does not name ${alsoAsk}, as asked`)
            }
            const at = Date.now()
            rememberedCapabilities.set(alsoAsk, { capabilities: told.capabilities, at })
            shareLearnt({ receipts: [], capabilities: [{ user: alsoAsk, capabilities: told.capabilities, at }] })
            alsoAsk = undefined
          }
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
        shareLearnt({
          receipts: [...fresh.values()].flatMap((a) => (a._tag === "Received" ? [{ hash: a.hash, sender: a.sender, capabilities: a.capabilities, rcvid: a.rcvid, rid: a.rid, at: remembered.get(a.hash)?.at ?? Date.now() }] : [])),
          capabilities: []
        })
        return hashes.map((h) => fresh.get(h) ?? recall(h, now)!)
      }),
    capabilitiesOf: (login) => {
      absorbShared()
      if (capabilitiesKnown(login, Date.now())) return Effect.succeed(rememberedCapabilities.get(login)!.capabilities)
      return Effect.map(ask({ capabilities_of: login }), (output) => output.capabilities_of?.capabilities)
    },
    // a page of a release that predates newer-than refuses it as an argument it does not know:
    // undefined, so that the caller pulls on a timer instead; one that predates arrived is asked
    // without it from then on
    newest: (after, waitMs) =>
      Effect.gen(function*() {
        // only a held question: the first (wait 0, after 0) is followed by a pull of everything anyway
        const withArrived = pageSaysArrived && waitMs > 0
        const question = { newer_than: after, wait: Math.ceil(waitMs / 1000), ...(withArrived ? { arrived: true } : {}) }
        // a held question goes to the fleet's listener where the page named one, and to the page while it cannot be reached
        const heard = waitMs > 0 && listener !== undefined && Date.now() >= listener.awayUntil ? yield* askListener(question, waitMs) : undefined
        const output = heard ?? (yield* ask(question, waitMs))
        if (heard === undefined) learnListener(output.listener)
        const newest = output.newest
        if (newest === undefined) return undefined
        if (!Number.isSafeInteger(newest) || newest < 0) return yield* unavailable(`the page's newest is not a receipt number: ${JSON.stringify(newest)}`)
        if (withArrived && newest !== after) {
          if (output.arrived === undefined) return yield* unavailable("the page's answer to newer-than with arrived holds no arrived")
          const arrived = checkArrived(output.arrived, after, newest)
          if (typeof arrived === "string") return yield* unavailable(`the page's answer to newer-than is refused: ${arrived}`)
          const at = Date.now()
          for (const [user, kept] of rememberedCapabilities) if (at - kept.at >= rememberMs) rememberedCapabilities.delete(user)
          for (const answer of arrived.receipts) remembered.set(answer.hash, { answer, at })
          for (const { user, capabilities } of arrived.processUsers) rememberedCapabilities.set(user, { capabilities, at })
          shareLearnt({ receipts: arrived.receipts.map(({ _tag, ...r }) => ({ ...r, at })), capabilities: arrived.processUsers.map((u) => ({ ...u, at })) })
        }
        return newest
      }).pipe(
        Effect.catchIf(
          (e): e is ReceiptsUnavailable =>
            e._tag === "ReceiptsUnavailable" && (/\bnewer_than: is unexpected\b/.test(e.reason) || (pageSaysArrived && /\barrived: is unexpected\b/.test(e.reason))),
          (e) => {
            if (/\bnewer_than: is unexpected\b/.test(e.reason)) return Effect.succeed(undefined)
            pageSaysArrived = false
            return Effect.succeed(after) // the same number pulls nothing: asked again at once, without arrived
          }
        )
      )
  }
}

/** The Receipts of the server at `url`, asked as `user`; it signs in once, at the first question. */
export const layer = (config: RemoteReceiptsConfig) => Layer.sync(Receipts, () => make(config))
