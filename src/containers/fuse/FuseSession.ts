import {
  decodeList,
  decodeStat,
  decodeStatfs,
  decodeWritten,
  Errno,
  SetMask,
  type Answer,
  type Ask,
  type DirEntry,
  type KindName,
  type Stat
} from "./Ask.js"
import { childPath, Inodes, rootId, type Node } from "./Inodes.js"
import {
  attrOut,
  cString,
  direntLength,
  direntType,
  entryOut,
  Fattr,
  inHeaderLength,
  initOut,
  Op,
  openOut,
  protocolMajor,
  readInHeader,
  reply,
  S_IFDIR,
  S_IFLNK,
  S_IFREG,
  statfsOut,
  writeDirent,
  writeOut,
  type Attr,
  type InHeader
} from "./Kernel.js"

/**
 * One mount's side of the kernel's FUSE protocol: each request read from /dev/fuse is answered
 * here, by itself when the kernel only asks about the mount's own bookkeeping (INIT, OPEN,
 * RELEASE, FLUSH, FORGET, a directory listing already asked for), and otherwise by one ask
 * relayed to the client, whose answer becomes the reply as it is: its data, or its errno.
 * Requests are served concurrently; the replies go out in whatever order the answers come.
 */
export interface SessionIo {
  /** one ask to the client; resolves with its answer (a failure is answered EIO) */
  readonly ask: (ask: Ask) => Promise<Answer>
  /** writes one reply to /dev/fuse */
  readonly write: (reply: Buffer) => void
  /** the kernel sent DESTROY */
  readonly destroyed: () => void
}

const kindMode = (kind: KindName): number => (kind === "directory" ? S_IFDIR : kind === "symlink" ? S_IFLNK : S_IFREG)

const attrOf = (id: bigint, s: Stat): Attr => ({ ino: id, size: s.size, mode: kindMode(s.kind) | (s.mode & 0o7777), mtimeNs: s.mtimeNs })

/** ops whose asks change nothing: an interrupted one is answered EINTR at once */
const readOnly = new Set<Ask["op"]>(["stat", "list", "read", "statfs", "readlink"])

/** a request being answered: the op of the ask it made, once it made one */
interface Pending {
  op: Ask["op"] | undefined
}

class Failure {
  constructor(readonly errno: number) {}
}

export class Session {
  readonly inodes = new Inodes()
  /** requests read and not yet answered, by unique */
  private readonly pending = new Map<bigint, Pending>()
  private readonly dirs = new Map<bigint, Array<DirEntry> | undefined>()
  private nextHandle = 1n

  constructor(private readonly io: SessionIo) {}

  /** how many requests are being answered */
  get inFlight(): number {
    return this.pending.size
  }

  /** one request as read from /dev/fuse */
  receive(request: Buffer): void {
    if (request.length < inHeaderLength) return
    const h = readInHeader(request)
    const body = request.subarray(inHeaderLength, h.length)
    switch (h.opcode) {
      case Op.FORGET:
        return this.inodes.forget(h.nodeid, body.readBigUInt64LE(0))
      case Op.BATCH_FORGET: {
        const count = body.readUInt32LE(0)
        for (let i = 0; i < count; i++) this.inodes.forget(body.readBigUInt64LE(8 + i * 16), body.readBigUInt64LE(16 + i * 16))
        return
      }
      case Op.INTERRUPT:
        return this.interrupt(body.readBigUInt64LE(0))
    }
    const entry: Pending = { op: undefined }
    this.pending.set(h.unique, entry)
    void this.serve(h, body, entry).then(
      (out) => this.answer(h.unique, 0, out),
      (e: unknown) => this.answer(h.unique, -(e instanceof Failure ? e.errno : Errno.EIO))
    )
  }

  private answer(unique: bigint, error: number, body?: Buffer): void {
    const entry = this.pending.get(unique)
    if (entry === undefined) return
    this.pending.delete(unique)
    this.io.write(reply(unique, error, body))
  }

  /** the kernel gave up waiting for UNIQUE: an ask that changes nothing is answered EINTR now */
  private interrupt(unique: bigint): void {
    const entry = this.pending.get(unique)
    if (entry === undefined) return
    if (entry.op !== undefined && readOnly.has(entry.op)) this.answer(unique, -Errno.EINTR)
  }

