import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import { ImageError, ImageSource, type ClientImages, type ObtainedImage } from "../services/ImageSource.js"
import { ImageStore, type BlobSink } from "../src/containers/ImageStore.js"
import { isDigest, layerCompression, parseConfig, parseManifest, sha256, verifyBlob, type Descriptor } from "../src/containers/OciImage.js"
import { fetchBlob, fetchManifest, readRegistryPolicy, TokenCache, type RegistryPlace, type SignIn } from "../src/containers/RegistryPolicy.js"
import { readCredentials, registryHost } from "../src/containers/RegistryCredentials.js"
import { unpackLayers, UnpackError } from "../src/containers/Unpack.js"

/**
 * The server's image source (docs/containers.md section 7): an image store on disk
 * (src/containers/ImageStore.ts), filled from the client over the oci channels or from a
 * registry the policy lists, in that order after the store itself. Every byte is verified
 * before it is used, each image unpacked once per manifest digest; two runs asking for one
 * image at once share one fetch and one unpack.
 */
export interface StoreImageSourceOptions {
  /** the store's directory (ROOT/store) */
  readonly store: string
  /** the registry policy file (ROOT/registries.json); missing: no registry */
  readonly registries?: string
  /** the directory of each identity's registry credentials, IDENTITY.json (ROOT/registry-credentials); missing: anonymous pulls only */
  readonly credentials?: string
  /** the image policy file (ROOT/image-policy.json), `{"refuse": [digests]}`; missing: none refused */
  readonly imagePolicy?: string
  /** tests and logs: a manifest was unpacked */
  readonly onUnpack?: (digest: string) => void
}

/** the largest manifest the server reads */
const manifestLimit = 4 * 1024 * 1024

/** one place the bytes of an image come from */
interface Fetcher {
  /** how the run's error names it */
  readonly name: string
  readonly manifest: () => Promise<Uint8Array | string>
  /** fills SINK; undefined when the source sent it whole, else why not */
  readonly blob: (descriptor: Descriptor, sink: BlobSink) => Promise<string | undefined>
}

class Failure extends Error {}

/** the digests the image policy FILE (`{"refuse": [digests]}`) refuses; none when it is missing */
export const refusedImages = (file: string | undefined): ReadonlyArray<string> => {
  if (file === undefined) return []
  try {
    const policy = JSON.parse(Fs.readFileSync(file, "utf8")) as { refuse?: unknown }
    return Array.isArray(policy.refuse) ? policy.refuse.filter(isDigest) : []
  } catch {
    return []
  }
}

