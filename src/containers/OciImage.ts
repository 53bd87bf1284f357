import * as Crypto from "node:crypto"

/** The parts of an OCI image manifest (schema 2) and config the server checks, and digest verification. */
export interface Descriptor {
  readonly mediaType: string
  readonly digest: string
  readonly size: number
}

export interface Manifest {
  readonly config: Descriptor
  readonly layers: ReadonlyArray<Descriptor>
}

/** what the server reads of an image's config: the layers' uncompressed digests and how to run it */
export interface ImageConfig {
  readonly diffIds: ReadonlyArray<string>
  readonly entrypoint: ReadonlyArray<string>
  readonly cmd: ReadonlyArray<string>
  /** `NAME=VALUE`, as the config lists them */
  readonly env: ReadonlyArray<string>
  /** "/" when the config names none */
  readonly workingDir: string
  /** the config's User as written ("" when it names none): the deployer resolves it in the rootfs */
  readonly user: string
}

/** the manifest media types a registry is asked for (Accept) and the server takes */
export const manifestMediaTypes = [
  "application/vnd.oci.image.manifest.v1+json",
  "application/vnd.docker.distribution.manifest.v2+json"
] as const

const indexMediaTypes = ["application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json"]

export type LayerCompression = "none" | "gzip"

/** how a layer's bytes are compressed, by its media type; undefined: not a layer this server unpacks */
export const layerCompression = (mediaType: string): LayerCompression | undefined => {
  switch (mediaType) {
    case "application/vnd.oci.image.layer.v1.tar":
    case "application/vnd.oci.image.layer.nondistributable.v1.tar":
    case "application/vnd.docker.image.rootfs.diff.tar":
      return "none"
    case "application/vnd.oci.image.layer.v1.tar+gzip":
    case "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip":
    case "application/vnd.docker.image.rootfs.diff.tar.gzip":
    case "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip":
      return "gzip"
    default:
      return undefined
  }
}

export const isDigest = (v: unknown): v is string => typeof v === "string" && /^sha256:[0-9a-f]{64}$/.test(v)

export const sha256 = (bytes: Uint8Array): string => "sha256:" + Crypto.createHash("sha256").update(bytes).digest("hex")

const isDescriptor = (v: unknown): v is Descriptor => {
  if (typeof v !== "object" || v === null) return false
  const d = v as Record<string, unknown>
  return typeof d.mediaType === "string" && isDigest(d.digest) && typeof d.size === "number" && Number.isSafeInteger(d.size) && d.size >= 0
}

const json = (bytes: Uint8Array): unknown => JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes))

/** a manifest's bytes, or what is wrong with them */
export const parseManifest = (bytes: Uint8Array): Manifest | string => {
  let m: unknown
  try {
    m = json(bytes)
  } catch {
    return "the manifest is not JSON"
  }
  if (typeof m !== "object" || m === null) return "the manifest is not an object"
  const o = m as Record<string, unknown>
  if (typeof o.mediaType === "string" && indexMediaTypes.includes(o.mediaType)) {
    return "the digest names an image index, not an image manifest: name the manifest of one platform"
  }
  if (o.schemaVersion !== 2) return "the manifest's schemaVersion is not 2"
  if (typeof o.mediaType === "string" && !(manifestMediaTypes as ReadonlyArray<string>).includes(o.mediaType)) {
    return `the manifest's media type ${o.mediaType} is not an image manifest's`
  }
  if (!isDescriptor(o.config)) return "the manifest has no config descriptor"
  if (!Array.isArray(o.layers) || !o.layers.every(isDescriptor)) return "the manifest's layers are not descriptors"
  return { config: o.config, layers: o.layers }
}

const strings = (v: unknown): ReadonlyArray<string> | undefined =>
  v === undefined || v === null ? [] : Array.isArray(v) && v.every((s) => typeof s === "string") ? v : undefined

/** a config's bytes, or what is wrong with them */
export const parseConfig = (bytes: Uint8Array): ImageConfig | string => {
  let c: unknown
  try {
    c = json(bytes)
  } catch {
    return "the config is not JSON"
  }
  if (typeof c !== "object" || c === null) return "the config is not an object"
  const o = c as Record<string, unknown>
  const rootfs = o.rootfs as Record<string, unknown> | undefined
  if (typeof rootfs !== "object" || rootfs === null || rootfs.type !== "layers" || !Array.isArray(rootfs.diff_ids) || !rootfs.diff_ids.every(isDigest)) {
    return "the config's rootfs is not {type: layers, diff_ids: [sha256 digests]}"
  }
  const run = (o.config ?? {}) as Record<string, unknown>
  if (typeof run !== "object" || run === null) return "the config's config is not an object"
  const entrypoint = strings(run.Entrypoint)
  const cmd = strings(run.Cmd)
  const env = strings(run.Env)
  if (entrypoint === undefined) return "the config's Entrypoint is not a list of strings"
  if (cmd === undefined) return "the config's Cmd is not a list of strings"
  if (env === undefined || !env.every((e) => e.indexOf("=") > 0)) return "the config's Env is not a list of NAME=VALUE"
  const workingDir = run.WorkingDir ?? ""
  if (typeof workingDir !== "string" || (workingDir !== "" && !workingDir.startsWith("/"))) return "the config's WorkingDir is not an absolute path"
  const user = run.User ?? ""
  if (typeof user !== "string") return "the config's User is not a string"
  return { diffIds: rootfs.diff_ids as ReadonlyArray<string>, entrypoint, cmd, env, workingDir: workingDir === "" ? "/" : workingDir, user }
}

/** undefined when BYTES are what DESCRIPTOR names, else what is wrong */
export const verifyBlob = (bytes: Uint8Array, descriptor: { readonly digest: string; readonly size?: number }): string | undefined => {
  if (descriptor.size !== undefined && bytes.length !== descriptor.size) {
    return `blob ${descriptor.digest} has ${bytes.length} bytes where its descriptor says ${descriptor.size}`
  }
  const got = sha256(bytes)
  return got === descriptor.digest ? undefined : `blob ${descriptor.digest} hashes to ${got}`
}
