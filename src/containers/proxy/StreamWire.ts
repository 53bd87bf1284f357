import type * as Net from "node:net"
import type { AttachableWire, MessageWire } from "../FrameConnection.js"
import { encodeFrame } from "../Frames.js"

/**
 * The frames of the container proxy's FUSE side (bin/ocx2-container-proxy.ts): the C proxy
 * (src/containers/proxy/proxy.c) hands it every frame of the mount scopes on a socket pair, each
 * as `[length: u32 big-endian][frame]`, and sends on to the server each frame it gets back the
 * same way, as it came. No WebSocket here: the C proxy holds the server's one connection.
 */
export const streamWire = (socket: Net.Socket): AttachableWire => ({
  attach: (onMessage, onClose): MessageWire => {
    let pending: Array<Buffer> = []
    let closed = false
    const close = (code: number) => {
      if (closed) return
      closed = true
      onClose(code)
    }
    socket.on("data", (chunk: Buffer) => {
      pending.push(chunk)
      let all = pending.length === 1 ? pending[0]! : Buffer.concat(pending)
      let at = 0
      while (all.length - at >= 4) {
        const length = all.readUInt32BE(at)
        if (all.length - at - 4 < length) break
        onMessage(all.subarray(at + 4, at + 4 + length), true)
        at += 4 + length
      }
      all = all.subarray(at)
      pending = all.length === 0 ? [] : [all]
    })
    socket.on("close", () => close(1006))
    socket.on("error", () => close(1006))
    return {
      get isOpen() {
        return !closed && !socket.destroyed
      },
      get bufferedAmount() {
        return socket.writableLength
      },
      sendFrame: (type, scope, channel, payload) => {
        const frame = encodeFrame(type, scope, channel, payload)
        const length = Buffer.allocUnsafe(4)
        length.writeUInt32BE(frame.length)
        socket.write(Buffer.concat([length, frame]))
      },
      corkTick: () => {},
      whenUnder: (limit) =>
        socket.writableLength < limit || closed ? Promise.resolve() : new Promise((resolve) => socket.once("drain", () => resolve())),
      pause: () => socket.pause(),
      resume: () => socket.resume(),
      close: () => socket.end(),
      terminate: () => socket.destroy()
    }
  }
})
