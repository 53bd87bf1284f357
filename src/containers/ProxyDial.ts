import { dialWebSocket, type WireSocket } from "./WebSocketWire.js"

/**
 * The one WebSocket to a container's proxy (docs/containers.md section 9, step 3). A dial the
 * proxy refuses because it is not listening yet is made again, with no deadline; the first that
 * opens is the connection, and no other is ever made. A handshake the proxy answers with
 * anything but an upgrade is "a proxy that does not accept the connection". The server's own
 * framing (WebSocketWire.ts) dials it: a zero mask, since the link to the container's proxy
 * crosses no intermediary that masking protects (it is the server's own socket into the
 * container), and unmasked frames are relayed without another copy.
 */
export const dialProxy = async (url: string, cancelled: () => boolean): Promise<WireSocket | string> => {
  let wait = 10
  for (;;) {
    if (cancelled()) return "the run ended while the proxy was dialled"
    const outcome = await dialWebSocket(url)
    if (!("message" in outcome)) return outcome
    if ("status" in outcome) return `the proxy did not accept the connection (${outcome.status === 101 ? outcome.message : `HTTP ${outcome.status}`})`
    if (outcome.code !== "ECONNREFUSED" && outcome.code !== "ENOENT") return `the proxy did not accept the connection: ${outcome.message}`
    await new Promise((r) => setTimeout(r, wait))
    wait = Math.min(wait * 2, 500)
  }
}
