/**
 * The kernel's FUSE protocol (linux/fuse.h), version 7.31: the opcodes this filesystem serves,
 * the headers, and the structures it reads and writes. Little-endian, as the kernel lays them
 * out on x86-64 and arm64.
 */
import type { Statfs } from "./Ask.js"

export const Op = {
  LOOKUP: 1,
  FORGET: 2,
  GETATTR: 3,
  SETATTR: 4,
  READLINK: 5,
  MKDIR: 9,
  UNLINK: 10,
  RMDIR: 11,
  RENAME: 12,
  OPEN: 14,
  READ: 15,
  WRITE: 16,
  STATFS: 17,
  RELEASE: 18,
  FSYNC: 20,
  FLUSH: 25,
  INIT: 26,
  OPENDIR: 27,
  READDIR: 28,
  RELEASEDIR: 29,
  FSYNCDIR: 30,
  ACCESS: 34,
  CREATE: 35,
  INTERRUPT: 36,
  DESTROY: 38,
  BATCH_FORGET: 42,
  RENAME2: 45
} as const

export const protocolMajor = 7
export const protocolMinor = 31

/** INIT flags this filesystem asks for (when the kernel offers them) */
export const InitFlag = {
  ASYNC_READ: 1 << 0,
  BIG_WRITES: 1 << 5,
  AUTO_INVAL_DATA: 1 << 12,
  ASYNC_DIO: 1 << 15,
  PARALLEL_DIROPS: 1 << 18,
  MAX_PAGES: 1 << 22
} as const

/** SETATTR's `valid` bits */
export const Fattr = {
  MODE: 1 << 0,
  UID: 1 << 1,
  GID: 1 << 2,
  SIZE: 1 << 3,
  ATIME: 1 << 4,
  MTIME: 1 << 5,
  ATIME_NOW: 1 << 7,
  MTIME_NOW: 1 << 8
} as const

export const S_IFMT = 0o170000
export const S_IFREG = 0o100000
export const S_IFDIR = 0o040000
export const S_IFLNK = 0o120000

export const inHeaderLength = 40
export const outHeaderLength = 16

/** the largest WRITE the kernel sends (1 MiB: 256 pages, FUSE_MAX_PAGES) */
export const maxWrite = 1024 * 1024
export const maxPages = 256
/** a read of /dev/fuse must hold the largest request: a WRITE's headers and its data */
export const readBufferSize = maxWrite + 4096

export interface InHeader {
  readonly length: number
  readonly opcode: number
  readonly unique: bigint
  readonly nodeid: bigint
  readonly uid: number
  readonly gid: number
  readonly pid: number
}

export const readInHeader = (b: Buffer): InHeader => ({
  length: b.readUInt32LE(0),
  opcode: b.readUInt32LE(4),
  unique: b.readBigUInt64LE(8),
  nodeid: b.readBigUInt64LE(16),
  uid: b.readUInt32LE(24),
  gid: b.readUInt32LE(28),
  pid: b.readUInt32LE(32)
})

/** a reply: the out header, then BODY; error is a negative errno or 0 */
export const reply = (unique: bigint, error: number, body?: Buffer): Buffer => {
  const length = outHeaderLength + (error === 0 && body !== undefined ? body.length : 0)
  const out = Buffer.alloc(length)
  out.writeUInt32LE(length, 0)
  out.writeInt32LE(error, 4)
  out.writeBigUInt64LE(unique, 8)
  if (error === 0 && body !== undefined) body.copy(out, outHeaderLength)
  return out
}

/** the attributes of one node, as the kernel's fuse_attr holds them */
export interface Attr {
  readonly ino: bigint
  readonly size: bigint
  /** S_IFMT bits and the permission bits */
  readonly mode: number
  readonly mtimeNs: bigint
}

const attrLength = 88

const writeAttr = (out: Buffer, at: number, a: Attr): void => {
  const seconds = a.mtimeNs / 1_000_000_000n
  const nanos = Number(a.mtimeNs % 1_000_000_000n)
  out.writeBigUInt64LE(a.ino, at)
  out.writeBigUInt64LE(a.size, at + 8)
  out.writeBigUInt64LE((a.size + 511n) / 512n, at + 16)
  for (const off of [24, 32, 40]) out.writeBigUInt64LE(seconds, at + off)
  for (const off of [48, 52, 56]) out.writeUInt32LE(nanos, at + off)
  out.writeUInt32LE(a.mode, at + 60)
  out.writeUInt32LE((a.mode & S_IFMT) === S_IFDIR ? 2 : 1, at + 64) // nlink
  out.writeUInt32LE(0, at + 68) // uid: the mount's user_id
  out.writeUInt32LE(0, at + 72) // gid
  out.writeUInt32LE(0, at + 76) // rdev
  out.writeUInt32LE(4096, at + 80) // blksize
  out.writeUInt32LE(0, at + 84) // flags
}

