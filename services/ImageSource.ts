import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/**
 * Obtains the image a manifest digest names for one identity (docs/containers.md section 7):
 * from what it holds for that identity, or from the client through the oci-has, oci-manifest
 * and oci-blob channels the server opens. What it gives has been verified: the manifest hashes
 * to the digest, the config and every layer to their descriptors.
 */
export interface ObtainedImage {
  readonly digest: string
  readonly manifest: Uint8Array
  readonly config: Uint8Array
  readonly layers: ReadonlyArray<{ readonly digest: string; readonly mediaType: string; readonly size: number }>
  /** a verified blob (a layer or the config) by digest */
  readonly blob: (digest: string) => Effect.Effect<Uint8Array, ImageError>
}

/** the client's side of obtaining an image: each call is one server channel */
export interface ClientImages {
  /** oci-has: the repository path the client holds the image under, or undefined */
  readonly has: (digest: string) => Promise<string | undefined>
  /** oci-manifest / oci-blob: the bytes the client answered, or undefined (a bare finish, an error) */
  readonly manifest: (repository: string, digest: string) => Promise<Uint8Array | undefined>
  readonly blob: (repository: string, digest: string) => Promise<Uint8Array | undefined>
}

export class ImageError extends Schema.TaggedError<ImageError>()("ImageError", {
  message: Schema.String
}) {}

export class ImageSource extends Context.Tag("ocx2/ImageSource")<
  ImageSource,
  {
    /** the server's policy: an image it will not supply is refused before anything is held */
    readonly willSupply: (identity: string, digest: string) => Effect.Effect<boolean>
    readonly obtain: (identity: string, digest: string, client: ClientImages) => Effect.Effect<ObtainedImage, ImageError>
  }
>() {}
