// The node's stream server: server-sent events of one run as it happens, from a port of its own,
// since Fossil holds a page until it is complete. One small HTTP server per node host, started by
// the web page (ocx2-cgi --stream-server) when a viewer opens the page of a run in this host's
// care, and ending after ten minutes with nobody following. GET /watch/RUN?token=T[&offset=N]
// answers text/event-stream: the events of watch (state, output, delivery, missed, end), each
// `event: TYPE` with its JSON; the stream ends with the run. The token is the page's, signed for
// the viewer Fossil authenticated (StreamToken.ts); the run must be one their capabilities read.
//
// ROOT/settings/stream (JSON, optional): {"host": "0.0.0.0", "port": 0, "url": "https://..."}: where
// it listens (port 0: one the system chooses) and, behind a proxy, the URL browsers reach it at.
// ROOT/node/stream.json: {"pid", "port"} of the one running.

import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Path from "node:path"
import { alive } from "../care/ProcessAlive.js"
import { releasePaths } from "../release/ReleasePaths.js"
import { grants } from "../fossil/Fullcap.js"
import { eventOut } from "../tools/watch.js"
import { follow, readRunSummary } from "./Follow.js"
import { streamSecret, verifyGrant } from "./StreamToken.js"

export interface StreamSettings {
  readonly host: string
  readonly port: number
  readonly url: string | undefined
}

export const streamSettings = (root: string): StreamSettings => {
  let given: { host?: unknown; port?: unknown; url?: unknown } = {}
  try {
    given = JSON.parse(Fs.readFileSync(Path.join(releasePaths(root).settings, "stream"), "utf8"))
  } catch {
    // absent or unreadable: the defaults
  }
  return {
    host: typeof given.host === "string" ? given.host : "0.0.0.0",
    port: typeof given.port === "number" && Number.isInteger(given.port) && given.port >= 0 && given.port < 65536 ? given.port : 0,
    url: typeof given.url === "string" ? given.url.replace(/\/+$/, "") : undefined
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

/** Serves until nobody has followed a run for ten minutes. */
export const runStreamServer = async (root: string): Promise<void> => {
  const settings = streamSettings(root)
  const paths = releasePaths(root)
  const secret = streamSecret(paths.node)
  let open = 0
  let idle: NodeJS.Timeout | undefined
  const server = Http.createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://stream")
    const cors = { "access-control-allow-origin": request.headers.origin ?? "*", vary: "origin" }
    const refuse = (status: number, message: string) => {
      response.writeHead(status, { "content-type": "text/plain; charset=utf-8", ...cors })
      response.end(`${message}\n`)
    }
    const match = /^\/watch\/([0-9a-f]{40}|[0-9a-f]{64})$/.exec(url.pathname)
    if (request.method !== "GET" || match === null) return refuse(404, "this server answers GET /watch/RUN?token=TOKEN, from a run's page")
    const verified = verifyGrant(secret, url.searchParams.get("token") ?? "", Date.now())
    if ("problem" in verified) return refuse(403, verified.problem)
    const grant = verified.grant
    if (grant.run !== match[1]) return refuse(403, "the token is for another run")
    let found: ReturnType<typeof readRunSummary>
    try {
      found = readRunSummary({ path: grant.repository, role: grant.role }, grant.run)
    } catch (e) {
      return refuse(500, `the repository cannot be read: ${(e as Error).message}`)
    }
    if ("problem" in found) return refuse(404, found.problem)
    const place = found.summary.place._tag === "Ticket" ? "r" : "2"
    if (!grants(grant.capabilities, place) || (found.summary.private && !grants(grant.capabilities, "x"))) {
      return refuse(403, "this run is not yours to read")
    }
    const offset = Number(url.searchParams.get("offset") ?? "0")
    response.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", connection: "keep-alive", ...cors })
    response.write(": following\n\n")
    open++
    if (idle !== undefined) clearTimeout(idle)
    const abort = new AbortController()
    request.on("close", () => abort.abort())
    const beat = setInterval(() => response.write(": still here\n\n"), 15_000)
    follow({
      repository: { path: grant.repository, role: grant.role },
      run: grant.run,
      careDir: paths.care,
      offset: Number.isInteger(offset) && offset >= 0 ? offset : 0,
      signal: abort.signal,
      emit: (event) => {
        response.write(`event: ${event.type}\ndata: ${JSON.stringify(eventOut(event))}\n\n`)
      }
    }).catch((e) => {
      response.write(`event: missed\ndata: ${JSON.stringify({ type: "missed", at: new Date().toISOString(), text: String((e as Error).message) })}\n\n`)
    }).finally(() => {
      clearInterval(beat)
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
  Fs.writeFileSync(`${file}.${process.pid}`, JSON.stringify({ pid: process.pid, port }), { mode: 0o600 })
  Fs.renameSync(`${file}.${process.pid}`, file)
  console.error(`${new Date().toISOString()} the stream server of ${root} listens on ${settings.host}:${port}`)
  idle = setTimeout(stop, IDLE_MS)
  process.once("SIGTERM", stop)
}
