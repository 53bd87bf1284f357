// ROOT/care/RUN.stream: what a run's process prints, as it prints it, for the people following
// the run (watch, the run page). The launcher appends one JSON line per chunk it reads from
// STDOUT or STDERR: {"s": "stdout"|"stderr", "t": MILLISECONDS, "d": TEXT}, the text decoded as
// UTF-8 across chunks (a character cut between two chunks is whole in the second). The kept logs
// and the workspace's log files are the record; this file only serves those following, so it is
// bounded: past `streamBound` bytes it starts again from empty, and a reader that had not read
// that far is told it missed some.

import * as Fs from "node:fs"
import * as Path from "node:path"
import { StringDecoder } from "node:string_decoder"

export const streamBound = 4 * 1024 * 1024

export const runStreamFile = (careDir: string, run: string): string => Path.join(careDir, `${run}.stream`)

export interface StreamChunk {
  readonly stream: "stdout" | "stderr"
  /** milliseconds since the epoch, when the launcher read it */
  readonly at: number
  readonly text: string
}

/** The launcher's side: one writer per launch, shared by both streams; a write that fails is given up, never the run. */
export const openStreamWriter = (file: string, bound = streamBound): ((stream: "stdout" | "stderr", chunk: Buffer) => void) => {
  let fd: number | undefined
  let failed = false
  let size = 0
  const decoders = { stdout: new StringDecoder("utf8"), stderr: new StringDecoder("utf8") }
  return (stream, chunk) => {
    if (failed) return
    try {
      const text = decoders[stream].write(chunk)
      if (text.length === 0) return
      if (fd === undefined) {
        fd = Fs.openSync(file, Fs.constants.O_WRONLY | Fs.constants.O_CREAT | Fs.constants.O_APPEND | Fs.constants.O_NOFOLLOW, 0o600)
        size = Fs.fstatSync(fd).size
      }
      const line = Buffer.from(`${JSON.stringify({ s: stream, t: Date.now(), d: text })}\n`, "utf8")
      if (size + line.length > bound) {
        Fs.ftruncateSync(fd, 0)
        size = 0
      }
      Fs.writeSync(fd, line)
      size += line.length
    } catch {
      failed = true
    }
  }
}

/** The reader's side: each whole line read from `offset` on, parsed; what a reader missed when the file started again. */
export interface StreamRead {
  readonly chunks: ReadonlyArray<StreamChunk>
  readonly offset: number
  /** true when the file is shorter than where the reader was: it started again, and the reader missed what was between */
  readonly restarted: boolean
}

export const readStreamFrom = (file: string, offset: number): StreamRead => {
  let fd: number
  try {
    fd = Fs.openSync(file, Fs.constants.O_RDONLY | Fs.constants.O_NOFOLLOW)
  } catch {
    return { chunks: [], offset, restarted: false }
  }
  try {
    const size = Fs.fstatSync(fd).size
    const restarted = size < offset
    let from = restarted ? 0 : offset
    if (size === from) return { chunks: [], offset: from, restarted }
    const buffer = Buffer.alloc(size - from)
    let got = 0
    while (got < buffer.length) {
      const n = Fs.readSync(fd, buffer, got, buffer.length - got, from + got)
      if (n === 0) break
      got += n
    }
    const end = buffer.lastIndexOf(0x0a, got - 1)
    if (end < 0) return { chunks: [], offset: from, restarted }
    const chunks: Array<StreamChunk> = []
    for (const line of buffer.toString("utf8", 0, end).split("\n")) {
      try {
        const value = JSON.parse(line) as { s?: unknown; t?: unknown; d?: unknown }
        if ((value.s === "stdout" || value.s === "stderr") && typeof value.d === "string") {
          chunks.push({ stream: value.s, at: typeof value.t === "number" ? value.t : 0, text: value.d })
        }
      } catch {
        // a line cut by the file starting again
      }
    }
    from += end + 1
    return { chunks, offset: from, restarted }
  } finally {
    Fs.closeSync(fd)
  }
}
