import * as Fs from "node:fs"
import * as FsP from "node:fs/promises"
import * as Path from "node:path"
import { Errno, SetMask, type DirEntry, type KindName, type SetAttr, type Stat, type Statfs } from "./Ask.js"
import { FuseErrno, type FuseHandler } from "./Handler.js"

/**
 * Handlers that serve a file or a directory of the client's host to a container's FUSE mount
 * (what `ocx2 containers run --fuse-file/--fuse-directory` uses): the container's reads and
 * writes reach the host's file. A path never leaves what is served: every component is checked
 * (none empty, `.` or `..`), the parent of what an op touches must resolve inside the served
 * directory, and the last component is never followed when it is a symbolic link (the container
 * follows links itself, inside its own tree, through readlink).
 */
const kindOf = (s: Fs.Stats | Fs.BigIntStats): KindName | undefined =>
  s.isDirectory() ? "directory" : s.isSymbolicLink() ? "symlink" : s.isFile() ? "file" : undefined

const statOf = async (full: string): Promise<Stat> => {
  const s = await FsP.lstat(full, { bigint: true })
  const kind = kindOf(s)
  if (kind === undefined) throw new FuseErrno(Errno.EACCES)
  return { kind, mode: Number(s.mode & 0o7777n), size: kind === "directory" ? 0n : s.size, mtimeNs: s.mtimeNs }
}

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = Fs.constants

const withFile = async <T>(full: string, flags: number, use: (f: FsP.FileHandle) => Promise<T>, mode?: number): Promise<T> => {
  const f = await FsP.open(full, flags | O_NOFOLLOW, mode)
  try {
    return await use(f)
  } finally {
    await f.close()
  }
}

const readAt = (full: string, offset: bigint, size: number) =>
  withFile(full, O_RDONLY, async (f) => {
    const buffer = Buffer.alloc(size)
    let got = 0
    while (got < size) {
      const { bytesRead } = await f.read(buffer, got, size - got, Number(offset) + got)
      if (bytesRead === 0) break
      got += bytesRead
    }
    return buffer.subarray(0, got)
  })

const writeAt = (full: string, offset: bigint, data: Buffer) =>
  withFile(full, O_WRONLY, async (f) => {
    let put = 0
    while (put < data.length) put += (await f.write(data, put, data.length - put, Number(offset) + put)).bytesWritten
    return put
  })

const setAttr = async (full: string, set: SetAttr): Promise<Stat> => {
  // the client keeps its own ownership: a container does not hand its files to another user
  if (set.mask & (SetMask.uid | SetMask.gid)) throw new FuseErrno(Errno.EPERM)
  if (set.mask & SetMask.mode) await FsP.chmod(full, set.mode)
  if (set.mask & SetMask.size) await withFile(full, O_WRONLY, (f) => f.truncate(Number(set.size)))
  if (set.mask & (SetMask.atime | SetMask.mtime)) {
    const now = await FsP.lstat(full, { bigint: true })
    const seconds = (ns: bigint) => Number(ns) / 1e9
    await FsP.lutimes(full, seconds(set.mask & SetMask.atime ? set.atimeNs : now.atimeNs), seconds(set.mask & SetMask.mtime ? set.mtimeNs : now.mtimeNs))
  }
  return statOf(full)
}

const statfsOf = async (full: string): Promise<Statfs> => {
  const s = await FsP.statfs(full, { bigint: true })
  return { blocks: s.blocks, bfree: s.bfree, bavail: s.bavail, files: s.files, ffree: s.ffree, bsize: Number(s.bsize), namelen: 255 }
}

/** the handler of the host directory ROOT: every op, inside it */
export const hostDirectoryHandler = (root: string): FuseHandler => {
  const realRoot = Fs.realpathSync(root)
  if (!Fs.statSync(realRoot).isDirectory()) throw new Error(`${root} is not a directory`)
  /** the host path of PATH; its parent resolves inside the root */
  const resolve = async (path: string): Promise<string> => {
    if (path === "") return realRoot
    const parts = path.split("/")
    if (parts.some((p) => p === "" || p === "." || p === "..")) throw new FuseErrno(Errno.EINVAL)
    const parent = await FsP.realpath(Path.join(realRoot, ...parts.slice(0, -1)))
    if (parent !== realRoot && !parent.startsWith(realRoot + Path.sep)) throw new FuseErrno(Errno.EACCES)
    return Path.join(parent, parts[parts.length - 1]!)
  }
  return {
    stat: async (path) => statOf(await resolve(path)),
    list: async (path) => {
      const entries = await FsP.readdir(await resolve(path), { withFileTypes: true })
      const out: Array<DirEntry> = []
      for (const e of entries) {
        const kind = e.isDirectory() ? "directory" : e.isSymbolicLink() ? "symlink" : e.isFile() ? "file" : undefined
        if (kind !== undefined) out.push({ name: e.name, kind })
      }
      return out
    },
    read: async (path, offset, size) => readAt(await resolve(path), offset, size),
    write: async (path, offset, data) => writeAt(await resolve(path), offset, data),
    create: async (path, mode) => {
      const full = await resolve(path)
      await withFile(full, O_WRONLY | O_CREAT | O_EXCL, async () => {}, mode)
      return statOf(full)
    },
    mkdir: async (path, mode) => {
      const full = await resolve(path)
      await FsP.mkdir(full, { mode })
      return statOf(full)
    },
    unlink: async (path) => FsP.unlink(await resolve(path)),
    rmdir: async (path) => {
      if (path === "") throw new FuseErrno(Errno.EBUSY)
      await FsP.rmdir(await resolve(path))
    },
    rename: async (path, to, flags) => {
      const [from, target] = [await resolve(path), await resolve(to)]
      // Node has no renameat2: RENAME_EXCHANGE is not offered, RENAME_NOREPLACE checked first
      if (flags & ~1) throw new FuseErrno(Errno.EINVAL)
      if (flags & 1 && (await FsP.lstat(target).then(() => true, () => false))) throw new FuseErrno(Errno.EEXIST)
      await FsP.rename(from, target)
    },
    setattr: async (path, set) => setAttr(await resolve(path), set),
    fsync: async (path, datasync) => {
      const full = await resolve(path)
      if ((await FsP.lstat(full)).isDirectory()) return
      await withFile(full, O_RDONLY, (f) => (datasync ? f.datasync() : f.sync()))
    },
    statfs: async (path) => statfsOf(await resolve(path)),
    readlink: async (path) => FsP.readlink(await resolve(path), { encoding: "buffer" })
  }
}

/** the handler of the host file FILE, served as a file mount's root (the path "") */
export const hostFileHandler = (file: string): FuseHandler => {
  const real = Fs.realpathSync(file)
  if (!Fs.statSync(real).isFile()) throw new Error(`${file} is not a file`)
  const only = (path: string): string => {
    if (path !== "") throw new FuseErrno(Errno.ENOENT)
    return real
  }
  return {
    stat: async (path) => statOf(only(path)),
    read: async (path, offset, size) => readAt(only(path), offset, size),
    write: async (path, offset, data) => writeAt(only(path), offset, data),
    setattr: async (path, set) => setAttr(only(path), set),
    fsync: async (path, datasync) => withFile(only(path), O_RDONLY, (f) => (datasync ? f.datasync() : f.sync())),
    statfs: async (path) => statfsOf(only(path))
  }
}
