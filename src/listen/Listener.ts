// The fleet's listener (docs/architecture.md, "The listener"): one resident process on the server's
// host that holds every clone node's question "tell me when a receipt newer than N lands" (the
// receipt tool's newer-than, wait and arrived; docs/protocol.md 2.3), where the receipt page holds
// each in a process of its own (a Fossil process and an ocx2-cgi per waiting node). A clone's node
// learns its address from the page's answer and falls back to the page by itself while it cannot
// reach it (layers/RemoteReceipts.ts).
//
// POST /ID/receipt with {"newer_than": N, "wait": S, "arrived": true} and Fossil's login cookie
// answers as the page answers (the same JSON), from the served repository's own tables: the caller
// is whom the cookie signs in (FossilLogin.ts), a caller without Read (o) is told nothing and not
// held. A held question costs a socket and a few objects; one inotify watch on each repository's
// directory wakes all of them: the newest receipt number is read once, what arrived after each
// waiter's N once per N (arrivedItems), and each waiter is given what it may see (arrivedFor).
// GET /status from this host says how many wait.

import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Path from "node:path"
import type BetterSqlite3 from "better-sqlite3"
import type { Receipts } from "../../services/Receipts.js"
import type { Repository } from "../../services/Repository.js"
import { heldReader, openDatabase } from "../fossil/Sqlite.js"
import { grants } from "../fossil/Fullcap.js"
import { readMessage } from "../protocol/Envelope.js"
import { arrivedFor, type ArrivedItems, arrivedItems, type ArrivedOutput, type ReceiptOutput } from "../tools/receipt.js"
import { canonicalRepository } from "../root/HookFiles.js"
import { processStartTime } from "../root/SupervisorFiles.js"
import { callerOf, type Caller, mayRead } from "./FossilLogin.js"
import { listenLogFile, listenStateFile, type ListenState, repositoryId } from "./ListenFiles.js"

/** The longest a question is held, as the page holds it: under the 30 s after which proxies commonly cut a quiet request. */
const maxWaitSeconds = 25
/** The largest question taken: a held question is a few dozen bytes. */
const maxBodyBytes = 4096

export interface ListenerOptions {
  readonly root: string
  readonly repositories: ReadonlyArray<string>
  readonly host: string
  readonly port: number
  /** the address clones are given (ROOT/settings/listen's url), if not the page's own host name and this port */
  readonly url: string | undefined
  /** the Repository and Receipts of one repository file (composed at the edge, layers/ListenHost.ts) */
  readonly record: (path: string) => Layer.Layer<Repository | Receipts, unknown>
}

interface Waiter {
  readonly after: number
  readonly arrived: boolean
  readonly cookie: string | undefined
  readonly response: Http.ServerResponse
  readonly timer: NodeJS.Timeout
}

interface Arrivals {
  readonly read: ArrivedItems
  /** the nodes the runs among them are addressed to */
  readonly addressed: ReadonlySet<string>
}

/** The nodes the runs among what arrived are addressed to. */
const addressedIn = (read: ArrivedItems): ReadonlySet<string> => {
  const nodes = new Set<string>()
  for (const item of read.items) {
    if (item._tag !== "Post" && item._tag !== "TicketChange") continue
    const reading = readMessage(item.text)
    if (reading._tag === "Message" && reading.kind === "run" && reading.to !== undefined) nodes.add(reading.to)
  }
  return nodes
}

interface Served {
  readonly id: string
  readonly path: string
  readonly runtime: ManagedRuntime.ManagedRuntime<Repository | Receipts, unknown>
  readonly reader: ReturnType<typeof heldReader>
  readonly waiters: Set<Waiter>
  newest: number
  /** what arrived after each N up to `newest`, read once for every waiter at N, with the nodes its runs are addressed to */
  readonly items: Map<string, Promise<Arrivals>>
  /**
   * the answers given since `newest` changed, by what makes them differ: N, whether the caller may
   * see private artifacts (x), and the caller's login only when a run among them is addressed to it
   * (its process users' capabilities); every other waiter at N shares one answer
   */
  readonly answers: Map<string, Promise<string>>
  watch: Fs.FSWatcher | undefined
}

