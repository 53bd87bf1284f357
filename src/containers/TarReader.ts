/**
 * A tar reader that hands over one entry at a time (ustar, pax `x` headers, GNU long names):
 * the unpacker decides about every entry itself, so nothing is written that it did not check.
 * Each entry's body must be read (or left) before the next entry is asked for; what is left is
 * skipped. Bytes after the end-of-archive blocks are read too, so a caller hashing the stream
 * hashes all of it.
 */
export type TarEntryType = "file" | "directory" | "symlink" | "link" | "character" | "block" | "fifo"

export interface TarEntry {
  readonly path: string
  readonly type: TarEntryType
  readonly mode: number
  readonly size: number
  /** seconds since the epoch */
  readonly mtime: number
  /** a symlink's target, a hard link's target path */
  readonly linkname: string
}

export class TarError extends Error {}

class ByteReader {
  private chunks: Array<Buffer> = []
  private buffered = 0
  private ended = false

  constructor(private readonly source: AsyncIterator<Buffer>) {}

  private async fill(n: number): Promise<void> {
    while (this.buffered < n && !this.ended) {
      const next = await this.source.next()
      if (next.done === true) this.ended = true
      else if (next.value.length > 0) {
        this.chunks.push(next.value)
        this.buffered += next.value.length
      }
    }
  }

  private takeBuffered(n: number): Buffer {
    const out: Array<Buffer> = []
    let want = n
    while (want > 0) {
      const head = this.chunks[0]!
      if (head.length <= want) {
        out.push(head)
        this.chunks.shift()
        want -= head.length
      } else {
        out.push(head.subarray(0, want))
        this.chunks[0] = head.subarray(want)
        want = 0
      }
    }
    this.buffered -= n
    return out.length === 1 ? out[0]! : Buffer.concat(out)
  }

  /** exactly N bytes; undefined at the end of the stream; a stream ending within them is an error */
  async exactly(n: number): Promise<Buffer | undefined> {
    await this.fill(n)
    if (this.buffered === 0 && this.ended) return undefined
    if (this.buffered < n) throw new TarError("the archive ends within an entry")
    return this.takeBuffered(n)
  }

  /** N bytes, in the pieces they came in */
  async *pieces(n: number): AsyncGenerator<Buffer> {
    let left = n
    while (left > 0) {
      if (this.buffered === 0) await this.fill(1)
      if (this.buffered === 0) throw new TarError("the archive ends within an entry")
      const piece = this.takeBuffered(Math.min(left, this.chunks[0]!.length))
      left -= piece.length
      yield piece
    }
  }

  async drain(): Promise<void> {
    this.chunks = []
    this.buffered = 0
    while (!this.ended) {
      const next = await this.source.next()
      if (next.done === true) this.ended = true
    }
  }
}

const text = (block: Buffer, start: number, length: number): string => {
  const field = block.subarray(start, start + length)
  const nul = field.indexOf(0)
  return field.subarray(0, nul < 0 ? length : nul).toString("utf8")
}

const numeric = (block: Buffer, start: number, length: number, what: string): number => {
  const field = block.subarray(start, start + length)
  if ((field[0]! & 0x80) !== 0) {
    // base-256, for values octal cannot hold
    let n = field[0]! & 0x7f
    for (let i = 1; i < length; i++) n = n * 256 + field[i]!
    if (!Number.isSafeInteger(n)) throw new TarError(`an entry's ${what} is too large`)
    return n
  }
  const s = text(block, start, length).trim()
  if (s === "") return 0
  if (!/^[0-7]+$/.test(s)) throw new TarError(`an entry's ${what} is not a number: ${JSON.stringify(s)}`)
  return parseInt(s, 8)
}

const checksumOk = (block: Buffer): boolean => {
  let sum = 0
  for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : block[i]!
  return sum === numeric(block, 148, 8, "checksum")
}

