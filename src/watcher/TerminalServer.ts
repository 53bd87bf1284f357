// The watcher holds a terminal run's pseudo-terminal (2.10) and lets people on the host join it
// with `ocx2 attach RUN`: a unix socket ROOT/care/RUN.tty, served for as long as the process runs.
// Each person joined sees the last screenful first, then everything the terminal shows (its
// output, and STDERR copied to it), and what they type is typed into the terminal; several may
// join at once. Leaving (Ctrl-] or closing the client) leaves the run going.

import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Path from "node:path"
import type { Ending, RunningProcess } from "../../services/SandboxLauncher.js"
import { frame, FrameReader, FrameType, readResize, socketName } from "./TerminalSocket.js"

/** a person whose connection holds more than this unsent is too slow to follow, and is let go */
const slowViewerBytes = 4 << 20

const endingWords = (ending: Ending): string =>
  ending.outcome === "exited" ? `exited ${ending.exit}`
  : ending.outcome === "budget" ? `budget: ${ending.limit}`
  : "stopped"

/**
 * Serves the terminal of a launch that has one, for the scope's life; nothing for one without.
 * Never fails the run: a socket that cannot be made is logged, and the run goes on unjoinable.
 */
export const serveTerminal = (
  run: string,
  running: RunningProcess,
  careDir: string,
  log: (line: string) => Effect.Effect<void> = () => Effect.void
): Effect.Effect<void, never, Scope.Scope> => {
  const terminal = running.terminal
  if (terminal === undefined) return Effect.void
  const name = socketName(run)
  const socketPath = Path.join(careDir, name)
  const clients = new Set<Net.Socket>()

  const serve = (socket: Net.Socket) => {
    clients.add(socket)
    const reader = new FrameReader()
    const send = (bytes: Uint8Array) => {
      if (socket.destroyed) return
      if (socket.writableLength > slowViewerBytes) return void socket.destroy()
      socket.write(frame(FrameType.output, bytes))
    }
    send(terminal.recent())
    const unsubscribe = terminal.subscribe(send)
    socket.on("data", (chunk: Buffer) => {
      const frames = reader.push(chunk)
      if (frames === "too long") return void socket.destroy()
      for (const f of frames) {
        if (f.type === FrameType.input) terminal.type(f.payload)
        else if (f.type === FrameType.resize) {
          const size = readResize(f.payload)
          if (size !== undefined) terminal.resize(size)
        }
      }
    })
    socket.on("error", () => {})
    socket.on("close", () => {
      unsubscribe()
      clients.delete(socket)
    })
  }

  const listen = Effect.async<{ server: Net.Server; dirFd: number } | undefined>((resume) => {
    let dirFd: number
    try {
      // a socket left by a watcher of this run that died is stale: we hold the run's lock
      Fs.rmSync(socketPath, { force: true })
      // libuv removes the socket by the path it was bound with when the server closes: the
      // descriptor stays open until then, so that path names ROOT/care to the end
      dirFd = Fs.openSync(careDir, Fs.constants.O_RDONLY | Fs.constants.O_DIRECTORY)
    } catch (e) {
      return resume(Effect.as(log(`no terminal to join: ${(e as Error).message}`), undefined))
    }
    const server = Net.createServer(serve)
    server.once("error", (e) => {
      Fs.closeSync(dirFd)
      resume(Effect.as(log(`no terminal to join: ${socketPath}: ${e.message}`), undefined))
    })
    server.listen(`/proc/self/fd/${dirFd}/${name}`, () => {
      try {
        Fs.chmodSync(socketPath, 0o600)
      } catch {
        // ROOT/care itself is 0700
      }
      resume(Effect.as(log(`the terminal can be joined: ocx2 attach ${run} (${socketPath})`), { server, dirFd }))
    })
  })

  const close = (served: { server: Net.Server; dirFd: number } | undefined) =>
    Effect.gen(function*() {
      if (served === undefined) return
      // the launcher's own finalizer ends a process still running after this one; here its end is known or not
      const result = yield* Effect.timeoutOption(running.result, "100 millis")
      const words = Option.match(result, {
        onNone: () => "the watcher let go of the run",
        onSome: (r) => `the process ended: ${endingWords(r.ending)}`
      })
      yield* Effect.async<void>((resume) => {
        for (const socket of clients) socket.end(frame(FrameType.end, Buffer.from(words, "utf8")))
        served.server.close(() => resume(Effect.void))
        // a person's client that does not close is closed for them
        const timer = setTimeout(() => {
          for (const socket of clients) socket.destroy()
        }, 1000)
        timer.unref()
      })
      yield* Effect.sync(() => {
        Fs.closeSync(served.dirFd)
        Fs.rmSync(socketPath, { force: true })
      })
    })

  return Effect.asVoid(Effect.acquireRelease(listen, close))
}
