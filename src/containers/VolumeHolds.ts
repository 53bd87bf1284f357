import type { Capabilities } from "./Capabilities.js"
import type { VolumeMode } from "./ContainerNames.js"

/**
 * Who holds which volume, in the server's memory (docs/containers.md section 6): runs (shared),
 * FUSE serves, and the six operations in flight (busy). Every decision and every hold it takes
 * happens in one synchronous step, so no other request sees half of it.
 */
interface Held {
  runs: number
  fuseServes: number
  busy: number
}

export type VolumeRefusal =
  | { readonly byte: 1 | 2 | 3 | 4; readonly name: string }
  | { readonly byte: 5; readonly name: string; readonly mode: VolumeMode }

export interface RunHold {
  /** gives back every hold the run took; a second call does nothing */
  readonly release: () => void
}

export class VolumeHolds {
  private readonly held = new Map<string, Held>()

  constructor(private readonly capabilities: Capabilities) {}

  private entry(identity: string, name: string): Held {
    const key = `${identity}\0${name}`
    let h = this.held.get(key)
    if (h === undefined) {
      h = { runs: 0, fuseServes: 0, busy: 0 }
      this.held.set(key, h)
    }
    return h
  }

  private tidy(identity: string, name: string): void {
    const key = `${identity}\0${name}`
    const h = this.held.get(key)
    if (h !== undefined && h.runs === 0 && h.fuseServes === 0 && h.busy === 0) this.held.delete(key)
  }

  /**
   * The per-volume decisions of a run, in first-named order, the first rule deciding; holds
   * every volume (shared) when none refuses, and nothing when one does.
   */
  holdForRun(
    identity: string,
    mounts: ReadonlyArray<{ readonly volumeName: string; readonly mode: VolumeMode }>,
    modeOf: (name: string) => VolumeMode
  ): VolumeRefusal | RunHold {
    const names: Array<string> = []
    for (const m of mounts) {
      if (names.includes(m.volumeName)) continue
      names.push(m.volumeName)
      const mode = modeOf(m.volumeName)
      // every mount of the volume must name its mode: the first that does not decides
      const wrong = mounts.find((n) => n.volumeName === m.volumeName && n.mode !== mode)
      if (wrong !== undefined) return { byte: 5, name: m.volumeName, mode }
      const capability = this.capabilities[mode]
      if (!capability.mount) return { byte: 4, name: m.volumeName }
      const h = this.held.get(`${identity}\0${m.volumeName}`)
      if (h !== undefined && h.busy > 0) return { byte: 1, name: m.volumeName }
      if (h !== undefined && h.runs > 0 && !capability.mount_many) return { byte: 2, name: m.volumeName }
      if (h !== undefined && h.fuseServes > 0 && !capability.mount_and_fuse_serve) return { byte: 3, name: m.volumeName }
    }
    for (const name of names) this.entry(identity, name).runs++
    let released = false
    return {
      release: () => {
        if (released) return
        released = true
        for (const name of names) {
          this.entry(identity, name).runs--
          this.tidy(identity, name)
        }
      }
    }
  }

  /** one of the six operations: refused while a run holds the volume; else marks it busy */
  beginOperation(identity: string, name: string): (() => void) | undefined {
    const h = this.held.get(`${identity}\0${name}`)
    if (h !== undefined && h.runs > 0) return undefined
    this.entry(identity, name).busy++
    let done = false
    return () => {
      if (done) return
      done = true
      this.entry(identity, name).busy--
      this.tidy(identity, name)
    }
  }

  /** a FUSE serve of the volume (volumes::fuse_serve), for when that endpoint is served */
  holdForFuseServe(identity: string, name: string, mode: VolumeMode): (() => void) | undefined {
    const h = this.held.get(`${identity}\0${name}`)
    if (h !== undefined && (h.busy > 0 || h.fuseServes > 0 || (h.runs > 0 && !this.capabilities[mode].mount_and_fuse_serve))) return undefined
    this.entry(identity, name).fuseServes++
    let done = false
    return () => {
      if (done) return
      done = true
      this.entry(identity, name).fuseServes--
      this.tidy(identity, name)
    }
  }

  /** for tests: nothing held by anyone */
  get isEmpty(): boolean {
    return this.held.size === 0
  }

  /** for tests: every hold, as text */
  snapshot(): string {
    return JSON.stringify([...this.held.entries()].sort())
  }

  describe(identity: string, name: string): Readonly<Held> {
    return { ...(this.held.get(`${identity}\0${name}`) ?? { runs: 0, fuseServes: 0, busy: 0 }) }
  }
}