const paxRecords = (body: Buffer): Map<string, string> => {
  const records = new Map<string, string>()
  let at = 0
  while (at < body.length) {
    const space = body.indexOf(0x20, at)
    const length = Number(body.subarray(at, space).toString("ascii"))
    if (space < 0 || !Number.isSafeInteger(length) || length <= 0 || at + length > body.length) throw new TarError("a pax header is malformed")
    const record = body.subarray(space + 1, at + length - 1).toString("utf8")
    const eq = record.indexOf("=")
    if (eq < 0) throw new TarError("a pax header record has no =")
    records.set(record.slice(0, eq), record.slice(eq + 1))
    at += length
  }
  return records
}

const types: Record<string, TarEntryType> = {
  "0": "file",
  "\0": "file",
  "": "file",
  "7": "file",
  "1": "link",
  "2": "symlink",
  "3": "character",
  "4": "block",
  "5": "directory",
  "6": "fifo"
}

const padding = (size: number) => (512 - (size % 512)) % 512

/** the entries of the archive SOURCE streams, each with its body */
export async function* tarEntries(source: AsyncIterable<Buffer>): AsyncGenerator<{ entry: TarEntry; body: AsyncIterable<Buffer> }> {
  const reader = new ByteReader(source[Symbol.asyncIterator]())
  let pax = new Map<string, string>()
  let longName: string | undefined
  let longLink: string | undefined
  const readBody = async (size: number): Promise<Buffer> => {
    if (size > 16 * 1024 * 1024) throw new TarError("an extended header is larger than 16 MiB")
    const body = (await reader.exactly(size + padding(size))) ?? Buffer.alloc(0)
    if (body.length < size) throw new TarError("the archive ends within an entry")
    return body.subarray(0, size)
  }
  for (;;) {
    const block = await reader.exactly(512)
    if (block === undefined) throw new TarError("the archive ends without its end-of-archive blocks")
    if (block.every((b) => b === 0)) {
      // the end: one zero block (the second may be missing), then anything else is read and dropped
      await reader.drain()
      return
    }
    if (!checksumOk(block)) throw new TarError("an entry's header checksum is wrong")
    const flag = String.fromCharCode(block[156]!)
    let size = numeric(block, 124, 12, "size")
    if (flag === "x" || flag === "g" || flag === "L" || flag === "K") {
      const body = await readBody(size)
      if (flag === "x") pax = paxRecords(body)
      else if (flag === "L") longName = text(body, 0, body.length)
      else if (flag === "K") longLink = text(body, 0, body.length)
      // a global pax header names nothing the unpacker uses
      continue
    }
    const type = types[flag === "\0" ? "\0" : flag]
    if (type === undefined) throw new TarError(`an entry has the type ${JSON.stringify(flag)}, which this server does not unpack`)
    const magic = block.subarray(257, 263).toString("latin1")
    const prefix = magic === "ustar\0" ? text(block, 345, 155) : ""
    let path = longName ?? (prefix !== "" ? `${prefix}/${text(block, 0, 100)}` : text(block, 0, 100))
    let linkname = longLink ?? text(block, 157, 100)
    path = pax.get("path") ?? path
    linkname = pax.get("linkpath") ?? linkname
    const paxSize = pax.get("size")
    if (paxSize !== undefined) {
      size = Number(paxSize)
      if (!Number.isSafeInteger(size) || size < 0) throw new TarError("a pax size is not a number")
    }
    const mtime = pax.has("mtime") ? Math.floor(Number(pax.get("mtime"))) : numeric(block, 136, 12, "mtime")
    pax = new Map()
    longName = undefined
    longLink = undefined
    // only regular files carry a body (a hard link's size is its target's, and is not in the archive)
    const bodySize = type === "file" ? size : 0
    let left = bodySize
    const body = (async function* () {
      for await (const piece of reader.pieces(left)) {
        left -= piece.length
        yield piece
      }
    })()
    yield {
      entry: { path, type, mode: numeric(block, 100, 8, "mode") & 0o7777, size: bodySize, mtime: Number.isFinite(mtime) ? mtime : 0, linkname },
      body
    }
    // what the caller left of the body, and the padding
    for await (const _ of reader.pieces(left)) void _
    await reader.exactly(padding(bodySize))
  }
}
