import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Stream from "node:stream"
import * as Zlib from "node:zlib"
import type { LayerCompression } from "./OciImage.js"
import { tarEntries, TarError, type TarEntry } from "./TarReader.js"

/**
 * Applies an image's layers, in order, to an empty directory (docs/containers.md section 7):
 * each layer's uncompressed stream hashed against its diff_id, every entry checked before it is
 * written, whiteouts applied against the layers below. Nothing is ever written through a
 * symlink: every directory on an entry's way is looked at (lstat) and must be a real directory
 * of this tree, and files are created with O_NOFOLLOW after what stood there is removed.
 */
export interface LayerFile {
  /** the layer's (compressed) bytes, already verified against its descriptor */
  readonly file: string
  readonly digest: string
  readonly compression: LayerCompression
  readonly diffId: string
}

export class UnpackError extends Error {}

/** an entry's path as components under the rootfs; an absolute path or `..` is refused */
const components = (raw: string, what: string): Array<string> => {
  let p = raw
  while (p.startsWith("./")) p = p.slice(2)
  if (p.startsWith("/")) throw new UnpackError(`${what} ${JSON.stringify(raw)} is an absolute path`)
  const parts = p.split("/").filter((c) => c !== "" && c !== ".")
  if (parts.includes("..")) throw new UnpackError(`${what} ${JSON.stringify(raw)} climbs out with ..`)
  return parts
}

const whiteoutPrefix = ".wh."
const opaque = ".wh..wh..opq"
/** modes: no set-user-id or set-group-id bit survives into the rootfs */
const safeMode = (mode: number) => mode & 0o1777

class Tree {
  /** relative paths known to be real directories of this tree */
  private readonly dirs = new Set<string>([""])
  /** directory modes, applied once every layer is in (a read-only directory must still be filled) */
  readonly dirModes = new Map<string, number>()
  /** what the layer being applied created: a whiteout of it in the same layer does not remove it */
  created = new Set<string>()

  constructor(readonly root: string) {}

  full(rel: string): string {
    return rel === "" ? this.root : Path.join(this.root, rel)
  }

  private markCreated(rel: string): void {
    for (let p = rel; p !== "" && !this.created.has(p); p = Path.posix.dirname(p) === "." ? "" : Path.posix.dirname(p)) this.created.add(p)
  }

  /** the directory REL as a real directory, made when missing; never through a symlink */
  directory(parts: ReadonlyArray<string>, raw: string): string {
    let rel = ""
    for (const part of parts) {
      rel = rel === "" ? part : `${rel}/${part}`
      if (this.dirs.has(rel)) continue
      let stat: Fs.Stats | undefined
      try {
        stat = Fs.lstatSync(this.full(rel))
      } catch {
        stat = undefined
      }
      if (stat === undefined) {
        Fs.mkdirSync(this.full(rel), { mode: 0o755 })
        // a directory the layer implies without an entry of its own: 0755 whatever the umask
        this.dirModes.set(rel, 0o755)
        this.markCreated(rel)
      } else if (stat.isSymbolicLink()) {
        throw new UnpackError(`the entry ${JSON.stringify(raw)} goes through the symlink ${JSON.stringify(rel)}`)
      } else if (!stat.isDirectory()) {
        throw new UnpackError(`the entry ${JSON.stringify(raw)} goes through ${JSON.stringify(rel)}, which is not a directory`)
      }
      this.dirs.add(rel)
    }
    return rel
  }

  remove(rel: string): void {
    Fs.rmSync(this.full(rel), { recursive: true, force: true })
    for (const d of this.dirs) if (d === rel || d.startsWith(rel + "/")) this.dirs.delete(d)
    for (const d of this.dirModes.keys()) if (d === rel || d.startsWith(rel + "/")) this.dirModes.delete(d)
  }

