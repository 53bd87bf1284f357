import * as Fs from "node:fs"
import * as Path from "node:path"
import { decodeLaunch, encodeLaunch, type Launch } from "../proxy/Launch.js"

/**
 * The spares (docs/containers.md section 12): containers stood up ahead, their proxy listening
 * and no program started, one for each of the shapes most recently deployed, so that a request of
 * a cached image finds its container made. A shape is what a standing container cannot change:
 * the identity it is for, the image (its digest, its unpacked rootfs and the launch made of its
 * config) and the disk. The memory limit is not part of it: the taker sets it (a cgroup's limit
 * may be written at any time), and a shape remembers the last memory asked, which its next spare
 * stands with.
 *
 * At most `max` shapes are remembered, the most recent first, and each has at most one spare; a
 * shape pushed out has its spare stopped. Spares are stood up one at a time (each is a disk, an
 * overlay and a sandbox made: two at once on a small machine only slow each other and the runs). The shapes
 * are written to `file` (under the server's ROOT), so that a server started again stands their
 * spares up before any request comes.
 */
export interface SpareShape {
  readonly identity: string
  readonly digest: string
  /** bytes */
  readonly disk: number
  /** the memory last asked for this shape: what its next spare stands with */
  readonly memory: number
  readonly rootfs: string
  readonly launch: Launch
}

/** what a spare must offer the pool */
export interface Spare {
  /** its sandbox and relay still running */
  readonly alive: () => boolean
  readonly stop: () => Promise<void>
}

/** two shapes one spare serves: everything but the memory equal */
export const shapeKey = (s: SpareShape): string => JSON.stringify([s.identity, s.digest, s.disk, s.rootfs, encodeLaunch(s.launch)])

const isCount = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) > 0

/** the shapes a file holds; what does not read as a shape is left out (a spare is only ever an optimisation) */
export const readShapes = (file: string): ReadonlyArray<SpareShape> => {
  let v: unknown
  try {
    v = JSON.parse(Fs.readFileSync(file, "utf8"))
  } catch {
    return []
  }
  if (!Array.isArray(v)) return []
  const shapes: Array<SpareShape> = []
  for (const e of v as Array<Record<string, unknown> | null>) {
    if (typeof e !== "object" || e === null) continue
    const { identity, digest, disk, memory, rootfs } = e
    const launch = decodeLaunch(JSON.stringify(e.launch ?? null))
    if (typeof launch === "string" || typeof identity !== "string" || typeof digest !== "string" || !/^sha256:[0-9a-f]{64}$/.test(digest)) continue
    if (!isCount(disk) || !isCount(memory) || typeof rootfs !== "string" || !Path.isAbsolute(rootfs)) continue
    shapes.push({ identity, digest, disk, memory, rootfs, launch })
  }
  return shapes
}

const writeShapes = (file: string, shapes: ReadonlyArray<SpareShape>): void => {
  try {
    Fs.writeFileSync(file + ".partial", JSON.stringify(shapes), { mode: 0o600 })
    Fs.renameSync(file + ".partial", file)
  } catch {
    // not written: a server started again stands fewer spares up, nothing else
  }
}

interface Entry<S> {
  /** queued: not begun yet (a take does not wait for it); standing: being stood up, or stood */
  state: "queued" | "standing"
  readonly ready: Promise<S | undefined>
}

export interface SparePoolOptions<S extends Spare> {
  /** the most shapes kept, each with one spare; 0: none */
  readonly max: number
  /** where the shapes are written; undefined: nowhere */
  readonly file: string | undefined
  readonly standUp: (shape: SpareShape) => Promise<S>
  /** told each spare that stood up */
  readonly onReady?: (shape: SpareShape) => void
}

export class SparePool<S extends Spare> {
  private shapes: Array<SpareShape> = []
  private readonly entries = new Map<string, Entry<S>>()
  private queue: Promise<unknown> = Promise.resolve()
  /** every spare stood up and not yet taken or stopped, for the close */
  private readonly pending = new Set<Promise<S | undefined>>()
  private closed = false

