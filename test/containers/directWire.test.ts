import * as Crypto from "node:crypto"
import type * as Net from "node:net"
import { describe, expect, it, vi } from "vitest"
import { WebSocket, WebSocketServer } from "ws"
import { FrameConnection, type Scope } from "../../src/containers/FrameConnection.js"
import { encodeFrame, FrameType, tagged } from "../../src/containers/Frames.js"
import { until } from "./world.js"

vi.setConfig({ testTimeout: 300_000 })

/**
 * The server reads its frames off the TCP socket itself (src/containers/DirectWire.ts) and hands
 * ws everything that is not one whole binary message. Frames are written here byte by byte as a
 * client would put them on the wire, cut anywhere, so every way a read can split or join them is
 * met; what ws owns (pings, fragments, text, the size limit, the masking rule) must behave as
 * without the direct path.
 */

/** one WebSocket frame as a client sends it: FIRST is FIN, RSV and the opcode; masked unless MASK is null */
const wsFrame = (first: number, payload: Buffer, mask: Buffer | null = Crypto.randomBytes(4)): Buffer => {
  const length = payload.length
  const size = length < 126 ? 2 : length < 65536 ? 4 : 10
  const header = Buffer.alloc(size + (mask === null ? 0 : 4))
  header[0] = first
  const maskBit = mask === null ? 0 : 0x80
  if (size === 2) header[1] = length | maskBit
  else if (size === 4) {
    header[1] = 126 | maskBit
    header.writeUInt16BE(length, 2)
  } else {
    header[1] = 127 | maskBit
    header.writeUInt32BE(0, 2)
    header.writeUInt32BE(length, 6)
  }
  if (mask === null) return Buffer.concat([header, payload])
  mask.copy(header, size)
  return Buffer.concat([header, Buffer.from(payload.map((b, i) => b ^ mask[i & 3]!))])
}
const binary = 0x82

const serve = async (maxPayload = 1024 * 1024) => {
  const wss = new WebSocketServer({ port: 0, host: "127.0.0.1", perMessageDeflate: false, maxPayload })
  await new Promise<void>((resolve) => wss.once("listening", resolve))
  const scopes: Array<Scope> = []
  const closes: Array<number> = []
  const accepted = new Promise<FrameConnection>((resolve) =>
    wss.once("connection", (socket) =>
      resolve(new FrameConnection(socket, { role: "responder", direct: true, onScope: (s) => scopes.push(s), onClose: (code) => closes.push(code) }))
    )
  )
  const socket = new WebSocket(`ws://127.0.0.1:${(wss.address() as { port: number }).port}`, { perMessageDeflate: false })
  await new Promise<void>((resolve) => socket.once("open", () => resolve()))
  const server = await accepted
  expect(server.isDirect).toBe(true)
  const raw = (socket as unknown as { _socket: Net.Socket })._socket
  let clientClose: number | undefined
  socket.on("close", (code) => (clientClose = code))
  const write = (bytes: Buffer) => new Promise<void>((resolve) => raw.write(bytes, () => resolve()))
  const stop = async () => {
    socket.terminate()
    await new Promise<void>((resolve) => wss.close(() => resolve()))
  }
  return { socket, server, scopes, closes, write, clientClose: () => clientClose, stop }
}

