// What the watcher serving a run's terminal and `ocx2 attach` share: where the socket is, and the
// frames on it. The socket is ROOT/care/NAME, mode 0600 in a directory of mode 0700: only the
// host's OCX account reaches it. A unix socket's path holds at most 107 bytes and ROOT may be
// longer, so both ends name it through an open descriptor of ROOT/care (/proc/self/fd/N/NAME).
//
// Frames, both ways: one byte of type, four of length (big-endian), then that many bytes.
//   watcher to person: output (what the terminal shows), end (UTF-8 words: how the process ended)
//   person to watcher: input (what the person types), resize (columns, rows: two u16)

import { createHash } from "node:crypto"
import * as Fs from "node:fs"

export const FrameType = { output: 1, end: 2, input: 3, resize: 4 } as const

/** no frame is longer: a peer sending one is cut off */
export const frameMax = 1 << 20

/** the socket's name in ROOT/care: RUN.tty, or for an unusually long name a digest of it */
export const socketName = (run: string): string =>
  run.length <= 64 ? `${run}.tty` : `${createHash("sha256").update(run).digest("hex").slice(0, 40)}.tty`

/** runs `f` with a short path to DIR (through a descriptor of it held meanwhile) */
export const viaDirectory = <A>(dir: string, f: (shortDir: string) => A): A => {
  const fd = Fs.openSync(dir, Fs.constants.O_RDONLY | Fs.constants.O_DIRECTORY)
  try {
    return f(`/proc/self/fd/${fd}`)
  } finally {
    Fs.closeSync(fd)
  }
}

export const frame = (type: number, payload: Uint8Array): Buffer => {
  const head = Buffer.alloc(5)
  head.writeUInt8(type, 0)
  head.writeUInt32BE(payload.length, 1)
  return Buffer.concat([head, payload])
}

export const resizeFrame = (cols: number, rows: number): Buffer => {
  const payload = Buffer.alloc(4)
  payload.writeUInt16BE(Math.min(65535, Math.max(1, cols)), 0)
  payload.writeUInt16BE(Math.min(65535, Math.max(1, rows)), 2)
  return frame(FrameType.resize, payload)
}

export const readResize = (payload: Uint8Array): { readonly cols: number; readonly rows: number } | undefined => {
  if (payload.length !== 4) return undefined
  const b = Buffer.from(payload)
  return { cols: b.readUInt16BE(0), rows: b.readUInt16BE(2) }
}

export interface Frame {
  readonly type: number
  readonly payload: Buffer
}

/** Frames out of a byte stream, however it is cut; a frame over frameMax is an error. */
export class FrameReader {
  private pending: Buffer = Buffer.alloc(0)

  push(chunk: Buffer): ReadonlyArray<Frame> | "too long" {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk])
    const frames: Array<Frame> = []
    while (this.pending.length >= 5) {
      const length = this.pending.readUInt32BE(1)
      if (length > frameMax) return "too long"
      if (this.pending.length < 5 + length) break
      frames.push({ type: this.pending.readUInt8(0), payload: this.pending.subarray(5, 5 + length) })
      this.pending = this.pending.subarray(5 + length)
    }
    return frames
  }
}