const answer = (response: Http.ServerResponse, status: number, body: object) => answerText(response, status, JSON.stringify(body))
const answerText = (response: Http.ServerResponse, status: number, text: string) => {
  if (response.writableEnded || response.destroyed) return
  response.writeHead(status, { "Content-Type": "application/json; charset=utf-8", "Content-Length": Buffer.byteLength(text), "Cache-Control": "no-store" })
  response.end(text)
}
const completed = (output: ReceiptOutput) => ({ tool: "receipt", operations: [], stopped: { reason: "completed" }, output })
const refused = (message: string) => ({ tool: "receipt", operations: [], stopped: { reason: "refused", message } })
const nothingArrived: ArrivedOutput = { receipts: [], process_users: [], complete: true }

const newestOf = (db: BetterSqlite3.Database) => (db.prepare("SELECT coalesce(max(rcvid), 0) AS n FROM rcvfrom").get() as { n: number }).n

/** A question as the page takes it, or what is wrong with it. */
const questionOf = (body: string): { after: number; wait: number; arrived: boolean } | string => {
  let given: unknown
  try {
    given = JSON.parse(body)
  } catch {
    return "the question is not JSON: post {\"newer_than\": N, \"wait\": S, \"arrived\": true}"
  }
  if (typeof given !== "object" || given === null || Array.isArray(given)) return "the question is not a JSON object"
  const { newer_than: after, wait = 0, arrived = false, ...rest } = given as Record<string, unknown>
  const other = Object.keys(rest)
  if (other.length > 0) return `the listener holds only the question newer_than (with wait and arrived): ask ${other.join(", ")} of the receipt page`
  if (typeof after !== "number" || !Number.isSafeInteger(after) || after < 0) return "newer_than is a receipt number (an integer, 0 or more)"
  if (typeof wait !== "number" || !Number.isInteger(wait) || wait < 0 || wait > maxWaitSeconds) return `wait is 0 to ${maxWaitSeconds} seconds`
  if (typeof arrived !== "boolean") return "arrived is true or false"
  return { after, wait, arrived }
}

const isLoopback = (address: string | undefined) => address === "127.0.0.1" || address === "::1" || address === "::ffff:127.0.0.1"

type Log = (line: object) => void
const failure = (e: unknown) => (e instanceof Error ? e.message : String(e))

/** What one waiter is told: the newest number (and what arrived, if asked) when it may still read. */
const tell = async (s: Served, w: Waiter, newest: number) => {
  const caller: Caller = s.reader.read((db) => callerOf(db, w.cookie))
  if (!mayRead(caller)) return answer(w.response, 200, completed({ receipts: [] }))
  if (!w.arrived || newest === w.after) {
    return answer(w.response, 200, completed({ receipts: [], newest, ...(w.arrived ? { arrived: nothingArrived } : {}) }))
  }
  // by N and the newest number both: a tell that began before `newest` moved leaves nothing a later one would take
  let arrivals = s.items.get(`${w.after}:${newest}`)
  if (arrivals === undefined) {
    arrivals = s.runtime.runPromise(arrivedItems(w.after, newest)).then((read) => ({ read, addressed: addressedIn(read) }))
    s.items.set(`${w.after}:${newest}`, arrivals)
  }
  const { read, addressed } = await arrivals
  const node = caller.login !== "nobody" && addressed.has(caller.login) ? caller.login : undefined
  const key = `${w.after}:${newest}:${grants(caller.capabilities, "x") ? "x" : ""}:${node ?? ""}`
  let text = s.answers.get(key)
  if (text === undefined) {
    text = s.runtime.runPromise(arrivedFor(read, caller.login, node)).then((arrived) => JSON.stringify(completed({ receipts: [], newest, arrived })))
    s.answers.set(key, text)
  }
  answerText(w.response, 200, await text)
}

/** The waiter answered with `newest` (its connection cut when undefined), and no longer waiting. */
const finishWaiter = (s: Served, w: Waiter, newest: number | undefined, log: Log) => {
  if (!s.waiters.delete(w)) return
  clearTimeout(w.timer)
  if (newest === undefined) return void w.response.destroy()
  tell(s, w, newest).catch((e) => {
    log({ did: [`answering a held question on ${s.path} failed: ${failure(e)}`] })
    answer(w.response, 500, refused("the listener could not read the repository"))
  })
}

