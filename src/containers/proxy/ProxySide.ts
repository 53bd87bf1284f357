import * as Http from "node:http"
import { WebSocketServer, type WebSocket } from "ws"
import type { PeerChannel, Scope } from "../FrameConnection.js"
import { tagged } from "../Frames.js"
import { Answer, ProxyScope } from "../Wire.js"

/**
 * The proxy's side of the container-proxy layer (docs/containers.md section 10), shared by the
 * real proxy's FUSE side inside a container (FuseSide.ts) and the in-process proxy the tests stand:
 * where it listens, and how a scope the server opens is told apart and decoded. What each scope
 * then does is the caller's.
 */
export interface MountRequest {
  readonly id: string
  readonly path: string
  readonly kind: "file" | "directory"
}

export interface ProxyScopeHandlers {
  /** tools::begin; `body` is `{"template","arguments"}` as the server sent it */
  readonly begin: (scope: Scope, body: Buffer) => void
  readonly mount: (scope: Scope, request: MountRequest) => void
  readonly tree: (scope: Scope) => void
}

export const decodeMountRequest = (body: Buffer): MountRequest | undefined => {
  let v: unknown
  try {
    v = JSON.parse(body.toString("utf8"))
  } catch {
    return undefined
  }
  if (typeof v !== "object" || v === null) return undefined
  const o = v as Record<string, unknown>
  if (typeof o.id !== "string" || typeof o.path !== "string" || !o.path.startsWith("/")) return undefined
  if (o.kind !== "file" && o.kind !== "directory") return undefined
  return { id: o.id, path: o.path, kind: o.kind }
}

/** answers a scope with one error and ends it */
export const refuseScope = (scope: Scope, message: string): void => {
  scope.respond(tagged(Answer.error, message))
  scope.finish()
}

/** what the server opened, dispatched by its tag; a scope this layer does not define gets 0x06 */
export const proxyScopes = (handlers: ProxyScopeHandlers) => (scope: Scope): void => {
  const tag = scope.request[0]
  const body = scope.request.subarray(1)
  if (tag === ProxyScope.begin) return handlers.begin(scope, body)
  if (tag === ProxyScope.mount) {
    const request = decodeMountRequest(body)
    if (request === undefined) return refuseScope(scope, `a mount scope's body is {"id","path","kind":"file"|"directory"}`)
    return handlers.mount(scope, request)
  }
  if (tag === ProxyScope.tree) return handlers.tree(scope)
  refuseScope(scope, "this proxy serves no such scope")
}

/** answers a secrets channel of the begin scope and ends it */
export const answerChannel = (channel: PeerChannel, answers: ReadonlyArray<Uint8Array>): void => {
  for (const a of answers) channel.respond(a)
  channel.finish()
}

export interface ProxyListener {
  /** the URL the server dials: ws://HOST:PORT or ws+unix:SOCKET:/ */
  readonly url: string
  readonly port: number | undefined
  /** stops listening; `terminate` also ends the connections it accepted */
  readonly close: (terminate?: boolean) => Promise<void>
}

export interface ListenOptions {
  /** a TCP port (0: any free one); ignored when unixSocket is given */
  readonly port?: number
  /** the address to listen on; undefined: every address of the (container's) network */
  readonly host?: string
  readonly unixSocket?: string
  /** false answers the handshake with HTTP 401 */
  readonly accept?: () => boolean
  readonly onConnection: (socket: WebSocket) => void
}

/** listens for the server's WebSocket: frames as they came (no permessage-deflate) */
export const listenProxy = async (options: ListenOptions): Promise<ProxyListener> => {
  const http = Http.createServer()
  const wss = new WebSocketServer({
    server: http,
    perMessageDeflate: false,
    // the server relays a client's message of up to 256 MiB as it came (docs/containers.md section 1); ws's default is 100 MiB
    maxPayload: 256 * 1024 * 1024,
    ...(options.accept !== undefined ? { verifyClient: options.accept } : {})
  })
  wss.on("connection", (socket) => options.onConnection(socket))
  await new Promise<void>((resolve, reject) => {
    http.once("error", reject)
    const done = () => {
      http.removeListener("error", reject)
      resolve()
    }
    if (options.unixSocket !== undefined) http.listen(options.unixSocket, done)
    else if (options.host !== undefined) http.listen(options.port ?? 0, options.host, done)
    else http.listen(options.port ?? 0, done)
  })
  const address = http.address()
  const port = typeof address === "object" && address !== null ? address.port : undefined
  const url = options.unixSocket !== undefined ? `ws+unix:${options.unixSocket}:/` : `ws://${options.host ?? "127.0.0.1"}:${port}`
  let closed: Promise<void> | undefined
  return {
    url,
    port,
    close: (terminate = false) => {
      if (terminate) for (const c of wss.clients) c.terminate()
      closed ??= new Promise<void>((resolve) => {
        // no new connection from now on; each callback comes once the connections it has ended
        let waiting = 2
        const one = () => void (--waiting === 0 && resolve())
        http.close(one)
        wss.close(one)
      })
      return closed
    }
  }
}
