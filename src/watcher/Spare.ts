// The spare's side (docs/architecture.md, "The spare watcher"). It takes at most one run: on the
// first request it accepts, it stops listening, lets its lock go (so the next spare can start)
// and becomes that run's watcher, exactly as if it had been started for it. Until then it does
// nothing but wait, and it ends when it is not wanted any more: ROOT, its care directory or its
// own directory removed (seen at once: each is watched with inotify, not polled for), its socket
// or lock removed or replaced, its program rebuilt or switched (a poll every two seconds, which
// also sees what the watches cannot, such as a directory above ROOT moved), its idle time over,
// or SIGTERM.

import * as Fs from "node:fs"
import * as Net from "node:net"
import { flockNow } from "../care/FlockNow.js"
import type { NodeConfig } from "../root/NodeConfig.js"
import { programIdentity, socketPathFits, spareFiles, spareSetting, type SpareAnswer, type SpareRequest } from "../care/SpareFiles.js"
import { releasePaths } from "../release/ReleasePaths.js"

export interface Taken {
  readonly run: string
  readonly personStart: boolean
  /** when the request was read (epoch ms): the watcher's "main" for the log and bench/launch */
  readonly at: number
}

const pollMillis = 2000
const requestLimit = 64 * 1024

const sameNode = (a: NodeConfig, b: NodeConfig) =>
  a.root === b.root && a.repository === b.repository && a.nodeUser === b.nodeUser && a.serverUrl === b.serverUrl

/**
 * Serves as the node's spare; calls `take` once, with the run it took. `parseNode` reads a
 * request's node arguments as the watcher reads its own.
 */
