import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { makeDiskFile } from "./Mounts.js"

/**
 * Disks made ahead (docs/containers.md section 12): a container's writable layer is an ext4 file
 * system of exactly `disk` bytes, and making one (`mkfs.ext4`, a process of its own) was about a
 * tenth of a deploy from nothing. An empty file system of a size is the same for every container,
 * so one is made ahead, after a deploy, for each of the `sizes` disk sizes most recently asked for,
 * in ROOT/disks, and the next deploy of that size takes it (renamed into its directory) instead
 * of running mkfs on the request's path. A size pushed out has its disk removed. Disks are made one
 * at a time, and a disk being made is written under a `.making-` name and renamed once complete,
 * so a server that was killed leaves only complete disks (kept for its next start) and partial
 * ones (removed as it starts).
 */
export class DiskPool {
  /** the sizes most recently asked for, the most recent first, with each one's disk once made */
  private readonly ready = new Map<number, string | undefined>()
  private queue: Array<number> = []
  private making: Promise<void> | undefined
  private closed = false

  constructor(
    private readonly dir: string,
    private readonly sizes = 3,
    private readonly log: (line: string) => void = () => {}
  ) {
    Fs.mkdirSync(dir, { recursive: true })
    for (const name of Fs.readdirSync(dir)) {
      const full = Path.join(dir, name)
      const size = /^(\d+)-[0-9a-f]+\.img$/.exec(name)
      if (size === null || this.ready.size >= sizes || this.ready.has(Number(size[1]))) Fs.rmSync(full, { force: true })
      else this.ready.set(Number(size[1]), full)
    }
  }

  /** a disk of BYTES made ahead, for the caller to rename into its place, or undefined */
  take(bytes: number): string | undefined {
    const file = this.ready.get(bytes)
    this.ready.delete(bytes)
    return file !== undefined && Fs.existsSync(file) ? file : undefined
  }

  /** makes a disk of BYTES ahead for the next deploy that asks for it (once the caller's own is made) */
  want(bytes: number): void {
    if (this.closed || this.sizes === 0) return
    const had = this.ready.get(bytes)
    this.ready.delete(bytes)
    this.ready.set(bytes, had)
    // most recent first: a Map keeps insertion order, so the oldest size is the first key
    while (this.ready.size > this.sizes) {
      const [oldest, file] = this.ready.entries().next().value as [number, string | undefined]
      this.ready.delete(oldest)
      if (file !== undefined) Fs.rmSync(file, { force: true })
    }
    if (had === undefined && !this.queue.includes(bytes)) this.queue.push(bytes)
    this.making ??= this.makeQueued()
  }

  private async makeQueued(): Promise<void> {
    for (let bytes = this.queue.shift(); bytes !== undefined && !this.closed; bytes = this.queue.shift()) {
      if (!this.ready.has(bytes) || this.ready.get(bytes) !== undefined) continue
      const name = `${bytes}-${Crypto.randomBytes(6).toString("hex")}.img`
      const making = Path.join(this.dir, `.making-${name}`)
      try {
        await makeDiskFile(making, bytes)
        if (this.closed || !this.ready.has(bytes)) Fs.rmSync(making, { force: true })
        else {
          Fs.renameSync(making, Path.join(this.dir, name))
          this.ready.set(bytes, Path.join(this.dir, name))
        }
      } catch (e) {
        Fs.rmSync(making, { force: true })
        this.log(`ocx2-containers: a disk of ${bytes} bytes could not be made ahead: ${(e as Error).message}`)
      }
    }
    this.making = undefined
  }

  /** stops making disks, once the one being made is complete; the disks made are kept for the next start */
  async close(): Promise<void> {
    this.closed = true
    this.queue = []
    await this.making
  }
}
