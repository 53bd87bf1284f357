// The node's stream server: server-sent events of one run as it happens, from a port of its own,
// since Fossil holds a page until it is complete. One small HTTP server per node host, started by
// the web page (ocx2-cgi --stream-server) when a viewer opens the page of a run in this host's
// care, and ending after ten minutes with nobody following. GET /watch/RUN[?offset=N] with the
// page's token as `Authorization: Bearer T` (or, from a browser's EventSource, which cannot set a
// header, as ?token=T) answers text/event-stream: the events of watch (state, output, delivery,
// missed, end), each `event: TYPE` with its JSON, `offset` events saying where the output was read
// to, and `refused` when the viewer may no longer read the run; the stream ends with the run. The
// token (StreamToken.ts) names the viewer Fossil authenticated and is spent by the connection; the
// viewer's capabilities are read from the repository when it opens and every `recheck` seconds
// while it streams (StreamReader.ts). Only the origin of the page that signed the token (or the
// settings' `origin`) is let read it cross-origin. No request is logged: a token in a URL stays
// out of the server's log.
//
// ROOT/settings/stream (JSON, optional): {"host": "127.0.0.1", "port": 0, "url": "https://...",
// "origin": "https://...", "recheck": 60}: where it listens (loopback unless told; port 0: one the
// system chooses), behind a proxy the URL browsers reach it at, the Fossil server's origin as
// browsers see it when the page cannot tell (a TLS proxy before Fossil), and how often (seconds)
// a stream asks the repository again whether its viewer may read the run.
// ROOT/node/stream.json: {"pid", "port", "host"} of the one running.

import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Path from "node:path"
import { alive } from "../care/ProcessAlive.js"
import { releasePaths } from "../release/ReleasePaths.js"
import { mayReadWith, readerRefusal } from "./StreamReader.js"
import { eventOut } from "./EventOut.js"
import { follow, readRunSummary } from "./Follow.js"
import { type StreamGrant, streamSecret, TOKEN_MS, verifyGrant } from "./StreamToken.js"

export interface StreamSettings {
  readonly host: string
  readonly port: number
  readonly url: string | undefined
  /** the Fossil server's origin as browsers see it, allowed besides the one each token names */
  readonly origin: string | undefined
  /** milliseconds between two checks of a streaming viewer's capabilities */
  readonly recheckMs: number
}

const DEFAULT_RECHECK_MS = 60_000

export const streamSettings = (root: string): StreamSettings => {
  let given: { host?: unknown; port?: unknown; url?: unknown; origin?: unknown; recheck?: unknown } = {}
  try {
    given = JSON.parse(Fs.readFileSync(Path.join(releasePaths(root).settings, "stream"), "utf8"))
  } catch {
    // absent or unreadable: the defaults
  }
  return {
    // loopback unless told: the stream is reached from elsewhere only where the operator chose to expose it
    host: typeof given.host === "string" && given.host !== "" ? given.host : "127.0.0.1",
    port: typeof given.port === "number" && Number.isInteger(given.port) && given.port >= 0 && given.port < 65536 ? given.port : 0,
    url: typeof given.url === "string" ? given.url.replace(/\/+$/, "") : undefined,
    origin: typeof given.origin === "string" ? originOf(given.origin) : undefined,
    // never more than a minute between two checks
    recheckMs: typeof given.recheck === "number" && given.recheck > 0 ? Math.min(given.recheck * 1000, DEFAULT_RECHECK_MS) : DEFAULT_RECHECK_MS
  }
}

const originOf = (url: string): string | undefined => {
  try {
    return new URL(url).origin
  } catch {
    return undefined
  }
}

export const stateFile = (root: string): string => Path.join(releasePaths(root).node, "stream.json")

/** The running server's port, if one runs. */
export const runningServer = (root: string): { readonly pid: number; readonly port: number } | undefined => {
  try {
    const state = JSON.parse(Fs.readFileSync(stateFile(root), "utf8")) as { pid?: unknown; port?: unknown }
    if (typeof state.pid === "number" && typeof state.port === "number" && alive(state.pid)) return { pid: state.pid, port: state.port }
  } catch {
    // none yet
  }
  return undefined
}