  private async ask(entry: Pending, ask: Ask): Promise<Buffer> {
    entry.op = ask.op
    const answer = await this.io.ask(ask)
    if (!answer.ok) throw new Failure(answer.errno)
    return answer.data
  }

  private node(id: bigint): Node {
    const node = this.inodes.get(id)
    if (node === undefined || node.detached) throw new Failure(Errno.ENOENT)
    return node
  }

  private decoded<T>(decode: () => T): T {
    try {
      return decode()
    } catch {
      throw new Failure(Errno.EIO)
    }
  }

  /** an answered stat as the kernel's entry: the node looked up once more */
  private entry(path: string, data: Buffer): Buffer {
    const stat = this.decoded(() => decodeStat(data))
    const node = this.inodes.lookedUp(path)
    return entryOut(node.id, attrOf(node.id, stat))
  }

  private async serve(h: InHeader, body: Buffer, p: Pending): Promise<Buffer | undefined> {
    switch (h.opcode) {
      case Op.INIT: {
        const major = body.readUInt32LE(0)
        if (major > protocolMajor) {
          // the kernel offers a newer major: it asks again with ours
          const out = Buffer.alloc(8)
          out.writeUInt32LE(protocolMajor, 0)
          return out
        }
        return initOut(body.readUInt32LE(8), body.readUInt32LE(12))
      }
      case Op.DESTROY:
        this.io.destroyed()
        return undefined
      case Op.LOOKUP: {
        const path = childPath(this.node(h.nodeid).path, cString(body, 0)[0])
        return this.entry(path, await this.ask(p, { op: "stat", path }))
      }
      case Op.GETATTR: {
        const node = this.node(h.nodeid)
        const data = await this.ask(p, { op: "stat", path: node.path })
        return attrOut(attrOf(node.id, this.decoded(() => decodeStat(data))))
      }
      case Op.SETATTR: {
        const node = this.node(h.nodeid)
        const valid = body.readUInt32LE(0)
        const nowNs = BigInt(Date.now()) * 1_000_000n
        const timeNs = (seconds: bigint, nanos: number) => seconds * 1_000_000_000n + BigInt(nanos)
        let mask = 0
        if (valid & Fattr.MODE) mask |= SetMask.mode
        if (valid & Fattr.SIZE) mask |= SetMask.size
        if (valid & (Fattr.ATIME | Fattr.ATIME_NOW)) mask |= SetMask.atime
        if (valid & (Fattr.MTIME | Fattr.MTIME_NOW)) mask |= SetMask.mtime
        if (valid & Fattr.UID) mask |= SetMask.uid
        if (valid & Fattr.GID) mask |= SetMask.gid
        const set = {
          mask,
          mode: body.readUInt32LE(68) & 0o7777,
          uid: body.readUInt32LE(76),
          gid: body.readUInt32LE(80),
          size: body.readBigUInt64LE(16),
          atimeNs: valid & Fattr.ATIME_NOW ? nowNs : timeNs(body.readBigUInt64LE(32), body.readUInt32LE(56)),
          mtimeNs: valid & Fattr.MTIME_NOW ? nowNs : timeNs(body.readBigUInt64LE(40), body.readUInt32LE(60))
        }
        if (mask === 0) {
          // nothing the client keeps changes (a lock owner, a handle): the attributes as they are
          const data = await this.ask(p, { op: "stat", path: node.path })
          return attrOut(attrOf(node.id, this.decoded(() => decodeStat(data))))
        }
        const data = await this.ask(p, { op: "setattr", path: node.path, set })
        return attrOut(attrOf(node.id, this.decoded(() => decodeStat(data))))
      }
      case Op.READLINK:
        return this.ask(p, { op: "readlink", path: this.node(h.nodeid).path })
      case Op.MKDIR: {
        const mode = body.readUInt32LE(0) & ~body.readUInt32LE(4) & 0o7777
        const path = childPath(this.node(h.nodeid).path, cString(body, 8)[0])
        return this.entry(path, await this.ask(p, { op: "mkdir", path, mode }))
      }
      case Op.CREATE: {
        const mode = body.readUInt32LE(4) & ~body.readUInt32LE(8) & 0o7777
        const path = childPath(this.node(h.nodeid).path, cString(body, 16)[0])
        const entry = this.entry(path, await this.ask(p, { op: "create", path, mode }))
        return Buffer.concat([entry, openOut(this.nextHandle++)])
      }
      case Op.UNLINK:
      case Op.RMDIR: {
        const path = childPath(this.node(h.nodeid).path, cString(body, 0)[0])
        await this.ask(p, { op: h.opcode === Op.UNLINK ? "unlink" : "rmdir", path })
        this.inodes.detach(path)
        return undefined
      }
      case Op.RENAME:
      case Op.RENAME2: {
        const newDir = this.node(body.readBigUInt64LE(0))
        const flags = h.opcode === Op.RENAME2 ? body.readUInt32LE(8) : 0
        const [from, next] = cString(body, h.opcode === Op.RENAME2 ? 16 : 8)
        const fromPath = childPath(this.node(h.nodeid).path, from)
        const toPath = childPath(newDir.path, cString(body, next)[0])
        await this.ask(p, { op: "rename", path: fromPath, to: toPath, flags })
        if (flags & 2) this.inodes.exchange(fromPath, toPath)
        else this.inodes.move(fromPath, toPath)
        return undefined
      }
      case Op.OPEN:
        this.node(h.nodeid)
        return openOut(this.nextHandle++)
      case Op.OPENDIR: {
        this.node(h.nodeid)
        const fh = this.nextHandle++
        this.dirs.set(fh, undefined)
        return openOut(fh)
      }
      case Op.READ: {
        const node = this.node(h.nodeid)
        return this.ask(p, { op: "read", path: node.path, offset: body.readBigUInt64LE(8), size: body.readUInt32LE(16) })
      }
      case Op.WRITE: {
        const node = this.node(h.nodeid)
        const size = body.readUInt32LE(16)
        const data = body.subarray(40, 40 + size)
        const answer = await this.ask(p, { op: "write", path: node.path, offset: body.readBigUInt64LE(8), data })
        return writeOut(this.decoded(() => decodeWritten(answer)))
      }
      case Op.READDIR:
        return this.readdir(h, body, p)
      case Op.RELEASE:
        return undefined
      case Op.RELEASEDIR:
        this.dirs.delete(body.readBigUInt64LE(0))
        return undefined
      case Op.FLUSH:
        // nothing is kept here to flush: every write was the client's before it was answered
        return undefined
      case Op.FSYNC:
        await this.ask(p, { op: "fsync", path: this.node(h.nodeid).path, datasync: (body.readUInt32LE(8) & 1) === 1 })
        return undefined
      case Op.FSYNCDIR:
        return undefined
      case Op.STATFS: {
        const data = await this.ask(p, { op: "statfs", path: this.node(h.nodeid === 0n ? rootId : h.nodeid).path })
        return statfsOut(this.decoded(() => decodeStatfs(data)))
      }
      default:
        // ACCESS among them: the kernel then checks the permission bits itself (default_permissions)
        throw new Failure(Errno.ENOSYS)
    }
  }

