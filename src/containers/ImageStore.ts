import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { Descriptor } from "./OciImage.js"

/**
 * The server's image store (docs/containers.md section 7), a directory of its own:
 *
 *     images/IDENTITY/            an OCI image layout per identity: oci-layout, index.json, blobs/sha256/HEX
 *     rootfs/HEX                  a manifest's unpacked root filesystem, shared: it is made from verified bytes only
 *     tmp/                        bytes being received, and rootfs being unpacked
 *
 * A blob enters a layout only by a rename from tmp/ once its digest and size matched; an
 * image enters an identity's index.json only once all of it was verified and unpacked. What an
 * identity holds is what its index lists: another identity's images are never its own.
 */
export class ImageStore {
  constructor(readonly dir: string) {}

  /** makes the directories and removes what a server that stopped left half-done */
  open(): void {
    Fs.mkdirSync(Path.join(this.dir, "rootfs"), { recursive: true, mode: 0o700 })
    Fs.rmSync(Path.join(this.dir, "tmp"), { recursive: true, force: true })
    Fs.mkdirSync(Path.join(this.dir, "tmp"), { mode: 0o700 })
    Fs.mkdirSync(Path.join(this.dir, "images"), { recursive: true, mode: 0o700 })
  }

  layout(identity: string): string {
    return Path.join(this.dir, "images", identity)
  }

  blobPath(identity: string, digest: string): string {
    return Path.join(this.layout(identity), "blobs", "sha256", digest.slice("sha256:".length))
  }

  rootfs(digest: string): string {
    return Path.join(this.dir, "rootfs", digest.slice("sha256:".length))
  }

  /** a fresh path under tmp/, on the store's filesystem */
  temporary(what: string): string {
    return Path.join(this.dir, "tmp", `${what}-${Crypto.randomBytes(8).toString("hex")}`)
  }

  /** the blob is in the identity's layout with its descriptor's size (its digest was checked on the way in) */
  hasBlob(identity: string, descriptor: { readonly digest: string; readonly size: number }): boolean {
    try {
      return Fs.statSync(this.blobPath(identity, descriptor.digest)).size === descriptor.size
    } catch {
      return false
    }
  }

  /** the identity's index lists the manifest DIGEST */
  holds(identity: string, digest: string): boolean {
    return this.index(identity).manifests.some((m) => m.digest === digest)
  }

  private index(identity: string): { schemaVersion: 2; manifests: Array<Descriptor> } {
    try {
      const index = JSON.parse(Fs.readFileSync(Path.join(this.layout(identity), "index.json"), "utf8")) as { manifests?: unknown }
      if (Array.isArray(index.manifests)) return { schemaVersion: 2, manifests: index.manifests as Array<Descriptor> }
    } catch {
      // no index yet
    }
    return { schemaVersion: 2, manifests: [] }
  }

  private ensureLayout(identity: string): void {
    const layout = this.layout(identity)
    Fs.mkdirSync(Path.join(layout, "blobs", "sha256"), { recursive: true, mode: 0o700 })
    const marker = Path.join(layout, "oci-layout")
    if (!Fs.existsSync(marker)) this.writeAtomically(marker, JSON.stringify({ imageLayoutVersion: "1.0.0" }))
  }

  private writeAtomically(file: string, text: string): void {
    const temporary = this.temporary("write")
    Fs.writeFileSync(temporary, text)
    Fs.renameSync(temporary, file)
  }

  /** lists the manifest in the identity's index.json (the image is held from now on) */
  addToIndex(identity: string, manifest: Descriptor): void {
    this.ensureLayout(identity)
    const index = this.index(identity)
    if (index.manifests.some((m) => m.digest === manifest.digest)) return
    index.manifests.push({ mediaType: manifest.mediaType, digest: manifest.digest, size: manifest.size })
    this.writeAtomically(Path.join(this.layout(identity), "index.json"), JSON.stringify({ ...index, mediaType: "application/vnd.oci.image.index.v1+json" }, null, 2) + "\n")
  }

  /** a sink for a blob's bytes as they come; `commit` verifies and renames it into the identity's layout */
  receive(identity: string, descriptor: { readonly digest: string; readonly size?: number }): BlobSink {
    this.ensureLayout(identity)
    return new BlobSink(this.temporary("blob"), this.blobPath(identity, descriptor.digest), descriptor)
  }
}

/** bytes being received: hashed as they are written; never in the layout until they match */
export class BlobSink {
  private readonly fd: number
  private readonly hash = Crypto.createHash("sha256")
  private length = 0
  private closed = false

  constructor(
    private readonly temporary: string,
    private readonly destination: string,
    private readonly descriptor: { readonly digest: string; readonly size?: number }
  ) {
    this.fd = Fs.openSync(temporary, "wx", 0o600)
  }

  /** false once more bytes came than the descriptor's size (the rest is dropped) */
  write(chunk: Uint8Array): boolean {
    this.length += chunk.length
    if (this.descriptor.size !== undefined && this.length > this.descriptor.size) return false
    this.hash.update(chunk)
    for (let at = 0; at < chunk.length; ) at += Fs.writeSync(this.fd, chunk, at)
    return true
  }

  /** undefined once the blob is in the layout, else what is wrong with the bytes */
  commit(): string | undefined {
    this.close()
    const { digest, size } = this.descriptor
    if (size !== undefined && this.length !== size) {
      this.discard()
      return `${this.length > size ? "more than" : `only ${this.length} of`} the ${size} bytes its descriptor says came`
    }
    const got = "sha256:" + this.hash.digest("hex")
    if (got !== digest) {
      this.discard()
      return `its bytes hash to ${got}`
    }
    Fs.renameSync(this.temporary, this.destination)
    return undefined
  }

  private close(): void {
    if (!this.closed) Fs.closeSync(this.fd)
    this.closed = true
  }

  discard(): void {
    this.close()
    Fs.rmSync(this.temporary, { force: true })
  }
}
