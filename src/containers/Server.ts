import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import type * as Http from "node:http"
import * as Path from "node:path"
import type { FrameConnection } from "./FrameConnection.js"
import { isIdentity } from "./ContainerNames.js"
import type { ContainerRun } from "./ContainerRun.js"
import { serveConnection } from "./ServeConnection.js"
import type { ServerParts } from "./ServerParts.js"
import { warmUpRunPath } from "./WarmUp.js"
import { acceptWebSocket, webSocketHttpServer, type WireSocket } from "./WebSocketWire.js"

/**
 * The tool-container server's WebSocket side (docs/containers.md sections 1 to 3): each
 * connection authorizes with its token, then every scope it opens is served by its endpoint.
 */
export { serverVersion } from "./ServeConnection.js"

export interface ContainersServerOptions {
  readonly root: string
  readonly parts: ServerParts
  /** listen here; or attach to an HTTP server the caller owns */
  readonly port?: number
  readonly host?: string
  readonly server?: Http.Server
}

export interface ContainersServer {
  readonly port: number
  readonly runs: ReadonlySet<ContainerRun>
  readonly close: () => Promise<void>
}

/** ROOT/tokens: `IDENTITY SHA256-HEX` lines; the identity whose hash matches the token, read at each Auth */
export const identityOfToken = (root: string, token: Buffer): string | undefined => {
  let text: string
  try {
    text = Fs.readFileSync(Path.join(root, "tokens"), "utf8")
  } catch {
    return undefined
  }
  const hash = Crypto.createHash("sha256").update(token).digest()
  let found: string | undefined
  for (const line of text.split("\n")) {
    const [identity, hex] = line.trim().split(/\s+/)
    if (identity === undefined || hex === undefined || !isIdentity(identity) || !/^[0-9a-f]{64}$/.test(hex)) continue
    // every line compared, in constant time each: how long it takes tells nothing of which matched
    if (Crypto.timingSafeEqual(Buffer.from(hex, "hex"), hash) && found === undefined) found = identity
  }
  return found
}

/** mints a token for IDENTITY: appends its line to ROOT/tokens and gives the token, which is kept nowhere */
export const mintToken = (root: string, identity: string): string => {
  if (!isIdentity(identity)) throw new Error(`${JSON.stringify(identity)} is not an identity (1 to 64 of A-Z a-z 0-9 . _ -, not starting with .)`)
  const token = Crypto.randomBytes(32).toString("base64url")
  const hash = Crypto.createHash("sha256").update(token).digest("hex")
  Fs.mkdirSync(root, { recursive: true })
  Fs.appendFileSync(Path.join(root, "tokens"), `${identity} ${hash}\n`, { mode: 0o600 })
  return token
}

/** the longest message a client may send: a frame past it closes the connection with 1009 */
export const maxMessage = 256 * 1024 * 1024

export const startContainersServer = async (options: ContainersServerOptions): Promise<ContainersServer> => {
  // the server's own path to the id gone through once before it listens (WarmUp.ts); never waited on for long
  await Promise.race([warmUpRunPath(options.parts.capabilities), new Promise<void>((resolve) => setTimeout(resolve, 2000).unref())])
  const runs = new Set<ContainerRun>()
  const http = options.server ?? webSocketHttpServer()
  const sockets = new Map<FrameConnection, WireSocket>()
  acceptWebSocket(http, (socket) => {
    const connection = serveConnection(socket, options.parts, runs, (token) => identityOfToken(options.root, token), () => sockets.delete(connection))
    sockets.set(connection, socket)
  }, { maxPayload: maxMessage })
  if (options.server === undefined) {
    await new Promise<void>((resolve, reject) => {
      http.once("error", reject)
      http.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => (http.removeListener("error", reject), resolve()))
    })
  }
  const address = http.address()
  return {
    port: typeof address === "object" && address !== null ? address.port : 0,
    runs,
    close: async () => {
      const wires = [...sockets.values()]
      for (const c of sockets.keys()) c.close(1001, "the server is going away")
      await Promise.all([...runs].map((r) => r.end()))
      await options.parts.closeDeployer?.()
      // the server's stop does not wait on a client that never answers its close: each socket
      // is let go once the close has left, so that closing the HTTP server below can end
      await Promise.all(wires.map((w) => w.whenFlushed().then(() => w.terminate())))
      // a server the caller gave stays the caller's to close
      if (options.server === undefined) await new Promise<void>((resolve) => http.close(() => resolve()))
    }
  }
}