export const make = (options: StoreImageSourceOptions) => {
  const store = new ImageStore(options.store)
  store.open()
  const obtaining = new Map<string, Promise<ObtainedImage>>()
  const unpacking = new Map<string, Promise<void>>()
  const tokens = new TokenCache()

  const describe = (descriptor: Descriptor, manifest: { config: Descriptor; layers: ReadonlyArray<Descriptor> }): string => {
    if (descriptor === manifest.config) return `the config ${descriptor.digest}`
    const i = manifest.layers.indexOf(descriptor)
    return `the layer ${descriptor.digest} (${i + 1} of ${manifest.layers.length})`
  }

  /** the image's bytes from FETCHER into the identity's layout, each verified on the way in */
  const fill = async (identity: string, digest: string, fetcher: Fetcher): Promise<void> => {
    const manifest = await fetcher.manifest()
    if (typeof manifest === "string") throw new Failure(manifest)
    const got = sha256(manifest)
    if (got !== digest) throw new Failure(`the manifest from ${fetcher.name} is not the image ${digest}: its bytes hash to ${got}`)
    const parsed = parseManifest(manifest)
    if (typeof parsed === "string") throw new Failure(`the image ${digest} from ${fetcher.name}: ${parsed}`)
    const sink = store.receive(identity, { digest, size: manifest.length })
    sink.write(manifest)
    sink.commit()
    for (const descriptor of [parsed.config, ...parsed.layers]) {
      if (store.hasBlob(identity, descriptor)) continue
      const into = store.receive(identity, descriptor)
      const problem = await fetcher.blob(descriptor, into).catch((e: unknown) => `receiving it failed: ${e instanceof Error ? e.message : String(e)}`)
      if (problem !== undefined) {
        into.discard()
        throw new Failure(`${describe(descriptor, parsed)} did not come from ${fetcher.name}: ${problem}`)
      }
      const wrong = into.commit()
      if (wrong !== undefined) throw new Failure(`${describe(descriptor, parsed)} from ${fetcher.name} is not what the manifest names: ${wrong}`)
    }
  }

  const fromClient = (client: ClientImages, repository: string, digest: string): Fetcher => ({
    name: "the client",
    manifest: async () => {
      const bytes = await client.manifest(repository, digest)
      if (bytes === undefined) return `the client holds the image ${digest} (oci-has) but did not give its manifest`
      return bytes.length > manifestLimit ? `the client sent a manifest larger than ${manifestLimit} bytes` : bytes
    },
    blob: async (descriptor, sink) =>
      (await client.blob(repository, descriptor.digest, (piece) => sink.write(piece))) ? undefined : "it answered with nothing or an error"
  })

  const fromRegistry = (place: RegistryPlace, signIn: SignIn, manifest: Uint8Array): Fetcher => ({
    name: `the registry ${place.url}/${place.repository}`,
    manifest: () => Promise.resolve(manifest),
    blob: async (descriptor, sink) => {
      const got = await fetchBlob(place, descriptor.digest, (piece) => sink.write(piece), signIn)
      return got.kind === "found" ? undefined : got.kind === "absent" ? "it has no such blob (404)" : got.message
    }
  })

  /** the image in a registry the policy lists; false when none has it */
  const fromRegistries = async (identity: string, digest: string, misses: Array<string>): Promise<boolean> => {
    const places = options.registries === undefined ? [] : readRegistryPolicy(options.registries)
    if (typeof places === "string") throw new Failure(places)
    const credentials = options.credentials === undefined || places.length === 0 ? undefined : readCredentials(options.credentials, identity)
    if (typeof credentials === "string") throw new Failure(credentials)
    for (const place of places) {
      const signIn: SignIn = {
        identity,
        credential: credentials?.byHost.get(registryHost(place.url)),
        source: credentials?.file ?? "this server",
        tokens
      }
      const manifest = await fetchManifest(place, digest, manifestLimit, signIn)
      if (!(manifest instanceof Uint8Array)) {
        if (manifest.kind === "failed") misses.push(manifest.message)
        continue
      }
      await fill(identity, digest, fromRegistry(place, signIn, manifest))
      return true
    }
    if (places.length === 0) misses.push("the policy lists no registry")
    return false
  }

  /** the manifest the identity holds, verified, with every blob present; undefined when not held whole */
  const held = (identity: string, digest: string): Uint8Array | undefined => {
    if (!store.holds(identity, digest)) return undefined
    let manifest: Uint8Array
    try {
      manifest = Fs.readFileSync(store.blobPath(identity, digest))
    } catch {
      return undefined
    }
    const parsed = sha256(manifest) === digest ? parseManifest(manifest) : "changed"
    if (typeof parsed === "string") return undefined
    return [parsed.config, ...parsed.layers].every((d) => store.hasBlob(identity, d)) ? manifest : undefined
  }

  const unpackOnce = (digest: string, layers: Parameters<typeof unpackLayers>[1]): Promise<void> => {
    const target = store.rootfs(digest)
    if (Fs.existsSync(target)) return Promise.resolve()
    let running = unpacking.get(digest)
    if (running === undefined) {
      running = (async () => {
        // unpacked beside the store's rootfs, renamed in whole: a half-unpacked rootfs is never seen there
        const partial = store.temporary("rootfs")
        Fs.mkdirSync(partial, { mode: 0o755 })
        try {
          await unpackLayers(partial, layers)
          Fs.renameSync(partial, target)
        } catch (e) {
          Fs.rmSync(partial, { recursive: true, force: true })
          throw e
        }
        options.onUnpack?.(digest)
      })().finally(() => unpacking.delete(digest))
      unpacking.set(digest, running)
    }
    return running
  }

  const obtainImage = async (identity: string, digest: string, client: ClientImages): Promise<ObtainedImage> => {
    if (!isDigest(digest)) throw new Failure(`${JSON.stringify(digest)} is not a sha256 digest`)
    let manifest = held(identity, digest)
    if (manifest === undefined) {
      // the client first: it is the one asking, and an image it built may be in no registry
      const repository = await client.has(digest)
      const misses: Array<string> = []
      if (repository !== undefined) await fill(identity, digest, fromClient(client, repository, digest))
      else if (!(await fromRegistries(identity, digest, misses))) {
        throw new Failure(
          `no source has the image ${digest}: it is not held for ${identity}, the client does not hold it, and ${misses.join("; ")}`
        )
      }
      manifest = Fs.readFileSync(store.blobPath(identity, digest))
    }
    const parsed = parseManifest(manifest)
    if (typeof parsed === "string") throw new Failure(parsed)
    const config = Fs.readFileSync(store.blobPath(identity, parsed.config.digest))
    const configWrong = verifyBlob(config, parsed.config)
    if (configWrong !== undefined) throw new Failure(`the config in the store is not the image's: ${configWrong}`)
    const run = parseConfig(config)
    if (typeof run === "string") throw new Failure(`the image ${digest}: ${run}`)
    if (run.diffIds.length !== parsed.layers.length) {
      throw new Failure(`the image ${digest}: the config lists ${run.diffIds.length} diff_ids for the manifest's ${parsed.layers.length} layers`)
    }
    const layers = parsed.layers.map((layer, i) => {
      const compression = layerCompression(layer.mediaType)
      if (compression === undefined) throw new Failure(`the layer ${layer.digest} (${i + 1} of ${parsed.layers.length}) is a ${layer.mediaType}, which this server does not unpack`)
      return { file: store.blobPath(identity, layer.digest), digest: layer.digest, compression, diffId: run.diffIds[i]! }
    })
    try {
      await unpackOnce(digest, layers)
    } catch (e) {
      throw new Failure(e instanceof UnpackError ? e.message : `the image ${digest} could not be unpacked: ${(e as Error).message}`)
    }
    store.addToIndex(identity, { mediaType: parsedMediaType(manifest), digest, size: manifest.length })
    return {
      digest,
      manifest,
      config,
      layers: parsed.layers.map((l) => ({ digest: l.digest, mediaType: l.mediaType, size: l.size })),
      blob: (d) =>
        Effect.try({
          try: () => {
            const descriptor = [parsed.config, ...parsed.layers].find((x) => x.digest === d)
            if (descriptor === undefined) throw new Failure(`the image ${digest} has no blob ${d}`)
            const bytes = Fs.readFileSync(store.blobPath(identity, d))
            const wrong = verifyBlob(bytes, descriptor)
            if (wrong !== undefined) throw new Failure(wrong)
            return bytes
          },
          catch: (e) => new ImageError({ message: (e as Error).message })
        }),
      rootfs: store.rootfs(digest),
      entrypoint: run.entrypoint,
      cmd: run.cmd,
      env: run.env,
      workingDir: run.workingDir,
      user: run.user
    }
  }

  return ImageSource.of({
    willSupply: (_identity, digest) => Effect.sync(() => !refusedImages(options.imagePolicy).includes(digest)),
    obtain: (identity, digest, client) =>
      Effect.tryPromise({
        try: () => {
          const key = `${identity}\0${digest}`
          let running = obtaining.get(key)
          if (running === undefined) {
            running = obtainImage(identity, digest, client).finally(() => obtaining.delete(key))
            obtaining.set(key, running)
          }
          return running
        },
        catch: (e) => new ImageError({ message: e instanceof Failure ? e.message : `the image ${digest} could not be obtained: ${e instanceof Error ? e.message : String(e)}` })
      })
  })
}

const parsedMediaType = (manifest: Uint8Array): string => {
  try {
    const m = JSON.parse(Buffer.from(manifest).toString("utf8")) as { mediaType?: unknown }
    return typeof m.mediaType === "string" ? m.mediaType : "application/vnd.oci.image.manifest.v1+json"
  } catch {
    return "application/vnd.oci.image.manifest.v1+json"
  }
}

export const layer = (options: StoreImageSourceOptions) => Layer.sync(ImageSource, () => make(options))