/** The server's port: the one running, else one started now from `program` (waiting for it to listen). */
export const ensureStreamServer = async (root: string, program: string): Promise<number> => {
  const running = runningServer(root)
  if (running !== undefined) return running.port
  const nodeDir = releasePaths(root).node
  Fs.mkdirSync(nodeDir, { recursive: true })
  const log = Fs.openSync(Path.join(nodeDir, "stream.log"), "a", 0o600)
  const child = ChildProcess.spawn(process.execPath, [program, "--stream-server"], { detached: true, stdio: ["ignore", log, log] })
  Fs.closeSync(log)
  child.unref()
  const deadline = Date.now() + 10_000
  for (;;) {
    const now = runningServer(root)
    if (now !== undefined) return now.port
    if (Date.now() > deadline) throw new Error(`the stream server did not start: see ${Path.join(nodeDir, "stream.log")}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const IDLE_MS = 10 * 60_000

/** The token a request carries: its Authorization header, else (EventSource) its ?token=. */
const tokenOf = (request: Http.IncomingMessage, url: URL): string => {
  const header = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? "")
  return header?.[1] ?? url.searchParams.get("token") ?? ""
}

/** The nonces of tokens already used, each kept until its token would have expired anyway. */
const spentNonces = () => {
  const spent = new Map<string, number>()
  return {
    /** false when the token was spent before */
    spend: (grant: StreamGrant, now: number): boolean => {
      for (const [nonce, expires] of spent) if (expires <= now) spent.delete(nonce)
      if (spent.has(grant.nonce)) return false
      spent.set(grant.nonce, grant.expires)
      return true
    }
  }
}

/** Access-Control-Allow-Origin for the server's own origin only: the token's page's, or the settings'; none for any other. */
const corsFor = (request: Http.IncomingMessage, allowed: ReadonlyArray<string | undefined>): Record<string, string> => {
  const origin = request.headers.origin
  return origin !== undefined && allowed.includes(origin) ? { "access-control-allow-origin": origin, vary: "origin" } : { vary: "origin" }
}

const sse = (type: string, data: unknown): string => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`

/** Serves until nobody has followed a run for ten minutes. */
export const runStreamServer = async (root: string): Promise<void> => {
  const settings = streamSettings(root)
  const paths = releasePaths(root)
  const secret = streamSecret(paths.node)
  const spent = spentNonces()
  // the nonces spent are this process's memory: a token signed before it started may have been spent on the one before
  const startedAt = Date.now()
  let open = 0
  let idle: NodeJS.Timeout | undefined
  const server = Http.createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://stream")
    let cors = corsFor(request, [settings.origin])
    const refuse = (status: number, message: string) => {
      response.writeHead(status, { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store", ...cors })
      response.end(`${message}\n`)
    }
    const match = /^\/watch\/([0-9a-f]{40}|[0-9a-f]{64})$/.exec(url.pathname)
    if (request.method !== "GET" || match === null) return refuse(404, "this server answers GET /watch/RUN with a run page's token (Authorization: Bearer TOKEN)")
    const now = Date.now()
    const verified = verifyGrant(secret, tokenOf(request, url), now)
    if ("problem" in verified) return refuse(403, verified.problem)
    const grant = verified.grant
    cors = corsFor(request, [settings.origin, grant.origin])
    if (grant.run !== match[1]) return refuse(403, "the token is for another run")
    if (grant.expires - TOKEN_MS < startedAt) return refuse(403, "the token is older than this stream server: open the run page again")
    if (!spent.spend(grant, now)) return refuse(403, "the token was used already: open the run page again")
    const repository = { path: grant.repository, role: grant.role }
    /** why the viewer may not follow the run now, read from the repository; undefined when they may */
    const refusal = (): string | undefined => {
      const found = readRunSummary(repository, grant.run)
      if ("problem" in found) return found.problem
      return readerRefusal(grant.repository, grant.user, found.summary)
    }
    let first: ReturnType<typeof readRunSummary>
    let refused: string | undefined
    try {
      first = readRunSummary(repository, grant.run)
      // what Fossil gave when the page was shown, and what the repository gives now: both must read it
      if ("problem" in first) return refuse(404, first.problem)
      refused = mayReadWith(grant.capabilities, first.summary) ? readerRefusal(grant.repository, grant.user, first.summary) : "this run is not yours to read"
    } catch (e) {
      return refuse(500, `the repository cannot be read: ${(e as Error).message}`)
    }
    if (refused !== undefined) return refuse(403, refused)
    const offset = Number(url.searchParams.get("offset") ?? "0")
    response.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-store", connection: "keep-alive", ...cors })
    response.write(": following\n\n")
    open++
    if (idle !== undefined) clearTimeout(idle)
    const abort = new AbortController()
    request.on("close", () => abort.abort())
    const beat = setInterval(() => response.write(": still here\n\n"), 15_000)
    // the viewer's right is asked of the repository again and again; a stream they lost it for ends
    const recheck = setInterval(() => {
      let why: string | undefined
      try {
        why = refusal()
      } catch (e) {
        // the file busy or being replaced: asked again at the next check
        console.error(`${new Date().toISOString()} the rights of ${grant.user ?? "nobody"} on ${grant.run} could not be checked: ${(e as Error).message}`)
        return
      }
      if (why === undefined || abort.signal.aborted) return
      response.write(sse("refused", { type: "refused", at: new Date().toISOString(), text: why }))
      abort.abort()
    }, settings.recheckMs)
    follow({
      repository,
      run: grant.run,
      careDir: paths.care,
      offset: Number.isInteger(offset) && offset >= 0 ? offset : 0,
      signal: abort.signal,
      emit: (event) => {
        response.write(sse(event.type, eventOut(event)))
      },
      reached: (at) => {
        response.write(sse("offset", { offset: at }))
      }
    }).catch((e) => {
      response.write(sse("missed", { type: "missed", at: new Date().toISOString(), text: String((e as Error).message) }))
    }).finally(() => {
      clearInterval(beat)
      clearInterval(recheck)
      response.end()
      open--
      if (open === 0) idle = setTimeout(stop, IDLE_MS)
    })
  })
  const stop = () => {
    server.close()
    try {
      const state = JSON.parse(Fs.readFileSync(stateFile(root), "utf8")) as { pid?: unknown }
      if (state.pid === process.pid) Fs.rmSync(stateFile(root), { force: true })
    } catch {
      // gone
    }
    process.exit(0)
  }
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(settings.port, settings.host, () => resolve())
  })
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : settings.port
  const file = stateFile(root)
  Fs.writeFileSync(`${file}.${process.pid}`, JSON.stringify({ pid: process.pid, port, host: settings.host }), { mode: 0o600 })
  Fs.renameSync(`${file}.${process.pid}`, file)
  console.error(`${new Date().toISOString()} the stream server of ${root} listens on ${settings.host}:${port}`)
  idle = setTimeout(stop, IDLE_MS)
  process.once("SIGTERM", stop)
}