  constructor(private readonly options: SparePoolOptions<S>) {}

  /** the shapes remembered, the most recent first */
  recent(): ReadonlyArray<SpareShape> {
    return this.shapes
  }

  /** the shapes a server wrote before it stopped: their spares stood up again, the most recent first */
  restore(shapes: ReadonlyArray<SpareShape>): void {
    for (const shape of shapes) {
      if (this.shapes.length >= this.options.max) break
      if (this.shapes.some((s) => shapeKey(s) === shapeKey(shape))) continue
      this.shapes.push(shape)
      this.ensure(shape, true)
    }
  }

  /**
   * The spare of this shape, taken out of the pool: one being stood up is waited for (it is ready
   * no later than a new one would be), one queued behind others is not (it is not begun). A spare
   * no longer alive is stopped. The caller owns what it gets: it stops it should it not fit after
   * all (its memory could not be set).
   */
  async take(shape: SpareShape): Promise<S | undefined> {
    const key = shapeKey(shape)
    const entry = this.entries.get(key)
    if (entry === undefined) return undefined
    this.entries.delete(key)
    this.pending.delete(entry.ready)
    if (entry.state === "queued") return undefined
    const spare = await entry.ready
    if (spare === undefined) return undefined
    if (!spare.alive()) {
      await spare.stop()
      return undefined
    }
    return spare
  }

  /**
   * A container of this shape was deployed (and its proxy reached): the shape becomes the most
   * recent, with the memory it asked, and gets its spare; a shape pushed past `max` loses its own.
   */
  used(shape: SpareShape): void {
    if (this.closed || this.options.max <= 0) return
    const key = shapeKey(shape)
    const before = JSON.stringify(this.shapes)
    this.shapes = [shape, ...this.shapes.filter((s) => shapeKey(s) !== key)]
    for (const gone of this.shapes.splice(this.options.max)) void this.drop(shapeKey(gone))
    if (this.options.file !== undefined && JSON.stringify(this.shapes) !== before) writeShapes(this.options.file, this.shapes)
    this.ensure(shape, false)
  }

  /** stops every spare, those being stood up once they stood; no spare is stood up after */
  async close(): Promise<void> {
    this.closed = true
    this.entries.clear()
    await Promise.all([...this.pending].map(async (ready) => (await ready)?.stop()))
    this.pending.clear()
  }

  private async drop(key: string): Promise<void> {
    const entry = this.entries.get(key)
    if (entry === undefined) return
    this.entries.delete(key)
    this.pending.delete(entry.ready)
    await (await entry.ready)?.stop()
  }

  private ensure(shape: SpareShape, restoring: boolean): void {
    const key = shapeKey(shape)
    if (this.closed || this.entries.has(key)) return
    const entry: Entry<S> = {
      state: "queued",
      ready: this.queue.then(async () => {
        // taken, dropped or closed before its turn: not stood up at all
        if (this.closed || this.entries.get(key) !== entry) return undefined
        entry.state = "standing"
        try {
          const spare = await this.options.standUp(this.shapeOf(key) ?? shape)
          this.options.onReady?.(shape)
          return spare
        } catch {
          // the request deploys from nothing instead, and says why should it fail too
          if (restoring) this.forget(key)
          return undefined
        }
      })
    }
    this.entries.set(key, entry)
    this.pending.add(entry.ready)
    this.queue = entry.ready
  }

  private shapeOf(key: string): SpareShape | undefined {
    return this.shapes.find((s) => shapeKey(s) === key)
  }

  /** a remembered shape whose spare could not be stood up again (its image gone from the store): forgotten */
  private forget(key: string): void {
    this.shapes = this.shapes.filter((s) => shapeKey(s) !== key)
    if (this.options.file !== undefined) writeShapes(this.options.file, this.shapes)
  }
}

/** where a server keeps the shapes whose spares it stands up again when it starts */
export const shapesFile = (root: string): string => Path.join(root, "spares.json")
