import * as Crypto from "node:crypto"

/** The parts of an OCI image manifest (schema 2) the server checks, and digest verification. */
export interface Descriptor {
  readonly mediaType: string
  readonly digest: string
  readonly size: number
}

export interface Manifest {
  readonly config: Descriptor
  readonly layers: ReadonlyArray<Descriptor>
}

export const sha256 = (bytes: Uint8Array): string => "sha256:" + Crypto.createHash("sha256").update(bytes).digest("hex")

const isDescriptor = (v: unknown): v is Descriptor => {
  if (typeof v !== "object" || v === null) return false
  const d = v as Record<string, unknown>
  return typeof d.mediaType === "string" && typeof d.digest === "string" && /^sha256:[0-9a-f]{64}$/.test(d.digest) &&
    typeof d.size === "number" && Number.isSafeInteger(d.size) && d.size >= 0
}

/** a manifest's bytes, or what is wrong with them */
export const parseManifest = (bytes: Uint8Array): Manifest | string => {
  let m: unknown
  try {
    m = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes))
  } catch {
    return "the manifest is not JSON"
  }
  if (typeof m !== "object" || m === null) return "the manifest is not an object"
  const o = m as Record<string, unknown>
  if (o.schemaVersion !== 2) return "the manifest's schemaVersion is not 2"
  if (!isDescriptor(o.config)) return "the manifest has no config descriptor"
  if (!Array.isArray(o.layers) || !o.layers.every(isDescriptor)) return "the manifest's layers are not descriptors"
  return { config: o.config, layers: o.layers }
}

/** undefined when BYTES are what DESCRIPTOR names, else what is wrong */
export const verifyBlob = (bytes: Uint8Array, descriptor: { readonly digest: string; readonly size?: number }): string | undefined => {
  if (descriptor.size !== undefined && bytes.length !== descriptor.size) {
    return `blob ${descriptor.digest} has ${bytes.length} bytes where its descriptor says ${descriptor.size}`
  }
  const got = sha256(bytes)
  return got === descriptor.digest ? undefined : `blob ${descriptor.digest} hashes to ${got}`
}
