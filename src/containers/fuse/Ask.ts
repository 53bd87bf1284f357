/**
 * A FUSE ask on the wire (docs/containers.md, "FUSE asks"): what a mount sends its client for
 * each operation the kernel asks of it, and the client's answer. The mount (the container
 * proxy) encodes asks and decodes answers; the client decodes asks and encodes answers; the
 * server between them never reads either. Big-endian; a path is `[length: u16][UTF-8]`,
 * relative to the mount's root ("" is the root itself).
 *
 *   channel request: [16][id length: u16][mount id][op: u8][the op's fields]
 *   answer:          [0x00][the op's data]   or   [0x01][errno: u16]   (then the finish)
 */
export const fuseAskTag = 16

export const AskOp = {
  stat: 1,
  list: 2,
  read: 3,
  write: 4,
  create: 5,
  mkdir: 6,
  unlink: 7,
  rmdir: 8,
  rename: 9,
  setattr: 10,
  fsync: 11,
  statfs: 12,
  readlink: 13
} as const
export type AskOpName = keyof typeof AskOp

export const Kind = { file: 1, directory: 2, symlink: 3 } as const
export type KindName = keyof typeof Kind

/** SETATTR's mask: which of the fields the ask changes */
export const SetMask = { mode: 1, size: 2, atime: 4, mtime: 8, uid: 16, gid: 32 } as const

/** Linux errno values the mount and the handlers name */
export const Errno = {
  EPERM: 1,
  ENOENT: 2,
  EINTR: 4,
  EIO: 5,
  EBADF: 9,
  EACCES: 13,
  EBUSY: 16,
  EEXIST: 17,
  EXDEV: 18,
  ENOTDIR: 20,
  EISDIR: 21,
  EINVAL: 22,
  EFBIG: 27,
  ENOSPC: 28,
  EROFS: 30,
  ENAMETOOLONG: 36,
  ENOSYS: 38,
  ENOTEMPTY: 39,
  ELOOP: 40
} as const

export interface Stat {
  readonly kind: KindName
  /** permission bits (0o7777) */
  readonly mode: number
  readonly size: bigint
  readonly mtimeNs: bigint
}

export interface DirEntry {
  readonly name: string
  readonly kind: KindName
}

export interface Statfs {
  readonly blocks: bigint
  readonly bfree: bigint
  readonly bavail: bigint
  readonly files: bigint
  readonly ffree: bigint
  readonly bsize: number
  readonly namelen: number
}

export interface SetAttr {
  readonly mask: number
  readonly mode: number
  readonly uid: number
  readonly gid: number
  readonly size: bigint
  readonly atimeNs: bigint
  readonly mtimeNs: bigint
}

/** one op, decoded */
export type Ask =
  | { readonly op: "stat" | "list" | "unlink" | "rmdir" | "statfs" | "readlink"; readonly path: string }
  | { readonly op: "read"; readonly path: string; readonly offset: bigint; readonly size: number }
  | { readonly op: "write"; readonly path: string; readonly offset: bigint; readonly data: Buffer }
  | { readonly op: "create" | "mkdir"; readonly path: string; readonly mode: number }
  | { readonly op: "rename"; readonly path: string; readonly to: string; readonly flags: number }
  | { readonly op: "setattr"; readonly path: string; readonly set: SetAttr }
  | { readonly op: "fsync"; readonly path: string; readonly datasync: boolean }

class Writer {
  private readonly parts: Array<Buffer> = []
  u8(n: number): this {
    this.parts.push(Buffer.of(n))
    return this
  }
  u16(n: number): this {
    const b = Buffer.alloc(2)
    b.writeUInt16BE(n)
    this.parts.push(b)
    return this
  }
  u32(n: number): this {
    const b = Buffer.alloc(4)
    b.writeUInt32BE(n >>> 0)
    this.parts.push(b)
    return this
  }
  u64(n: bigint): this {
    const b = Buffer.alloc(8)
    b.writeBigUInt64BE(BigInt.asUintN(64, n))
    this.parts.push(b)
    return this
  }
  text(s: string): this {
    const b = Buffer.from(s, "utf8")
    if (b.length > 0xffff) throw new RangeError("a path or name longer than 65535 bytes")
    return this.u16(b.length).bytes(b)
  }
  bytes(b: Uint8Array): this {
    this.parts.push(Buffer.from(b.buffer, b.byteOffset, b.length))
    return this
  }
  done(): Buffer {
    return Buffer.concat(this.parts)
  }
}

class Reader {
  at = 0
  constructor(private readonly b: Buffer) {}
  private need(n: number): void {
    if (this.at + n > this.b.length) throw new AskFormatError("the ask ends early")
  }
  u8(): number {
    this.need(1)
    return this.b[this.at++]!
  }
  u16(): number {
    this.need(2)
    const v = this.b.readUInt16BE(this.at)
    this.at += 2
    return v
  }
  u32(): number {
    this.need(4)
    const v = this.b.readUInt32BE(this.at)
    this.at += 4
    return v
  }
  u64(): bigint {
    this.need(8)
    const v = this.b.readBigUInt64BE(this.at)
    this.at += 8
    return v
  }
  text(): string {
    const n = this.u16()
    this.need(n)
    const s = this.b.subarray(this.at, this.at + n).toString("utf8")
    this.at += n
    return s
  }
  rest(): Buffer {
    const r = this.b.subarray(this.at)
    this.at = this.b.length
    return r
  }
  get done(): boolean {
    return this.at === this.b.length
  }
}