  async apply(entry: TarEntry, body: AsyncIterable<Buffer>): Promise<void> {
    const parts = components(entry.path, "the entry")
    if (parts.length === 0) return // the layer's root itself
    const name = parts[parts.length - 1]!
    const parent = this.directory(parts.slice(0, -1), entry.path)
    const child = (n: string) => (parent === "" ? n : `${parent}/${n}`)

    if (name === opaque) {
      // the directory hides what the layers below put in it: all but what this layer made goes
      for (const existing of Fs.readdirSync(this.full(parent))) if (!this.created.has(child(existing))) this.remove(child(existing))
      return
    }
    if (name.startsWith(whiteoutPrefix)) {
      const hidden = name.slice(whiteoutPrefix.length)
      // other .wh..wh. names are a layer tool's own bookkeeping, not whiteouts
      if (hidden.startsWith(whiteoutPrefix)) return
      if (hidden === "" || hidden === "." || hidden === "..") throw new UnpackError(`the whiteout ${JSON.stringify(entry.path)} names no entry`)
      if (!this.created.has(child(hidden))) this.remove(child(hidden))
      return
    }

    const rel = child(name)
    const full = this.full(rel)
    let existing: Fs.Stats | undefined
    try {
      existing = Fs.lstatSync(full)
    } catch {
      existing = undefined
    }
    if (existing !== undefined && !(entry.type === "directory" && existing.isDirectory())) this.remove(rel)
    switch (entry.type) {
      case "directory":
        if (existing === undefined || !existing.isDirectory()) Fs.mkdirSync(full, { mode: 0o755 })
        this.dirs.add(rel)
        this.dirModes.set(rel, safeMode(entry.mode))
        break
      case "file": {
        const fd = Fs.openSync(full, Fs.constants.O_WRONLY | Fs.constants.O_CREAT | Fs.constants.O_EXCL | Fs.constants.O_NOFOLLOW, 0o600)
        try {
          for await (const piece of body) {
            for (let at = 0; at < piece.length; ) at += Fs.writeSync(fd, piece, at)
          }
          Fs.fchmodSync(fd, safeMode(entry.mode))
          Fs.futimesSync(fd, entry.mtime, entry.mtime)
        } finally {
          Fs.closeSync(fd)
        }
        break
      }
      case "symlink":
        // its target is the container's business: nothing here ever follows it
        Fs.symlinkSync(entry.linkname, full)
        break
      case "link": {
        const targetParts = components(entry.linkname, `the hard link ${JSON.stringify(entry.path)} to`)
        if (targetParts.length === 0) throw new UnpackError(`the hard link ${JSON.stringify(entry.path)} names the rootfs itself`)
        const targetParent = this.directory(targetParts.slice(0, -1), entry.linkname)
        const target = this.full(targetParent === "" ? targetParts[targetParts.length - 1]! : `${targetParent}/${targetParts[targetParts.length - 1]!}`)
        let stat: Fs.Stats
        try {
          stat = Fs.lstatSync(target)
        } catch {
          throw new UnpackError(`the hard link ${JSON.stringify(entry.path)} names ${JSON.stringify(entry.linkname)}, which is not in the rootfs`)
        }
        if (stat.isDirectory()) throw new UnpackError(`the hard link ${JSON.stringify(entry.path)} names a directory`)
        // link(2) does not follow a symlink it names: the link is to the symlink itself
        Fs.linkSync(target, full)
        break
      }
      default:
        // devices and FIFOs are not unpacked: the container gets its own /dev
        return
    }
    this.markCreated(rel)
  }
}

/** the layer's uncompressed stream */
const uncompressed = (layer: LayerFile): Stream.Readable => {
  const file = Fs.createReadStream(layer.file, { highWaterMark: 256 * 1024 })
  if (layer.compression === "none") return file
  return Stream.pipeline(file, Zlib.createGunzip(), () => {})
}

/** applies LAYERS, in order, to the empty directory TARGET; throws an UnpackError naming the layer and why */
export const unpackLayers = async (target: string, layers: ReadonlyArray<LayerFile>): Promise<void> => {
  const tree = new Tree(target)
  for (const [i, layer] of layers.entries()) {
    const name = `the layer ${layer.digest} (${i + 1} of ${layers.length})`
    tree.created = new Set()
    const hash = Crypto.createHash("sha256")
    const stream = uncompressed(layer)
    async function* hashed() {
      for await (const piece of stream) {
        hash.update(piece as Buffer)
        yield piece as Buffer
      }
    }
    try {
      for await (const { entry, body } of tarEntries(hashed())) await tree.apply(entry, body)
    } catch (e) {
      if (e instanceof UnpackError) throw new UnpackError(`${name} is refused: ${e.message}`)
      if (e instanceof TarError) throw new UnpackError(`${name} is not a tar archive this server reads: ${e.message}`)
      const code = (e as { code?: string }).code
      if (typeof code === "string" && code.startsWith("Z_")) throw new UnpackError(`${name} does not decompress: ${(e as Error).message}`)
      throw new UnpackError(`${name} could not be unpacked: ${e instanceof Error ? e.message : String(e)}`)
    } finally {
      stream.destroy()
    }
    const diffId = "sha256:" + hash.digest("hex")
    if (diffId !== layer.diffId) {
      throw new UnpackError(`${name} is not the image's: its uncompressed bytes hash to ${diffId} where the config's diff_id says ${layer.diffId}`)
    }
  }
  // deepest first, so a directory made read-only has been filled; the root as an image expects it
  for (const [rel, mode] of [...tree.dirModes].sort((a, b) => b[0].length - a[0].length)) Fs.chmodSync(tree.full(rel), mode)
  if (!tree.dirModes.has("")) Fs.chmodSync(target, 0o755)
}
