import type { VolumeMode } from "./ContainerNames.js"

/** what this server allows for one volume mode (docs/containers.md section 6) */
export interface Capability {
  readonly mount: boolean
  readonly mount_many: boolean
  readonly mount_and_fuse_serve: boolean
}

export type Capabilities = Readonly<Record<VolumeMode, Capability>>

export const defaultCapabilities: Capabilities = {
  ephemeral: { mount: true, mount_many: true, mount_and_fuse_serve: true },
  read_only: { mount: true, mount_many: true, mount_and_fuse_serve: true },
  // the seed's ceiling: a persistent volume is never FUSE-served beside a running container
  persistent: { mount: true, mount_many: true, mount_and_fuse_serve: false }
}

/** ROOT/capabilities.json may only narrow the defaults (a `true` past a default is ignored) */
export const narrowCapabilities = (given: unknown): Capabilities => {
  const out: Record<string, Capability> = {}
  for (const [mode, base] of Object.entries(defaultCapabilities)) {
    const g = typeof given === "object" && given !== null ? (given as Record<string, unknown>)[mode] : undefined
    const flag = (key: keyof Capability) =>
      base[key] && !(typeof g === "object" && g !== null && (g as Record<string, unknown>)[key] === false)
    out[mode] = { mount: flag("mount"), mount_many: flag("mount_many"), mount_and_fuse_serve: flag("mount_and_fuse_serve") }
  }
  return out as Capabilities
}