describe("the server's direct framing", () => {
  it("frames cut anywhere and joined any way arrive whole, in order, once; pings, fragments and frames of any length among them", async () => {
    for (let trial = 0; trial < 20; trial++) {
      const s = await serve()
      try {
        let pongs = 0
        s.socket.on("pong", () => pongs++)
        const payloads = Array.from({ length: 40 }, (_, i) => Crypto.randomBytes([0, 1, 115, 116, 117, 65_526, 65_527, 70_000, 300][i % 9]!))
        const bytes: Array<Buffer> = [wsFrame(binary, encodeFrame(FrameType.Request, 1, 0, tagged(1, "{}")))]
        for (const [i, payload] of payloads.entries()) {
          const frame = encodeFrame(FrameType.ChannelRequest, 1, i + 1, payload)
          if (i % 7 === 3) {
            // a message in three fragments, a ping between them: ws's to put together, in its place
            const a = Math.floor(frame.length / 3)
            bytes.push(wsFrame(0x02, frame.subarray(0, a)), wsFrame(0x89, Buffer.from("p")), wsFrame(0x00, frame.subarray(a, 2 * a)), wsFrame(0x80, frame.subarray(2 * a)))
          } else bytes.push(wsFrame(binary, frame, i % 5 === 0 ? Buffer.alloc(4) : undefined))
          if (i % 11 === 5) bytes.push(wsFrame(0x89, Buffer.alloc(0)))
        }
        const all = Buffer.concat(bytes)
        for (let at = 0; at < all.length;) {
          const cut = Math.random() < 0.3 ? 1 + Math.floor(Math.random() * 12) : 1 + Math.floor(Math.random() * 40_000)
          await s.write(all.subarray(at, at + cut))
          at += cut
        }
        await until(() => s.scopes.length === 1, "the scope")
        const requests: Array<Buffer> = []
        s.scopes[0]!.peerOpened.listen((c) => requests.push(c.request), () => {})
        const pings = payloads.filter((_, i) => i % 7 === 3).length + payloads.filter((_, i) => i % 11 === 5).length
        await until(() => requests.length === payloads.length && pongs === pings, "every channel and every pong")
        for (const [i, request] of requests.entries()) expect(request.equals(payloads[i]!), `the request ${i} of trial ${trial}`).toBe(true)
        expect(s.closes).toEqual([])
      } finally {
        await s.stop()
      }
    }
  })

  it("what it sends arrives as ws sends it, of any length", async () => {
    const s = await serve()
    try {
      const client = new FrameConnection(s.socket, { role: "opener" })
      const scope = client.openScope(tagged(1, "{}"))
      await until(() => s.scopes.length === 1, "the scope")
      const sent = [0, 1, 116, 117, 500, 65_526, 65_527, 200_000].map((n) => Crypto.randomBytes(n))
      for (const payload of sent) s.scopes[0]!.respond(payload)
      for (const [i, payload] of sent.entries()) expect((await scope.responses.take())?.equals(payload), `response ${i}`).toBe(true)
    } finally {
      await s.stop()
    }
  })

  it("a text message closes with 1003, an unmasked frame with 1002, a frame past the limit with 1009, and nothing behind them is read", async () => {
    const cases: Array<[string, (s: Awaited<ReturnType<typeof serve>>) => Buffer, number]> = [
      ["text", () => wsFrame(0x81, encodeFrame(FrameType.Request, 1, 0, tagged(1, "{}"))), 1003],
      ["unmasked", () => wsFrame(binary, encodeFrame(FrameType.Request, 1, 0, tagged(1, "{}")), null), 1002],
      ["a reserved bit", () => wsFrame(binary | 0x10, encodeFrame(FrameType.Request, 1, 0, tagged(1, "{}"))), 1002],
      ["past the limit", () => wsFrame(binary, Buffer.alloc(64 * 1024 + 1)), 1009],
      ["past any limit", () => Buffer.from([binary, 0xff, 0, 0, 1, 0, 0, 0, 0, 0, 1, 2, 3, 4]), 1009]
    ]
    for (const [name, bad, code] of cases) {
      const s = await serve(64 * 1024)
      try {
        const behind = wsFrame(binary, encodeFrame(FrameType.Request, 1, 0, tagged(1, "{}")))
        await s.write(Buffer.concat([bad(s), behind]))
        await until(() => s.clientClose() !== undefined, `the close after ${name}`)
        expect(s.clientClose(), name).toBe(code)
        expect(s.scopes, name).toEqual([])
      } finally {
        await s.stop()
      }
    }
  })
})
