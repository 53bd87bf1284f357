import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { ImageError, ImageSource, type ClientImages, type ObtainedImage } from "../services/ImageSource.js"
import { parseConfig, parseManifest, verifyBlob } from "../src/containers/OciImage.js"

/**
 * Images held in memory, per identity, for the protocol's tests and `serve --images memory`:
 * what an identity fetched from its client once is held for that identity only (never for
 * another). Obtains from the client through the server channels and verifies every byte against
 * its digest, but unpacks nothing (its layers need not be tars): the image's `rootfs` is "", for
 * a deployer that runs no image. The server's own source is layers/StoreImageSource.ts.
 */
export interface MemoryImageSourceOptions {
  /** digests the server will not supply (its policy) */
  readonly refuse?: ReadonlyArray<string>
}

export const make = (options: MemoryImageSourceOptions = {}) => {
  const held = new Map<string, ObtainedImage>()
  const refused = new Set(options.refuse ?? [])
  const fail = (message: string) => new ImageError({ message })

  const fromClient = async (digest: string, client: ClientImages): Promise<ObtainedImage | ImageError> => {
    const repository = await client.has(digest)
    if (repository === undefined) return fail(`no source has the image ${digest}`)
    const manifest = await client.manifest(repository, digest)
    if (manifest === undefined) return fail(`the client did not give the manifest ${digest}`)
    const wrongManifest = verifyBlob(manifest, { digest })
    if (wrongManifest !== undefined) return fail(`the manifest is not the image ${digest}: ${wrongManifest}`)
    const parsed = parseManifest(manifest)
    if (typeof parsed === "string") return fail(parsed)
    const blobs = new Map<string, Uint8Array>()
    for (const descriptor of [parsed.config, ...parsed.layers]) {
      if (blobs.has(descriptor.digest)) continue
      const pieces: Array<Uint8Array> = []
      const gave = await client.blob(repository, descriptor.digest, (piece) => pieces.push(piece) > 0)
      if (!gave) return fail(`the client did not give the blob ${descriptor.digest}`)
      const bytes = Buffer.concat(pieces)
      const wrong = verifyBlob(bytes, descriptor)
      if (wrong !== undefined) return fail(wrong)
      blobs.set(descriptor.digest, bytes)
    }
    const config = blobs.get(parsed.config.digest)!
    const run = parseConfig(config)
    return {
      digest,
      manifest,
      config,
      layers: parsed.layers.map((l) => ({ digest: l.digest, mediaType: l.mediaType, size: l.size })),
      blob: (d) => {
        const b = blobs.get(d)
        return b === undefined ? Effect.fail(fail(`the image ${digest} has no blob ${d}`)) : Effect.succeed(b)
      },
      rootfs: "",
      entrypoint: typeof run === "string" ? [] : run.entrypoint,
      cmd: typeof run === "string" ? [] : run.cmd,
      env: typeof run === "string" ? [] : run.env,
      workingDir: typeof run === "string" ? "/" : run.workingDir
    }
  }

  return ImageSource.of({
    willSupply: (_identity, digest) => Effect.succeed(!refused.has(digest)),
    obtain: (identity, digest, client) =>
      Effect.suspend(() => {
        const key = `${identity}\0${digest}`
        const image = held.get(key)
        if (image !== undefined) return Effect.succeed(image)
        return Effect.promise(() => fromClient(digest, client)).pipe(
          Effect.flatMap((got) => (got instanceof ImageError ? Effect.fail(got) : Effect.succeed(got))),
          Effect.tap((got) => Effect.sync(() => held.set(key, got)))
        )
      })
  })
}

export const layer = (options: MemoryImageSourceOptions = {}) => Layer.sync(ImageSource, () => make(options))
