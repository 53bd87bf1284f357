import * as Fs from "node:fs"
import * as Path from "node:path"
import { isVolumeMode, isVolumeName, isVolumePath, type VolumeMode } from "./ContainerNames.js"

/**
 * The volumes of every identity on disk: ROOT/volumes/IDENTITY/NAME/{mode,data/}
 * (docs/containers.md section 6). Paths inside a volume are resolved on the host and never
 * followed out of it.
 */
export class VolumeError extends Error {}

export class VolumeStore {
  constructor(readonly root: string) {}

  private identityDir(identity: string): string {
    return Path.join(this.root, "volumes", identity)
  }

  private volumeDir(identity: string, name: string): string {
    if (!isVolumeName(name)) throw new VolumeError(`${JSON.stringify(name)} is not a volume name`)
    return Path.join(this.identityDir(identity), name)
  }

  /** the identity's volumes, by name */
  list(identity: string): ReadonlyArray<{ readonly name: string; readonly mode: VolumeMode }> {
    let names: Array<string>
    try {
      names = Fs.readdirSync(this.identityDir(identity))
    } catch {
      return []
    }
    const out: Array<{ name: string; mode: VolumeMode }> = []
    for (const name of names.sort()) {
      if (!isVolumeName(name)) continue
      const mode = this.modeOf(identity, name)
      if (mode !== undefined) out.push({ name, mode })
    }
    return out
  }

  modeOf(identity: string, name: string): VolumeMode | undefined {
    try {
      const mode = Fs.readFileSync(Path.join(this.volumeDir(identity, name), "mode"), "utf8").trim()
      return isVolumeMode(mode) ? mode : undefined
    } catch {
      return undefined
    }
  }

  create(identity: string, name: string, mode: VolumeMode): void {
    const dir = this.volumeDir(identity, name)
    if (this.modeOf(identity, name) !== undefined) throw new VolumeError(`the volume ${JSON.stringify(name)} exists`)
    Fs.mkdirSync(Path.join(dir, "data"), { recursive: true, mode: 0o700 })
    // the mode file last: a volume exists once it has one
    Fs.writeFileSync(Path.join(dir, "mode.tmp"), mode + "\n")
    Fs.renameSync(Path.join(dir, "mode.tmp"), Path.join(dir, "mode"))
  }

  deleteVolume(identity: string, name: string): void {
    const dir = this.volumeDir(identity, name)
    this.require(identity, name)
    // the mode file first: a half-deleted volume is no volume
    Fs.rmSync(Path.join(dir, "mode"))
    Fs.rmSync(dir, { recursive: true, force: true })
  }

  /** empties every ephemeral volume (at the server's start) */
  emptyEphemeral(): void {
    let identities: Array<string>
    try {
      identities = Fs.readdirSync(Path.join(this.root, "volumes"))
    } catch {
      return
    }
    for (const identity of identities) {
      for (const v of this.list(identity)) {
        if (v.mode !== "ephemeral") continue
        const data = Path.join(this.volumeDir(identity, v.name), "data")
        Fs.rmSync(data, { recursive: true, force: true })
        Fs.mkdirSync(data, { mode: 0o700 })
      }
    }
  }

  private require(identity: string, name: string): VolumeMode {
    const mode = this.modeOf(identity, name)
    if (mode === undefined) throw new VolumeError(`there is no volume ${JSON.stringify(name)}`)
    return mode
  }

  /**
   * The host path of PATH in the volume, every symlink resolved and checked to stay inside it.
   * `mustExist: false` allows a last component that does not exist yet (a write).
   */
  resolve(identity: string, name: string, path: string, mustExist = true): string {
    this.require(identity, name)
    if (!isVolumePath(path)) throw new VolumeError(`${JSON.stringify(path)} is not a path inside a volume`)
    const data = Fs.realpathSync(Path.join(this.volumeDir(identity, name), "data"))
    const inside = (p: string) => p === data || p.startsWith(data + "/")
    const wanted = path === "" ? data : Path.join(data, path)
    let real: string
    try {
      real = Fs.realpathSync(wanted)
    } catch {
      if (mustExist) throw new VolumeError(`the volume ${JSON.stringify(name)} has no ${JSON.stringify(path)}`)
      let parent: string
      try {
        parent = Fs.realpathSync(Path.dirname(wanted))
      } catch {
        throw new VolumeError(`the volume ${JSON.stringify(name)} has no ${JSON.stringify(Path.dirname(path))}`)
      }
      real = Path.join(parent, Path.basename(wanted))
      if (Fs.lstatSync(real, { throwIfNoEntry: false })?.isSymbolicLink()) {
        throw new VolumeError(`${JSON.stringify(path)} is a symlink that leads nowhere`)
      }
    }
    if (!inside(real)) throw new VolumeError(`${JSON.stringify(path)} leads out of the volume ${JSON.stringify(name)}`)
    return real
  }
}