export const serveAsSpare = (
  config: NodeConfig,
  parseNode: (args: ReadonlyArray<string>) => NodeConfig | string,
  take: (taken: Taken) => void
): void => {
  const files = spareFiles(config.root)
  const say = (line: string) => process.stdout.write(`${new Date().toISOString()} spare ${process.pid}: ${line}\n`)
  const setting = spareSetting(config.root)
  if (setting.problem !== undefined) say(setting.problem)
  if (setting.idleSeconds === "off") return process.exit(0)
  if (!socketPathFits(files.socket)) {
    say(`${files.socket} is too long for a Unix socket: no spare for this node`)
    return process.exit(0)
  }
  const program = process.argv[1] ?? ""
  const identity = programIdentity(program)

  let lockFd: number
  try {
    lockFd = Fs.openSync(files.lock, Fs.constants.O_RDWR | Fs.constants.O_CREAT, 0o600)
  } catch (e) {
    say(`cannot open ${files.lock}: ${(e as Error).message}`)
    return process.exit(0)
  }
  const locked = flockNow(lockFd)
  if (locked === "busy") return process.exit(0) // another spare serves the node
  if (locked !== "held") {
    say(`cannot lock ${files.lock}: ${locked}`)
    return process.exit(0)
  }
  Fs.ftruncateSync(lockFd, 0)
  Fs.writeSync(lockFd, `${process.pid}\n`, 0)

  Fs.rmSync(files.socket, { force: true }) // a dead spare's: the lock says none lives
  let taken = false
  let listening: { dev: number; ino: number } | undefined
  const timers: Array<NodeJS.Timeout> = []
  const watches: Array<Fs.FSWatcher> = []
  const server = Net.createServer()
  const stopWaiting = () => {
    for (const t of timers) clearInterval(t)
    for (const w of watches) w.close()
    server.close() // the socket file goes with it
    try {
      Fs.ftruncateSync(lockFd, 0)
      Fs.closeSync(lockFd) // the lock goes with its last descriptor: the next spare may start
    } catch {
      // closed already
    }
  }
  const end = (why: string, socket: "ours" | "not ours" = "ours") => {
    say(`ends: ${why}`)
    // closing the server unlinks its path, which may by now name another spare's socket
    if (socket === "ours") stopWaiting()
    process.exit(0)
  }
  const onTerm = () => end("SIGTERM")
  process.once("SIGTERM", onTerm)

  const answer = (connection: Net.Socket, a: SpareAnswer) => connection.end(`${JSON.stringify(a)}\n`)
  const handle = (connection: Net.Socket, line: string) => {
    let parsed: unknown
    try {
      parsed = JSON.parse(line)
    } catch {
      return answer(connection, { declined: "the request is not JSON" })
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      return answer(connection, { declined: "the request is not a JSON object" })
    }
    const request = parsed as Partial<Extract<SpareRequest, { run: string }>> & { ping?: unknown }
    if (request.ping === true) return answer(connection, { spare: process.pid })
    if (taken) return answer(connection, { declined: "this spare has taken a run" })
    if (typeof request.run !== "string" || !/^(?:[0-9a-f]{40}|[0-9a-f]{64})$/.test(request.run)) {
      return answer(connection, { declined: "run is not a full artifact hash" })
    }
    const asked = Array.isArray(request.node) ? parseNode(request.node) : "node is not a list of arguments"
    if (typeof asked === "string") return answer(connection, { declined: asked })
    if (!sameNode(asked, config)) return answer(connection, { declined: "this spare serves another node" })
    if (typeof request.program !== "string") return answer(connection, { declined: "program is not a path" })
    if (programIdentity(request.program) !== identity) {
      taken = true // no other request is taken meanwhile
      const answered = `${JSON.stringify({ declined: "this spare runs another watcher program" } satisfies SpareAnswer)}\n`
      return void connection.end(answered, () => end("its program is not the one watchers are started from now"))
    }
    taken = true
    const at = Date.now()
    process.removeListener("SIGTERM", onTerm) // from now on the watcher's own runtime answers it
    stopWaiting()
    answer(connection, { taken: process.pid })
    take({ run: request.run, personStart: request.personStart === true, at })
  }

  server.on("connection", (connection) => {
    // one request a connection: its first line; what follows it is not read
    let buffered = ""
    let handled = false
    connection.on("error", () => connection.destroy())
    connection.on("data", (chunk) => {
      if (handled) return
      buffered += chunk.toString("utf8")
      const newline = buffered.indexOf("\n")
      if (newline !== -1) {
        handled = true
        handle(connection, buffered.slice(0, newline))
      } else if (buffered.length > requestLimit) {
        handled = true
        answer(connection, { declined: `the request is longer than ${requestLimit} bytes` })
      }
    })
  })
  // the places it lives in, outermost first: ROOT, its care directory, the spare's own directory
  const places = [
    ["its root", config.root],
    ["its care directory", releasePaths(config.root).care],
    ["its directory", files.dir]
  ] as const
  /** Why the spare is not wanted where it waits: a place it lives in, its socket or its lock gone or replaced. */
  const placeGone = (): string | undefined => {
    for (const [what, path] of places) {
      if (!Fs.existsSync(path)) return `${what} ${path} is gone`
    }
    try {
      const stat = Fs.statSync(files.socket)
      if (stat.dev !== listening!.dev || stat.ino !== listening!.ino) return "another file took its socket's place"
    } catch {
      return `its socket ${files.socket} is gone`
    }
    return Fs.existsSync(files.lock) ? undefined : `its lock ${files.lock} is gone`
  }
  /** Ends the spare if it is not wanted where it waits; whether it did. */
  const checkPlaces = (): boolean => {
    if (taken || listening === undefined) return false
    const gone = placeGone()
    if (gone === undefined) return false
    // nothing more is written where it lived: what its program would write as it exits (the code
    // cache beside it, in ROOT/staged/NAME) could land in a root being removed, and leave it not
    // empty; and the socket's path is left alone, since it may by now name another spare's socket
    process.removeAllListeners("exit")
    end(gone, "not ours")
    return true
  }
  /**
   * Each place watched (inotify): an entry made, removed or moved in it, or the place itself
   * removed or moved, comes as "rename"; what is only written ("change", such as a run's log in
   * the care directory) is not looked at. A place that cannot be watched is left to the poll.
   */
  const watchPlaces = () => {
    for (const [, path] of places) {
      try {
        const watch = Fs.watch(path, { persistent: false }, (event) => {
          if (event === "rename") checkPlaces()
        })
        watch.on("error", () => checkPlaces())
        watches.push(watch)
      } catch {
        // gone already (checked next), or no watch to be had (the poll sees it)
      }
    }
  }

  server.on("error", (e) => end(`cannot serve ${files.socket}: ${e.message}`))
  server.listen(files.socket, () => {
    try {
      const stat = Fs.statSync(files.socket)
      listening = { dev: stat.dev, ino: stat.ino }
    } catch (e) {
      return end(`its socket is gone: ${(e as Error).message}`)
    }
    watchPlaces()
    if (checkPlaces()) return
    say(`waits on ${files.socket} for ${config.nodeUser}'s next run`)
  })

  timers.push(setInterval(() => {
    if (taken || listening === undefined || checkPlaces()) return
    if (programIdentity(program) !== identity) end("its program was rebuilt or switched")
  }, pollMillis))
  // setTimeout holds at most 2^31-1 ms (about 24 days): a longer idle time waits that long
  timers.push(setTimeout(() => end(`unused for ${setting.idleSeconds} s`), Math.min(setting.idleSeconds * 1000, 2 ** 31 - 1)))
}
