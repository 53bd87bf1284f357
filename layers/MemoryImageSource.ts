import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { ImageError, ImageSource, type ClientImages, type ObtainedImage } from "../services/ImageSource.js"
import { parseManifest, verifyBlob } from "../src/containers/OciImage.js"

/**
 * Images held in memory, per identity: what an identity fetched from its client once is held
 * for that identity only (never for another). Obtains from the client through the server
 * channels and verifies every byte against its digest. Part 2's store on disk replaces it.
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
      const bytes = await client.blob(repository, descriptor.digest)
      if (bytes === undefined) return fail(`the client did not give the blob ${descriptor.digest}`)
      const wrong = verifyBlob(bytes, descriptor)
      if (wrong !== undefined) return fail(wrong)
      blobs.set(descriptor.digest, bytes)
    }
    return {
      digest,
      manifest,
      config: blobs.get(parsed.config.digest)!,
      layers: parsed.layers.map((l) => ({ digest: l.digest, mediaType: l.mediaType, size: l.size })),
      blob: (d) => {
        const b = blobs.get(d)
        return b === undefined ? Effect.fail(fail(`the image ${digest} has no blob ${d}`)) : Effect.succeed(b)
      }
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
