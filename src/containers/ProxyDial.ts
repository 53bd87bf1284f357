import { WebSocket } from "ws"

/**
 * The one WebSocket to a container's proxy (docs/containers.md section 9, step 3). A dial the
 * proxy refuses because it is not listening yet is made again, with no deadline; the first that
 * opens is the connection, and no other is ever made. A handshake the proxy answers with
 * anything but an upgrade is "a proxy that does not accept the connection".
 */
export const dialProxy = async (url: string, cancelled: () => boolean): Promise<WebSocket | string> => {
  let wait = 10
  for (;;) {
    if (cancelled()) return "the run ended while the proxy was dialled"
    const outcome = await new Promise<WebSocket | { retry: boolean; message: string }>((resolve) => {
      // a zero mask: the link to the container's proxy crosses no intermediary that masking
      // protects (it is the server's own socket into the container), and unmasked frames are
      // relayed without another copy
      const socket = new WebSocket(url, { perMessageDeflate: false, generateMask: (mask: Buffer) => void mask.fill(0) })
      socket.once("open", () => resolve(socket))
      socket.once("unexpected-response", (_request, response) => {
        socket.terminate()
        resolve({ retry: false, message: `the proxy did not accept the connection (HTTP ${response.statusCode})` })
      })
      socket.once("error", (error: NodeJS.ErrnoException) => {
        const notYet = error.code === "ECONNREFUSED" || error.code === "ENOENT"
        resolve({ retry: notYet, message: `the proxy did not accept the connection: ${error.message}` })
      })
    })
    if (outcome instanceof WebSocket) return outcome
    if (!outcome.retry) return outcome.message
    await new Promise((r) => setTimeout(r, wait))
    wait = Math.min(wait * 2, 500)
  }
}