/** The repository's newest receipt number read again; every waiter behind it is told. */
const look = (s: Served, log: Log) => {
  let now: number
  try {
    now = s.reader.read(newestOf)
  } catch (e) {
    return log({ did: [`reading ${s.path} failed: ${failure(e)}`] })
  }
  if (now === s.newest) return
  s.newest = now
  s.items.clear()
  s.answers.clear()
  for (const w of [...s.waiters]) if (w.after !== now) finishWaiter(s, w, now, log)
}

/** One served repository, read, and its directory watched: a change is looked at once the events of one write have all come. */
const openServed = (given: string, record: ListenerOptions["record"], log: Log) =>
  Effect.gen(function*() {
    const path = canonicalRepository(given)
    const reader = heldReader(path, () => openDatabase(path, { readonly: true, fileMustExist: true }))
    const newest = yield* Effect.try({ try: () => reader.read(newestOf), catch: (e) => new Error(`cannot read ${path}: ${failure(e)}`) })
    const s: Served = { id: repositoryId(path), path, runtime: ManagedRuntime.make(record(path)), reader, waiters: new Set(), newest, items: new Map(), answers: new Map(), watch: undefined }
    yield* Effect.addFinalizer(() => Effect.promise(async () => {
      s.watch?.close()
      reader.close()
      await s.runtime.dispose().catch(() => undefined)
    }))
    const base = Path.basename(path)
    const names = new Set([base, `${base}-journal`, `${base}-wal`])
    let looking = false
    // the directory, not the file: in rollback-journal mode the commit is the journal's removal
    s.watch = Fs.watch(Path.dirname(path), { persistent: false }, (_event, name) => {
      if ((name !== null && !names.has(name)) || looking) return
      looking = true
      setImmediate(() => {
        looking = false
        look(s, log)
      })
    }).on("error", (e) => log({ did: [`inotify on ${Path.dirname(path)} failed: ${e.message}; looked at every second instead`] }))
    return s
  })

/** A question to a served repository: answered at once, or held until a receipt lands or its wait is over. */
const takeQuestion = (s: Served, request: Http.IncomingMessage, response: Http.ServerResponse, body: string, log: Log) => {
  const question = questionOf(body)
  if (typeof question === "string") return answer(response, 400, refused(question))
  let caller: Caller
  try {
    caller = s.reader.read((db) => callerOf(db, request.headers.cookie))
  } catch (e) {
    log({ did: [`reading ${s.path} failed: ${failure(e)}`] })
    return answer(response, 500, refused("the listener could not read the repository"))
  }
  // a caller without Read is told nothing, and not held (as the page does)
  if (!mayRead(caller)) return answer(response, 200, completed({ receipts: [] }))
  const waiter: Waiter = {
    after: question.after, arrived: question.arrived, cookie: request.headers.cookie, response,
    timer: setTimeout(() => finishWaiter(s, waiter, s.newest, log), question.wait * 1000)
  }
  s.waiters.add(waiter)
  // gone before it was answered (the node stopping): nothing is kept for it
  response.on("close", () => {
    if (s.waiters.delete(waiter)) clearTimeout(waiter.timer)
  })
  if (question.wait === 0 || s.newest !== question.after) finishWaiter(s, waiter, s.newest, log)
}

/** The listener's HTTP requests: POST /ID/receipt, and GET /status from this host. */
const requestHandler = (served: ReadonlyMap<string, Served>, log: Log) => (request: Http.IncomingMessage, response: Http.ServerResponse) => {
  const url = new URL(request.url ?? "/", "http://listener")
  if (request.method === "GET" && url.pathname === "/status") {
    if (!isLoopback(request.socket.remoteAddress)) return answer(response, 403, refused("the status is told to this host only"))
    return answer(response, 200, {
      pid: process.pid,
      repositories: Object.fromEntries([...served.values()].map((s) => [s.id, { path: s.path, newest: s.newest, waiting: s.waiters.size }]))
    })
  }
  const match = /^\/([0-9a-f]{12})\/receipt$/.exec(url.pathname)
  const s = match === null ? undefined : served.get(match[1]!)
  if (s === undefined) return answer(response, 404, refused(`no repository is served at ${url.pathname}: the receipt page names the listener's address for its repository`))
  if (request.method !== "POST") return answer(response, 405, refused("the question is a POST"))
  let body = ""
  request.setEncoding("utf8")
  request.on("data", (chunk: string) => {
    body += chunk
    if (body.length > maxBodyBytes) {
      answer(response, 413, refused(`the question is over ${maxBodyBytes} bytes`))
      request.destroy()
    }
  })
  request.on("end", () => {
    if (!response.writableEnded) takeQuestion(s, request, response, body, log)
  })
}

