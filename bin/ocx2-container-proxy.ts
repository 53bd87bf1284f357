// The container proxy's FUSE side (docs/containers.md section 10, "FUSE mounts"): the C proxy
// (src/containers/proxy/proxy.c, dist/ocx2-container-proxy-c), every container's first process,
// starts it with the kit's Node the first time the server asks for a FUSE mount, and hands it the
// frames of the mount scopes on descriptor 3. It reads no environment and takes no argument.
import * as Net from "node:net"
import { serveFuseSide } from "../src/containers/proxy/FuseSide.js"
import { fuseModule } from "../src/containers/proxy/FuseModule.js"

const log = (line: string) => process.stderr.write(`ocx2-container-proxy (FUSE side): ${line}\n`)
let socket: Net.Socket
try {
  socket = new Net.Socket({ fd: 3, readable: true, writable: true })
} catch (e) {
  log(`descriptor 3 is not the C proxy's socket: ${(e as Error).message}`)
  process.exit(1)
}
serveFuseSide({ socket, mountFuse: fuseModule, log }).then(
  () => process.exit(0),
  (e: unknown) => {
    log(e instanceof Error ? e.message : String(e))
    process.exit(1)
  }
)
