import type * as Net from "node:net"
import { FrameConnection, type Scope } from "../FrameConnection.js"
import { tagged } from "../Frames.js"
import { Answer } from "../Wire.js"
import type { MountFuse } from "./Fuse.js"
import { proxyScopes, refuseScope, type MountRequest } from "./ProxySide.js"
import { streamWire } from "./StreamWire.js"

/**
 * The container proxy's FUSE side (docs/containers.md section 10, "FUSE mounts"): the C proxy
 * (proxy.c) starts it, the kit's Node running bin/ocx2-container-proxy.ts, the first time the
 * server opens a mount scope, and hands it every frame of the mount scopes on a socket pair
 * (StreamWire.ts). Each mount is made by the FUSE module on /dev/fuse and its asks relayed as
 * channels on its scope. When the C proxy ends (the server's connection ended), the socket pair
 * closes: every mount is unmounted and this ends.
 */
export interface FuseSideOptions {
  readonly socket: Net.Socket
  readonly mountFuse: MountFuse
  readonly log?: (line: string) => void
}

export const serveFuseSide = (options: FuseSideOptions): Promise<void> =>
  new Promise<void>((resolve) => {
    const unmounts: Array<() => Promise<void>> = []
    const onMount = async (scope: Scope, request: MountRequest): Promise<void> => {
      const result = await options.mountFuse({
        id: request.id,
        target: request.path,
        kind: request.kind,
        ask: (payload) => {
          const channel = scope.openChannel(payload)
          return {
            [Symbol.asyncIterator]: () => ({
              next: async () => {
                const value = await channel.responses.take()
                return value === undefined ? { done: true as const, value: undefined } : { done: false as const, value }
              }
            })
          }
        }
      })
      if (!result.mounted) return refuseScope(scope, result.message)
      unmounts.push(result.unmount)
      scope.respond(tagged(Answer.ok))
    }
    new FrameConnection(streamWire(options.socket), {
      role: "responder",
      onScope: proxyScopes({
        begin: (scope) => refuseScope(scope, "the FUSE side serves no begin"),
        mount: (scope, request) => void onMount(scope, request),
        tree: (scope) => refuseScope(scope, "this proxy serves no tree: FUSE is not available in it yet")
      }),
      onClose: () => {
        void (async () => {
          for (const unmount of unmounts.splice(0)) await unmount().catch(() => {})
          resolve()
        })()
      }
    })
  })
