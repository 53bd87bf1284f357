import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterEach } from "vitest"
import * as MemoryImageSource from "../../layers/MemoryImageSource.js"
import * as InProcessDeployer from "../../layers/InProcessDeployer.js"
import type { ImageSource } from "../../services/ImageSource.js"
import type { ClientImage } from "../../src/containers/Client.js"
import { connect, type ContainersClient } from "../../src/containers/Client.js"
import { sha256 } from "../../src/containers/OciImage.js"
import { makeServerParts } from "../../src/containers/Parts.js"
import { mintToken, startContainersServer, type ContainersServer } from "../../src/containers/Server.js"
import { tar } from "../support/tarBuild.js"
import type { ServerParts } from "../../src/containers/ServerParts.js"

/**
 * One tool-container server for a test: its own ROOT and port, the real WebSocket server,
 * the in-process proxy behind the test deployer, images held in memory.
 */
export interface World {
  readonly root: string
  readonly server: ContainersServer
  readonly parts: ServerParts
  readonly deploys: Array<InProcessDeployer.DeployRecord>
  readonly url: string
  /** a token per identity */
  readonly token: (identity: string) => string
  readonly client: (identity?: string) => Promise<ContainersClient>
  readonly close: () => Promise<void>
}

export interface WorldOptions extends InProcessDeployer.InProcessDeployerOptions {
  readonly capabilities?: unknown
  readonly refuseImages?: ReadonlyArray<string>
  /** the image source for the world's ROOT (default: images held in memory) */
  readonly imageSource?: (root: string) => Layer.Layer<ImageSource>
}

export const makeWorld = async (options: WorldOptions = {}): Promise<World> => {
  const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-containers-"))
  if (options.capabilities !== undefined) Fs.writeFileSync(Path.join(root, "capabilities.json"), JSON.stringify(options.capabilities))
  const deploys: Array<InProcessDeployer.DeployRecord> = []
  const parts = await Effect.runPromise(
    makeServerParts(root).pipe(
      Effect.provide(
        Layer.merge(InProcessDeployer.layer(options, deploys), options.imageSource?.(root) ?? MemoryImageSource.layer({ refuse: options.refuseImages ?? [] }))
      )
    )
  )
  const server = await startContainersServer({ root, parts })
  const tokens = new Map<string, string>()
  const token = (identity: string) => {
    let t = tokens.get(identity)
    if (t === undefined) {
      t = mintToken(root, identity)
      tokens.set(identity, t)
    }
    return t
  }
  const url = `ws://127.0.0.1:${server.port}`
  const clients: Array<ContainersClient> = []
  return {
    root,
    server,
    parts,
    deploys,
    url,
    token,
    client: async (identity = "alice") => {
      const c = await connect(url, token(identity))
      clients.push(c)
      return c
    },
    close: async () => {
      for (const c of clients) c.close()
      await server.close()
      Fs.rmSync(root, { recursive: true, force: true })
    }
  }
}

/** a small OCI image: one layer of LAYER bytes (by default a tar of one file, which the image store can unpack) */
export const makeImage = (repository = "tests/tool", layer: Uint8Array = tar([{ path: "hello", type: "file", content: "a layer" }])): { digest: string; image: ClientImage } => {
  const config = Buffer.from(JSON.stringify({ architecture: "amd64", os: "linux", rootfs: { type: "layers", diff_ids: [sha256(layer)] } }))
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: sha256(config), size: config.length },
      layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar", digest: sha256(layer), size: layer.length }]
    })
  )
  const digest = sha256(manifest)
  return { digest, image: { repository, manifest, blobs: new Map([[sha256(config), config], [sha256(layer), layer]]) } }
}

export const images = (...made: ReadonlyArray<{ digest: string; image: ClientImage }>) => new Map(made.map((m) => [m.digest, m.image]))

/** waits for a condition, polling; generous for a loaded machine */
export const until = async (condition: () => boolean, what = "a condition", limitMs = 60_000): Promise<void> => {
  const start = Date.now()
  while (!condition()) {
    if (Date.now() - start > limitMs) throw new Error(`waited ${limitMs} ms for ${what}`)
    await new Promise((r) => setTimeout(r, 5))
  }
}

export const request = (digest: string, more: Record<string, unknown> = {}) => ({
  image: digest,
  template: "tmpl-1",
  memory: 64 * 1024 * 1024,
  disk: 16 * 1024 * 1024,
  ...more
})

/** a Promise with its resolve outside: a gate a test opens */
export const gate = () => {
  let open!: () => void
  const promise = new Promise<void>((resolve) => (open = resolve))
  return { promise, open }
}

/** every response of a finished scope, raw */
export const responsesOf = async (scope: { responses: { take(): Promise<Buffer | undefined> } }): Promise<Array<Buffer>> => {
  const out: Array<Buffer> = []
  for (;;) {
    const p = await scope.responses.take()
    if (p === undefined) return out
    out.push(p)
  }
}

/** the URL a spawned `ocx2-containers serve` prints once it listens */
export const listeningUrl = (server: { readonly stdout: NodeJS.ReadableStream | null }): Promise<string> =>
  new Promise<string>((resolve) => {
    let out = ""
    server.stdout!.on("data", (d: Buffer) => {
      out += d.toString()
      const m = /listening on (\S+)\n/.exec(out)
      if (m !== null) resolve(m[1]!)
    })
  })

/** A test file's one world a case (its top level calls this once): what it gives opens the case's world, closed after the case. */
export const worldPerCase = (): ((options?: WorldOptions) => Promise<World>) => {
  let world: World | undefined
  afterEach(async () => {
    await world?.close()
    world = undefined
  })
  return async (options = {}) => (world = await makeWorld(options))
}