/** The server listening, closed when the scope ends (what it holds answered first, by the finalizer added after it). */
const serve = (handler: Http.RequestListener, host: string, port: number) =>
  Effect.gen(function*() {
    const server = Http.createServer(handler)
    server.keepAliveTimeout = 60_000
    server.headersTimeout = 30_000
    server.requestTimeout = (maxWaitSeconds + 30) * 1000
    const bound = yield* Effect.async<number, Error>((resume) => {
      server.once("error", (e) => resume(Effect.fail(new Error(`cannot listen on ${host}, port ${port}: ${e.message}`))))
      server.listen(port, host, () => resume(Effect.succeed((server.address() as { port: number }).port)))
    })
    yield* Effect.addFinalizer(() =>
      Effect.async<void>((resume) => {
        server.close(() => resume(Effect.void))
        server.closeIdleConnections()
        // the held questions were answered a moment ago: their answers leave before the sockets close
        const cut = setTimeout(() => server.closeAllConnections(), 200)
        return Effect.sync(() => clearTimeout(cut))
      }))
    return bound
  })

/** ROOT/node/listen.json naming this process, removed when the scope ends (if it still names it). */
const stateWritten = (root: string, state: ListenState, log: Log) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const file = listenStateFile(root)
      Fs.mkdirSync(Path.dirname(file), { recursive: true })
      Fs.writeFileSync(`${file}.${process.pid}`, JSON.stringify(state))
      Fs.renameSync(`${file}.${process.pid}`, file)
      return file
    }),
    (file) => Effect.sync(() => {
      try {
        if ((JSON.parse(Fs.readFileSync(file, "utf8")) as ListenState).pid === process.pid) Fs.rmSync(file, { force: true })
      } catch {
        // gone already
      }
      log({ did: ["stopped"] })
    })
  )

/** Every held question answered with what is known, so its node asks again at once (here, started again, or at the page). */
const answerEveryone = (served: ReadonlyMap<string, Served>) => {
  for (const s of served.values()) {
    for (const w of [...s.waiters]) {
      s.waiters.delete(w)
      clearTimeout(w.timer)
      if (w.after !== s.newest) w.response.destroy()
      else answer(w.response, 200, completed({ receipts: [], newest: w.after, ...(w.arrived ? { arrived: nothingArrived } : {}) }))
    }
  }
}

/**
 * The listener, listening: scoped, so that its end (SIGTERM) answers every held question with what is
 * known, closes the server and removes its state file.
 */
export const listen = (options: ListenerOptions) =>
  Effect.gen(function*() {
    const log: Log = (line) => {
      try {
        Fs.appendFileSync(listenLogFile(options.root), `${JSON.stringify({ at: new Date().toISOString(), pid: process.pid, ...line })}\n`)
      } catch {
        // a log that cannot be written keeps nobody waiting
      }
    }
    const served = new Map<string, Served>()
    for (const given of options.repositories) {
      const s = yield* openServed(given, options.record, log)
      served.set(s.id, s)
    }
    // every second as well while anyone waits: should inotify miss, a receipt is told within a second
    const every = setInterval(() => {
      for (const s of served.values()) if (s.waiters.size > 0) look(s, log)
    }, 1000)
    yield* Effect.addFinalizer(() => Effect.sync(() => clearInterval(every)))
    const port = yield* serve(requestHandler(served, log), options.host, options.port)
    // (finalizers run last first: everyone is answered before the server closes)
    yield* Effect.addFinalizer(() => Effect.sync(() => answerEveryone(served)))
    yield* stateWritten(options.root, {
      pid: process.pid, started: processStartTime(process.pid) ?? "", host: options.host, port,
      ...(options.url !== undefined ? { url: options.url } : {}),
      repositories: Object.fromEntries([...served.values()].map((s) => [s.id, s.path]))
    }, log)
    log({ did: [`listening on ${options.host}, port ${port}, for ${[...served.values()].map((s) => `${s.path} (${s.id})`).join(", ")}`] })
    return { port, waiting: () => [...served.values()].reduce((n, s) => n + s.waiters.size, 0) }
  })
