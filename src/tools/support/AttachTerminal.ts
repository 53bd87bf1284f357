// The person's end of `ocx2 attach`: their terminal, raw, joined to the run's through the
// watcher's socket (src/watcher/TerminalServer.ts) until they leave with Ctrl-] or the process ends.

import * as Fs from "node:fs"
import * as Net from "node:net"
import { frame, FrameReader, FrameType, resizeFrame, socketName } from "../../watcher/TerminalSocket.js"

/** Ctrl-]: what a person types to leave the run's terminal (telnet's escape, which no program needs) */
export const detachKey = 0x1d

export type Connected =
  | { readonly _tag: "Connected"; readonly socket: Net.Socket }
  /** no socket: the run's process has no terminal, or is not launched yet */
  | { readonly _tag: "NoTerminal" }
  /** a socket nobody serves: its watcher is gone */
  | { readonly _tag: "NotServed" }
  | { readonly _tag: "Failed"; readonly reason: string }

export const connectTerminal = (careDir: string, run: string): Promise<Connected> =>
  new Promise((resolve) => {
    let dirFd: number
    try {
      dirFd = Fs.openSync(careDir, Fs.constants.O_RDONLY | Fs.constants.O_DIRECTORY)
    } catch (e) {
      return resolve({ _tag: "Failed", reason: `${careDir}: ${(e as Error).message}` })
    }
    const socket = Net.createConnection(`/proc/self/fd/${dirFd}/${socketName(run)}`)
    const done = (answer: Connected) => {
      Fs.closeSync(dirFd)
      resolve(answer)
    }
    socket.once("connect", () => {
      socket.removeAllListeners("error")
      done({ _tag: "Connected", socket })
    })
    socket.once("error", (e: NodeJS.ErrnoException) =>
      done(e.code === "ENOENT" ? { _tag: "NoTerminal" } : e.code === "ECONNREFUSED" ? { _tag: "NotServed" } : { _tag: "Failed", reason: e.message }))
  })

export type Left =
  | { readonly _tag: "Detached" }
  | { readonly _tag: "Ended"; readonly words: string }
  /** the connection closed without the watcher saying why */
  | { readonly _tag: "Lost" }

export interface PersonTerminal {
  readonly input: NodeJS.ReadStream
  readonly output: NodeJS.WriteStream
}

/** Joins the person's terminal to the run's until one of them leaves; the person's terminal is restored. */
export const joinTerminal = (socket: Net.Socket, person: PersonTerminal): Promise<Left> =>
  new Promise((resolve) => {
    const { input, output } = person
    const raw = input.isTTY === true
    if (raw) input.setRawMode(true)
    const reader = new FrameReader()
    let left: Left | undefined
    const sendSize = () => {
      if (output.isTTY === true) socket.write(resizeFrame(output.columns, output.rows))
    }
    const onInput = (chunk: Buffer) => {
      const at = chunk.indexOf(detachKey)
      if (at >= 0) {
        if (at > 0) socket.write(frame(FrameType.input, chunk.subarray(0, at)))
        left = { _tag: "Detached" }
        socket.end()
        finish()
        return
      }
      socket.write(frame(FrameType.input, chunk))
    }
    const onData = (chunk: Buffer) => {
      const frames = reader.push(chunk)
      if (frames === "too long") return void socket.destroy()
      for (const f of frames) {
        if (f.type === FrameType.output) output.write(f.payload)
        else if (f.type === FrameType.end) left ??= { _tag: "Ended", words: f.payload.toString("utf8") }
      }
    }
    let finished = false
    const finish = () => {
      if (finished) return
      finished = true
      input.off("data", onInput)
      output.off("resize", sendSize)
      if (raw) input.setRawMode(false)
      input.pause()
      resolve(left ?? { _tag: "Lost" })
    }
    socket.on("data", onData)
    socket.on("error", () => {})
    socket.on("close", finish)
    output.on("resize", sendSize)
    input.on("data", onInput)
    input.resume()
    sendSize()
  })
