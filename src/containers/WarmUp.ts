import * as Crypto from "node:crypto"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Os from "node:os"
import * as Path from "node:path"
import { WebSocket } from "ws"
import type { ObtainedImage } from "../../services/ImageSource.js"
import type { Capabilities } from "./Capabilities.js"
import { FrameConnection } from "./FrameConnection.js"
import { tagged } from "./Frames.js"
import { listenProxy, proxyScopes, refuseScope } from "./proxy/ProxySide.js"
import { Running } from "./Running.js"
import type { ContainerRun } from "./ContainerRun.js"
import { acceptWebSocket, webSocketHttpServer } from "./WebSocketWire.js"
import { serveConnection } from "./ServeConnection.js"
import type { ServerParts } from "./ServerParts.js"
import { VolumeHolds } from "./VolumeHolds.js"
import { VolumeStore } from "./VolumeStore.js"
import { Answer, ClientChannel, Endpoint } from "./Wire.js"

/**
 * The first request a server serves was measured half again as slow as the next ones with its
 * spare standing (bench/containers-deploy, "first request after a restart"): every piece of the
 * server's path from the request to the id ran for the first time in that process, its code
 * compiled and optimised then, the first WebSocket the server dials (its HTTP upgrade) the
 * longest of them. Before the server listens it serves one run of its own, end to end and with
 * nothing of a client: a client connection on a Unix socket in a directory of its own (mode 0700),
 * served as the server serves every connection (ServeConnection.ts) and authenticated by a token
 * made for it, the run's steps with no volume, an image and a deployer
 * that are stand-ins, a proxy of its own that answers Begun, the id, and the stop. A warm-up that
 * fails or hangs costs the first request its time, nothing else (the caller waits a bounded time).
 * True when the run reached its id and its end.
 */
const request = JSON.stringify({ image: `sha256:${"0".repeat(64)}`, template: "warm-up", memory: 1 << 28, disk: 1 << 26, arguments: { warm: true } })

const listen = (server: Http.Server, socket: string) =>
  new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(socket, () => resolve())
  })

export const warmUpRunPath = async (capabilities: Capabilities): Promise<boolean> => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-warm-"))
  const closing: Array<() => unknown> = []
  try {
    const proxy = await listenProxy({
      unixSocket: Path.join(dir, "proxy.sock"),
      onConnection: (socket) => {
        const answering = new FrameConnection(socket, {
          role: "responder",
          onScope: proxyScopes({
            begin: (scope) => scope.respond(tagged(Answer.begun, `{"secrets":{}}`)),
            mount: (scope) => refuseScope(scope, "warm-up"),
            tree: (scope) => refuseScope(scope, "warm-up")
          })
        })
        closing.push(() => answering.close())
      }
    })
    closing.push(() => proxy.close(true))
    const parts: ServerParts = {
      volumes: new VolumeStore(dir),
      holds: new VolumeHolds(capabilities),
      running: new Running(),
      capabilities,
      images: { willSupply: async () => true, obtain: async (_identity, digest) => ({ digest }) as ObtainedImage },
      deploy: async () => ({ proxyUrl: proxy.url, stop: Effect.void }),
      stopDeployment: async () => {}
    }
    const token = Crypto.randomBytes(16)
    const http = webSocketHttpServer()
    closing.push(() => http.close())
    const runs = new Set<ContainerRun>()
    acceptWebSocket(http, (socket) => {
      const connection = serveConnection(socket, parts, runs, (given) => (given.equals(token) ? "warm-up" : undefined))
      closing.push(() => connection.close())
    })
    await listen(http, Path.join(dir, "server.sock"))
    const socket = new WebSocket(`ws+unix:${Path.join(dir, "server.sock")}:/`, { perMessageDeflate: false })
    await new Promise<void>((resolve, reject) => (socket.once("open", () => resolve()), socket.once("error", reject)))
    const client = new FrameConnection(socket, { role: "opener" })
    closing.push(() => client.close())
    client.sendAuth(token)
    const scope = client.openScope(tagged(Endpoint.toolsRun, request))
    const first = await scope.responses.take()
    if (first?.[0] !== Answer.id) return false
    scope.openChannel(tagged(ClientChannel.stop))
    await Promise.all([...runs].map((r) => r.finished))
    return true
  } catch {
    // the first request is slower, and works as well
    return false
  } finally {
    for (const close of closing.reverse()) {
      try {
        await close()
      } catch {
        // closed already
      }
    }
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}