export class AskFormatError extends Error {}

/** the channel request's prefix of every ask of the mount ID */
export const askPrefix = (id: string): Buffer => new Writer().u8(fuseAskTag).text(id).done()

export const encodeAsk = (prefix: Buffer, ask: Ask): Buffer => {
  const w = new Writer().bytes(prefix).u8(AskOp[ask.op]).text(ask.path)
  switch (ask.op) {
    case "read":
      return w.u64(ask.offset).u32(ask.size).done()
    case "write":
      return w.u64(ask.offset).bytes(ask.data).done()
    case "create":
    case "mkdir":
      return w.u32(ask.mode).done()
    case "rename":
      return w.text(ask.to).u32(ask.flags).done()
    case "setattr":
      return w.u32(ask.set.mask).u32(ask.set.mode).u32(ask.set.uid).u32(ask.set.gid).u64(ask.set.size).u64(ask.set.atimeNs).u64(ask.set.mtimeNs).done()
    case "fsync":
      return w.u8(ask.datasync ? 1 : 0).done()
    default:
      return w.done()
  }
}

const opNames = new Map<number, AskOpName>(Object.entries(AskOp).map(([k, v]) => [v, k as AskOpName]))

/** a channel request of a FUSE ask: the mount id and the op (AskFormatError when it is not one) */
export const decodeAsk = (payload: Buffer): { id: string; ask: Ask } => {
  const r = new Reader(payload)
  if (r.u8() !== fuseAskTag) throw new AskFormatError("not a FUSE ask")
  const id = r.text()
  const code = r.u8()
  const op = opNames.get(code)
  if (op === undefined) throw new AskFormatError(`no such op ${code}`)
  const path = r.text()
  const ask = ((): Ask => {
    switch (op) {
      case "read":
        return { op, path, offset: r.u64(), size: r.u32() }
      case "write":
        return { op, path, offset: r.u64(), data: r.rest() }
      case "create":
      case "mkdir":
        return { op, path, mode: r.u32() }
      case "rename":
        return { op, path, to: r.text(), flags: r.u32() }
      case "setattr":
        return { op, path, set: { mask: r.u32(), mode: r.u32(), uid: r.u32(), gid: r.u32(), size: r.u64(), atimeNs: r.u64(), mtimeNs: r.u64() } }
      case "fsync":
        return { op, path, datasync: r.u8() === 1 }
      default:
        return { op, path }
    }
  })()
  if (!r.done) throw new AskFormatError(`the ${op} ask has bytes past its end`)
  return { id, ask }
}

/** the answers */
export const okAnswer = (data: Uint8Array = Buffer.alloc(0)): Buffer => new Writer().u8(0).bytes(data).done()
export const errnoAnswer = (errno: number): Buffer => new Writer().u8(1).u16(errno).done()

export const encodeStat = (s: Stat): Buffer => new Writer().u8(Kind[s.kind]).u32(s.mode & 0o7777).u64(s.size).u64(s.mtimeNs).done()
export const encodeList = (entries: ReadonlyArray<DirEntry>): Buffer => {
  const w = new Writer()
  for (const e of entries) w.u8(Kind[e.kind]).text(e.name)
  return w.done()
}
export const encodeWritten = (n: number): Buffer => new Writer().u32(n).done()
export const encodeStatfs = (s: Statfs): Buffer =>
  new Writer().u64(s.blocks).u64(s.bfree).u64(s.bavail).u64(s.files).u64(s.ffree).u32(s.bsize).u32(s.namelen).done()

const kindNames = new Map<number, KindName>(Object.entries(Kind).map(([k, v]) => [v, k as KindName]))
const kindOf = (code: number): KindName => {
  const k = kindNames.get(code)
  if (k === undefined) throw new AskFormatError(`no such kind ${code}`)
  return k
}

/** an answer: its data, or the errno (a bare finish, or bytes that are no answer: EIO) */
export type Answer = { readonly ok: true; readonly data: Buffer } | { readonly ok: false; readonly errno: number }

export const decodeAnswer = (payload: Buffer | undefined): Answer => {
  if (payload === undefined || payload.length === 0) return { ok: false, errno: Errno.EIO }
  if (payload[0] === 0) return { ok: true, data: payload.subarray(1) }
  if (payload[0] === 1 && payload.length === 3) return { ok: false, errno: payload.readUInt16BE(1) || Errno.EIO }
  return { ok: false, errno: Errno.EIO }
}

export const decodeStat = (data: Buffer): Stat => {
  const r = new Reader(data)
  return { kind: kindOf(r.u8()), mode: r.u32() & 0o7777, size: r.u64(), mtimeNs: r.u64() }
}
export const decodeList = (data: Buffer): Array<DirEntry> => {
  const r = new Reader(data)
  const out: Array<DirEntry> = []
  while (!r.done) {
    const kind = kindOf(r.u8())
    out.push({ kind, name: r.text() })
  }
  return out
}
export const decodeWritten = (data: Buffer): number => new Reader(data).u32()
export const decodeStatfs = (data: Buffer): Statfs => {
  const r = new Reader(data)
  return { blocks: r.u64(), bfree: r.u64(), bavail: r.u64(), files: r.u64(), ffree: r.u64(), bsize: r.u32(), namelen: r.u32() }
}
