/**
 * What the container proxy asks of a FUSE module: make one mount inside the container and relay
 * each of its asks to the client. The proxy owns the wire (the mount scope, its answer, the
 * channels); the module (FuseModule.ts) owns /dev/fuse and the kernel's protocol.
 */
export interface FuseMountRequest {
  /** the mount's id, as the request named it */
  readonly id: string
  /** where it is mounted inside the container: an absolute path */
  readonly target: string
  readonly kind: "file" | "directory"
  /**
   * Relays one ask to the client: opens one channel on the mount's scope whose request is
   * `payload` exactly (its first byte the tag, 16 or more; docs/containers.md section 8 has the
   * ask start with `[id length: u16][id]` after it), and gives every response the client sent, in
   * order, ending at the channel's finish (at once when the mount's scope or connection ended).
   * Never sent twice, never altered.
   */
  readonly ask: (payload: Uint8Array) => AsyncIterable<Buffer>
}

export type FuseMountResult =
  /** mounted; `unmount` is called when the scope or the connection ends */
  | { readonly mounted: true; readonly unmount: () => Promise<void> }
  | { readonly mounted: false; readonly message: string }

export type MountFuse = (request: FuseMountRequest) => Promise<FuseMountResult>
