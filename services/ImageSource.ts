import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/**
 * Obtains the image a manifest digest names for one identity (docs/containers.md section 7):
 * from what the server holds for that identity, from the client through the oci-has,
 * oci-manifest and oci-blob channels the server opens, or from a registry the server's policy
 * lists. What it gives has been verified (the manifest hashes to the digest, the config and every
 * layer to their descriptors, every layer's uncompressed stream to the config's diff_id) and
 * unpacked.
 */
export interface ObtainedImage {
  /** the manifest's digest, as the request named it */
  readonly digest: string
  readonly manifest: Uint8Array
  readonly config: Uint8Array
  readonly layers: ReadonlyArray<{ readonly digest: string; readonly mediaType: string; readonly size: number }>
  /** a verified blob (a layer or the config) by digest */
  readonly blob: (digest: string) => Effect.Effect<Uint8Array, ImageError>
  /**
   * the image's root filesystem, every layer applied: a directory that nothing writes once made
   * (an overlay's lower layer), shared by every container of the image. Owned by the server's
   * user, set-user-id and set-group-id bits removed, no device or FIFO. The memory source (the
   * protocol's tests) unpacks nothing: there it is "".
   */
  readonly rootfs: string
  /** the config's Entrypoint, Cmd and Env (`NAME=VALUE`), each [] when it names none */
  readonly entrypoint: ReadonlyArray<string>
  readonly cmd: ReadonlyArray<string>
  readonly env: ReadonlyArray<string>
  /** the config's WorkingDir, "/" when it names none */
  readonly workingDir: string
  /** the config's User as written, "" or absent when it names none (root) */
  readonly user?: string
}

/** the client's side of obtaining an image: each call is one server channel */
export interface ClientImages {
  /** oci-has: the repository path the client holds the image under, or undefined */
  readonly has: (digest: string) => Promise<string | undefined>
  /** oci-manifest: the bytes the client answered, or undefined (a bare finish, an error) */
  readonly manifest: (repository: string, digest: string) => Promise<Uint8Array | undefined>
  /**
   * oci-blob: each piece the client answers, in order, to WRITE as it comes (WRITE answers false
   * once it takes no more); true when the client finished the channel with bytes, false when
   * it answered with nothing or an error
   */
  readonly blob: (repository: string, digest: string, write: (chunk: Uint8Array) => boolean) => Promise<boolean>
}

export class ImageError extends Schema.TaggedError<ImageError>()("ImageError", {
  message: Schema.String
}) {}

export interface ImageSourceService {
  /** the server's policy: an image it will not supply is refused before anything is held */
  readonly willSupply: (identity: string, digest: string) => Effect.Effect<boolean>
  readonly obtain: (identity: string, digest: string, client: ClientImages) => Effect.Effect<ObtainedImage, ImageError>
}

export class ImageSource extends Context.Tag("ocx2/ImageSource")<ImageSource, ImageSourceService>() {}
