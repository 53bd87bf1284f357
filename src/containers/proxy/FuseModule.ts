import { mountFuse } from "../fuse/Mount.js"
import type { MountFuse } from "./Fuse.js"

/**
 * The container proxy's FUSE module: each mount scope's mount made on /dev/fuse by the JavaScript
 * FUSE session (src/containers/fuse/), its asks relayed on the scope and answered with the
 * client's first response on each ask's channel. The static mount helper is read from beside the
 * proxy's bundle: the kit carries it at /.proxy/fusemountfd.
 */
export const fuseModule: MountFuse = async (request) => {
  try {
    const mount = await mountFuse({
      id: request.id,
      target: request.target,
      kind: request.kind,
      ask: async (payload) => {
        for await (const answer of request.ask(payload)) return answer
        return undefined
      }
    })
    return { mounted: true, unmount: () => mount.unmount() }
  } catch (e) {
    return { mounted: false, message: e instanceof Error ? e.message : String(e) }
  }
}