  /** a directory's entries, asked for once per opening (at offset 0) and handed out from there */
  private async readdir(h: InHeader, body: Buffer, p: Pending): Promise<Buffer> {
    const node = this.node(h.nodeid)
    const fh = body.readBigUInt64LE(0)
    const offset = Number(body.readBigUInt64LE(8))
    const size = body.readUInt32LE(16)
    let entries = this.dirs.get(fh)
    if (entries === undefined || offset === 0) {
      const data = await this.ask(p, { op: "list", path: node.path })
      const listed = this.decoded(() => decodeList(data))
      entries = [{ name: ".", kind: "directory" }, { name: "..", kind: "directory" }, ...listed.filter((e) => e.name !== "." && e.name !== "..")]
      this.dirs.set(fh, entries)
    }
    const out = Buffer.alloc(size)
    let at = 0
    for (let i = offset; i < entries.length; i++) {
      const e = entries[i]!
      const name = Buffer.from(e.name, "utf8")
      if (at + direntLength(name) > size) break
      // an entry's ino is not the node id (only a LOOKUP makes one): the kernel asks for it then
      at += writeDirent(out, at, BigInt(i + 1), BigInt(i + 1), direntType(kindMode(e.kind)), name)
    }
    return out.subarray(0, at)
  }
}
