import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Zlib from "node:zlib"
import type { ClientImage } from "../../src/containers/Client.js"
import { sha256 } from "../../src/containers/OciImage.js"
import { tar, type TarSpec } from "./tarBuild.js"

/**
 * OCI images the tests build: any layers a test names, written as an OCI image layout
 * (oci-layout, index.json, blobs/sha256) or offered by a client over the oci channels; and the
 * busybox image, Debian's busybox-static in two gzip layers, the second whiting out a file and a
 * directory's contents of the first.
 */
export interface BuiltImage {
  readonly digest: string
  readonly manifest: Buffer
  readonly config: Buffer
  readonly layers: ReadonlyArray<{ readonly digest: string; readonly bytes: Buffer }>
  /** the config and every layer, by digest */
  readonly blobs: ReadonlyMap<string, Buffer>
  /** as a client offers it on the oci channels */
  readonly client: (repository?: string) => ClientImage
  /** writes the image as an OCI image layout at DIR, tagged REF */
  readonly writeLayout: (dir: string, ref?: string) => void
}

export interface ImageRun {
  readonly Entrypoint?: ReadonlyArray<string>
  readonly Cmd?: ReadonlyArray<string>
  readonly Env?: ReadonlyArray<string>
  readonly WorkingDir?: string
}

export interface BuildOptions {
  readonly run?: ImageRun
  /** a layer's diff_id as the config lists it (a test's wrong one) */
  readonly diffIds?: ReadonlyArray<string>
  /** the media type of every layer, with the bytes to match: tar+gzip unless "tar" */
  readonly compression?: "gzip" | "tar"
}

export const buildImage = (layerEntries: ReadonlyArray<ReadonlyArray<TarSpec>>, options: BuildOptions = {}): BuiltImage => {
  const gzip = options.compression !== "tar"
  const tars = layerEntries.map((entries) => tar(entries))
  const layers = tars.map((t) => {
    const bytes = gzip ? Zlib.gzipSync(t) : t
    return { digest: sha256(bytes), bytes }
  })
  const config = Buffer.from(
    JSON.stringify({
      architecture: "amd64",
      os: "linux",
      config: options.run ?? {},
      rootfs: { type: "layers", diff_ids: options.diffIds ?? tars.map((t) => sha256(t)) }
    })
  )
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: sha256(config), size: config.length },
      layers: layers.map((l) => ({
        mediaType: gzip ? "application/vnd.oci.image.layer.v1.tar+gzip" : "application/vnd.oci.image.layer.v1.tar",
        digest: l.digest,
        size: l.bytes.length
      }))
    })
  )
  const digest = sha256(manifest)
  const blobs = new Map<string, Buffer>([[sha256(config), config], ...layers.map((l) => [l.digest, l.bytes] as [string, Buffer])])
  return {
    digest,
    manifest,
    config,
    layers,
    blobs,
    client: (repository = "tests/busybox") => ({ repository, manifest, blobs }),
    writeLayout: (dir, ref = "latest") => {
      const at = Path.join(dir, "blobs", "sha256")
      Fs.mkdirSync(at, { recursive: true })
      for (const [d, bytes] of [[digest, manifest] as const, ...blobs]) Fs.writeFileSync(Path.join(at, d.slice(7)), bytes)
      Fs.writeFileSync(Path.join(dir, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }))
      Fs.writeFileSync(
        Path.join(dir, "index.json"),
        JSON.stringify({
          schemaVersion: 2,
          manifests: [
            { mediaType: "application/vnd.oci.image.manifest.v1+json", digest, size: manifest.length, annotations: { "org.opencontainers.image.ref.name": ref } }
          ]
        })
      )
    }
  }
}

/** what the busybox image's rootfs holds once both layers are applied */
export const busyboxApplets = ["sh", "cat", "ls", "echo", "env", "pwd"]

/**
 * Debian's busybox-static as an image: layer 1 holds /bin/busybox with its applets as symlinks,
 * /etc/motd, /etc/gone and /var/cache/{a,b}; layer 2 whites out /etc/gone (`.wh.gone`) and the
 * contents of /var/cache (`.wh..wh..opq`), adds /var/cache/c, replaces /etc/motd and hard-links
 * /bin/busybox to /bin/bb.
 */
export const busyboxImage = (options: BuildOptions = {}): BuiltImage => {
  const busybox = Fs.readFileSync("/bin/busybox")
  return buildImage(
    [
      [
        { path: "bin/", type: "directory" },
        { path: "bin/busybox", type: "file", content: busybox, mode: 0o755 },
        ...busyboxApplets.map((a) => ({ path: `bin/${a}`, type: "symlink" as const, target: "busybox" })),
        { path: "etc/", type: "directory" },
        { path: "etc/motd", type: "file", content: "layer 1\n" },
        { path: "etc/gone", type: "file", content: "whited out by layer 2\n" },
        { path: "var/", type: "directory" },
        { path: "var/cache/", type: "directory" },
        { path: "var/cache/a", type: "file", content: "a\n" },
        { path: "var/cache/b/", type: "directory" },
        { path: "var/cache/b/deep", type: "file", content: "deep\n" },
        { path: "tmp/", type: "directory", mode: 0o1777 }
      ],
      [
        { path: "etc/", type: "directory" },
        { path: "etc/.wh.gone", type: "file", content: "" },
        { path: "etc/motd", type: "file", content: "layer 2\n" },
        { path: "var/cache/", type: "directory" },
        { path: "var/cache/c", type: "file", content: "c\n" },
        { path: "var/cache/.wh..wh..opq", type: "file", content: "" },
        { path: "bin/bb", type: "link", target: "bin/busybox" }
      ]
    ],
    { run: { Entrypoint: ["/bin/sh", "-c"], Cmd: ["cat /etc/motd"], Env: ["PATH=/bin", "GREETING=hello"], WorkingDir: "/etc" }, ...options }
  )
}