/**
 * How long the kernel may keep what an answer told it before it asks again. A name: 1 s (a name
 * the client answered missing is never kept, so what the client makes is seen at once). The
 * attributes: not at all, since the client may change its files at any time and the kernel reads
 * a file only up to the size it holds: every stat, and every open, asks the client.
 */
const entryValidSeconds = 1n
const attrValidSeconds = 0n

/** fuse_entry_out (128 bytes) */
export const entryOut = (nodeid: bigint, attr: Attr): Buffer => {
  const out = Buffer.alloc(40 + attrLength)
  out.writeBigUInt64LE(nodeid, 0)
  out.writeBigUInt64LE(0n, 8) // generation: node ids are never reused
  out.writeBigUInt64LE(entryValidSeconds, 16)
  out.writeBigUInt64LE(attrValidSeconds, 24)
  writeAttr(out, 40, attr)
  return out
}

/** fuse_attr_out (104 bytes) */
export const attrOut = (attr: Attr): Buffer => {
  const out = Buffer.alloc(16 + attrLength)
  out.writeBigUInt64LE(attrValidSeconds, 0)
  writeAttr(out, 16, attr)
  return out
}

/** fuse_open_out: the handle and no open flags (the page cache is dropped at each open) */
export const openOut = (fh: bigint): Buffer => {
  const out = Buffer.alloc(16)
  out.writeBigUInt64LE(fh, 0)
  return out
}

export const writeOut = (size: number): Buffer => {
  const out = Buffer.alloc(8)
  out.writeUInt32LE(size, 0)
  return out
}

/** fuse_statfs_out (80 bytes), of the figures the client answered */
export const statfsOut = (s: Statfs): Buffer => {
  const out = Buffer.alloc(80)
  out.writeBigUInt64LE(s.blocks, 0)
  out.writeBigUInt64LE(s.bfree, 8)
  out.writeBigUInt64LE(s.bavail, 16)
  out.writeBigUInt64LE(s.files, 24)
  out.writeBigUInt64LE(s.ffree, 32)
  out.writeUInt32LE(s.bsize, 40)
  out.writeUInt32LE(s.namelen, 44)
  out.writeUInt32LE(s.bsize, 48) // frsize
  return out
}

/** fuse_init_out (64 bytes) answering the kernel's INIT with 7.31 */
export const initOut = (kernelMaxReadahead: number, kernelFlags: number): Buffer => {
  const wanted =
    InitFlag.ASYNC_READ | InitFlag.BIG_WRITES | InitFlag.AUTO_INVAL_DATA | InitFlag.ASYNC_DIO | InitFlag.PARALLEL_DIROPS | InitFlag.MAX_PAGES
  const out = Buffer.alloc(64)
  out.writeUInt32LE(protocolMajor, 0)
  out.writeUInt32LE(protocolMinor, 4)
  out.writeUInt32LE(kernelMaxReadahead, 8)
  out.writeUInt32LE((kernelFlags & wanted) >>> 0, 12)
  out.writeUInt16LE(64, 16) // max_background: asks the kernel may have in flight
  out.writeUInt16LE(48, 18) // congestion_threshold
  out.writeUInt32LE(maxWrite, 20)
  out.writeUInt32LE(1, 24) // time_gran: nanoseconds
  out.writeUInt16LE(maxPages, 28)
  return out
}

/** one fuse_dirent: [ino u64][off u64][namelen u32][type u32][name], padded to 8 */
export const direntLength = (name: Buffer): number => (24 + name.length + 7) & ~7

export const writeDirent = (out: Buffer, at: number, ino: bigint, nextOffset: bigint, type: number, name: Buffer): number => {
  const length = direntLength(name)
  out.fill(0, at, at + length)
  out.writeBigUInt64LE(ino, at)
  out.writeBigUInt64LE(nextOffset, at + 8)
  out.writeUInt32LE(name.length, at + 16)
  out.writeUInt32LE(type, at + 20)
  name.copy(out, at + 24)
  return length
}

/** the file type of a dirent, from S_IFMT bits (DT_* = mode >> 12) */
export const direntType = (mode: number): number => (mode & S_IFMT) >> 12

/** a NUL-terminated name at AT; the name and where what follows it starts */
export const cString = (b: Buffer, at: number): [string, number] => {
  const end = b.indexOf(0, at)
  const stop = end < 0 ? b.length : end
  return [b.subarray(at, stop).toString("utf8"), stop + 1]
}
