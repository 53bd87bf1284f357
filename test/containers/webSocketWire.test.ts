import * as Crypto from "node:crypto"
import * as Http from "node:http"
import * as Net from "node:net"
import { describe, expect, it, vi } from "vitest"
import { WebSocket, WebSocketServer } from "ws"
import { FrameConnection, type Scope } from "../../src/containers/FrameConnection.js"
import { encodeFrame, FrameType, tagged } from "../../src/containers/Frames.js"
import { acceptWebSocket, dialWebSocket, webSocketHttpServer, WireSocket } from "../../src/containers/WebSocketWire.js"
import { makeWorld, until } from "./world.js"

vi.setConfig({ testTimeout: 300_000 })

/**
 * The server's own WebSocket (src/containers/WebSocketWire.ts), RFC 6455 on the socket of the
 * HTTP upgrade: against a client written here byte by byte (frames cut anywhere, the rules of
 * RFC 6455 broken one by one), against `ws` as a client, and dialling `ws` as a server.
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
const closeFrame = (code: number, reason = "") => wsFrame(0x88, Buffer.concat([Buffer.from([code >> 8, code & 0xff]), Buffer.from(reason)]))

/** the unmasked frames a server sent, read from its bytes: opcode and payload of each whole one */
const serverFrames = (bytes: Buffer): Array<{ opcode: number; fin: boolean; payload: Buffer }> => {
  const out: Array<{ opcode: number; fin: boolean; payload: Buffer }> = []
  let at = 0
  while (at + 2 <= bytes.length) {
    let length = bytes[at + 1]! & 0x7f
    let header = 2
    if (length === 126) {
      length = bytes.readUInt16BE(at + 2)
      header = 4
    } else if (length === 127) {
      length = bytes.readUInt32BE(at + 6)
      header = 10
    }
    if (at + header + length > bytes.length) break
    out.push({ opcode: bytes[at]! & 0x0f, fin: (bytes[at]! & 0x80) !== 0, payload: bytes.subarray(at + header, at + header + length) })
    at += header + length
  }
  return out
}

/** the server's framing with a frame connection on it, and a client that is a bare TCP socket doing the handshake by hand */
const serve = async (maxPayload = 1024 * 1024) => {
  const http = webSocketHttpServer()
  const scopes: Array<Scope> = []
  const closes: Array<number> = []
  const connections: Array<FrameConnection> = []
  acceptWebSocket(http, (socket) => {
    connections.push(new FrameConnection(socket, { role: "responder", onScope: (s) => scopes.push(s), onClose: (code) => closes.push(code) }))
  }, { maxPayload })
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve))
  const port = (http.address() as { port: number }).port
  const raw = Net.connect(port, "127.0.0.1")
  await new Promise<void>((resolve) => raw.once("connect", () => resolve()))
  const key = Crypto.randomBytes(16).toString("base64")
  raw.write(`GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`)
  let received = Buffer.alloc(0)
  let handshake = ""
  let ended = false
  raw.on("data", (d: Buffer) => {
    if (handshake === "") {
      const all = Buffer.concat([received, d])
      const end = all.indexOf("\r\n\r\n")
      if (end < 0) return void (received = all)
      handshake = all.subarray(0, end).toString()
      received = all.subarray(end + 4)
      return
    }
    received = Buffer.concat([received, d])
  })
  raw.on("close", () => (ended = true))
  await until(() => handshake !== "", "the handshake")
  const accept = Crypto.createHash("sha1").update(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64")
  expect(handshake).toContain(`Sec-WebSocket-Accept: ${accept}`)
  expect(handshake.toLowerCase()).not.toContain("sec-websocket-extensions")
  const write = (bytes: Buffer) => new Promise<void>((resolve) => raw.write(bytes, () => resolve()))
  const frames = () => serverFrames(received)
  const closeSent = () => {
    const close = frames().find((f) => f.opcode === 8)
    return close === undefined ? undefined : close.payload.length === 0 ? 1005 : close.payload.readUInt16BE(0)
  }
  const stop = async () => {
    raw.destroy()
    for (const c of connections) c.close()
    await new Promise<void>((resolve) => http.close(() => resolve()))
  }
  return { raw, port, scopes, closes, connections, write, frames, closeSent, ended: () => ended, stop }
}

describe("the server's own WebSocket, against RFC 6455", () => {
  it("frames cut anywhere and joined any way arrive whole, in order, once; fragments with control frames between them, and frames of any length among them", async () => {
    for (let trial = 0; trial < 20; trial++) {
      const s = await serve()
      try {
        const payloads = Array.from({ length: 40 }, (_, i) => Crypto.randomBytes([0, 1, 115, 116, 117, 65_526, 65_527, 70_000, 300][i % 9]!))
        const bytes: Array<Buffer> = [wsFrame(binary, encodeFrame(FrameType.Request, 1, 0, tagged(1, "{}")))]
        let pings = 0
        for (const [i, payload] of payloads.entries()) {
          const frame = encodeFrame(FrameType.ChannelRequest, 1, i + 1, payload)
          if (i % 7 === 3) {
            // a message in three fragments, a ping and a pong between them
            const a = Math.floor(frame.length / 3)
            bytes.push(wsFrame(0x02, frame.subarray(0, a)), wsFrame(0x89, Buffer.from(`p${i}`)), wsFrame(0x00, frame.subarray(a, 2 * a)), wsFrame(0x8a, Buffer.from("unasked")), wsFrame(0x80, frame.subarray(2 * a)))
            pings++
          } else bytes.push(wsFrame(binary, frame, i % 5 === 0 ? Buffer.alloc(4) : undefined))
          if (i % 11 === 5) {
            bytes.push(wsFrame(0x89, Buffer.alloc(0)))
            pings++
          }
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
        const pongs = () => s.frames().filter((f) => f.opcode === 10)
        await until(() => requests.length === payloads.length && pongs().length === pings, "every channel and every pong")
        for (const [i, request] of requests.entries()) expect(request.equals(payloads[i]!), `the request ${i} of trial ${trial}`).toBe(true)
        // each ping answered with its own payload, in order
        expect(pongs().map((p) => p.payload.toString())).toEqual(payloads.flatMap((_, i) => [...(i % 7 === 3 ? [`p${i}`] : []), ...(i % 11 === 5 ? [""] : [])]))
        expect(s.closes).toEqual([])
      } finally {
        await s.stop()
      }
    }
  })

  it("a broken rule closes the connection with its code, and nothing behind it is read", async () => {
    const request = () => encodeFrame(FrameType.Request, 1, 0, tagged(1, "{}"))
    const cases: Array<[string, () => Buffer, number]> = [
      ["text", () => wsFrame(0x81, request()), 1003],
      ["unmasked", () => wsFrame(binary, request(), null), 1002],
      ["a reserved bit", () => wsFrame(binary | 0x10, request()), 1002],
      ["a reserved data opcode", () => wsFrame(0x83, request()), 1002],
      ["a reserved control opcode", () => wsFrame(0x8b, Buffer.alloc(0)), 1002],
      ["a fragmented ping", () => wsFrame(0x09, Buffer.from("p")), 1002],
      ["a ping of 126 bytes", () => wsFrame(0x89, Buffer.alloc(126)), 1002],
      ["a continuation with nothing to continue", () => wsFrame(0x80, request()), 1002],
      ["a new message inside a fragmented one", () => Buffer.concat([wsFrame(0x02, request().subarray(0, 4)), wsFrame(0x82, request())]), 1002],
      ["a close of one byte", () => wsFrame(0x88, Buffer.from([3])), 1002],
      ["the close code 1005", () => closeFrame(1005), 1002],
      ["the close code 1006", () => closeFrame(1006), 1002],
      ["the close code 999", () => closeFrame(999), 1002],
      ["the close code 2999", () => closeFrame(2999), 1002],
      ["the close code 5000", () => closeFrame(5000), 1002],
      ["a close reason that is not UTF-8", () => wsFrame(0x88, Buffer.from([0x03, 0xe8, 0xc3, 0x28])), 1007],
      ["past the limit", () => wsFrame(binary, Buffer.alloc(64 * 1024 + 1)), 1009],
      ["fragments past the limit together", () => Buffer.concat([wsFrame(0x02, Buffer.alloc(40 * 1024)), wsFrame(0x80, Buffer.alloc(40 * 1024))]), 1009],
      ["past any limit", () => Buffer.from([binary, 0xff, 0, 0, 1, 0, 0, 0, 0, 0, 1, 2, 3, 4]), 1009]
    ]
    for (const [name, bad, code] of cases) {
      const s = await serve(64 * 1024)
      try {
        await s.write(Buffer.concat([bad(), wsFrame(binary, request())]))
        await until(() => s.closeSent() !== undefined, `the close after ${name}`)
        expect(s.closeSent(), name).toBe(code)
        expect(s.closes, name).toEqual([code])
        expect(s.scopes, name).toEqual([])
        // the server's FIN follows its close
        await until(() => s.ended() || s.raw.readableEnded, `the end after ${name}`)
      } finally {
        await s.stop()
      }
    }
  })

  it("a peer's close is answered with its code (an empty one with an empty one), and what came before it is read", async () => {
    for (const [close, answered, seen] of [[closeFrame(1000), 1000, 1000], [closeFrame(4000, "bye"), 4000, 4000], [closeFrame(1012, "restart"), 1012, 1012], [wsFrame(0x88, Buffer.alloc(0)), 1005, 1005]] as const) {
      const s = await serve()
      try {
        await s.write(Buffer.concat([wsFrame(binary, encodeFrame(FrameType.Request, 1, 0, tagged(1, "{}"))), close, wsFrame(binary, encodeFrame(FrameType.Request, 2, 0, tagged(1, "{}")))]))
        await until(() => s.closeSent() !== undefined, "the answering close")
        expect(s.closeSent()).toBe(answered)
        expect(s.closes).toEqual([seen])
        expect(s.scopes.map((c) => c.number)).toEqual([1])
      } finally {
        await s.stop()
      }
    }
  })

  it("a request that is not a WebSocket handshake is not upgraded", async () => {
    const http = webSocketHttpServer()
    const upgraded: Array<WireSocket> = []
    acceptWebSocket(http, (socket) => upgraded.push(socket))
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve))
    const port = (http.address() as { port: number }).port
    try {
      const plain = await new Promise<number>((resolve) => Http.get(`http://127.0.0.1:${port}/`, (r) => (r.resume(), resolve(r.statusCode!))))
      expect(plain).toBe(426)
      const upgrade = (headers: Record<string, string>) =>
        new Promise<number>((resolve) => {
          const r = Http.request({ port, host: "127.0.0.1", headers: { Connection: "Upgrade", Upgrade: "websocket", ...headers } })
          r.once("response", (res) => (res.resume(), resolve(res.statusCode!)))
          r.once("upgrade", () => resolve(101))
          r.end()
        })
      expect(await upgrade({ "Sec-WebSocket-Version": "8", "Sec-WebSocket-Key": Crypto.randomBytes(16).toString("base64") })).toBe(426)
      expect(await upgrade({ "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "short" })).toBe(400)
      expect(upgraded).toHaveLength(0)
      expect(await upgrade({ "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": Crypto.randomBytes(16).toString("base64") })).toBe(101)
      await until(() => upgraded.length === 1, "the one upgrade")
    } finally {
      for (const u of upgraded) u.terminate()
      http.closeAllConnections()
      await new Promise<void>((resolve) => http.close(() => resolve()))
    }
  })
})

describe("the server's own WebSocket, against ws", () => {
  it("ws as the client: frames of any length both ways, a fragmented message with a ping between its fragments, and close codes both ways", async () => {
    const http = webSocketHttpServer()
    const accepted: Array<{ connection: FrameConnection; scopes: Array<Scope>; closes: Array<number> }> = []
    acceptWebSocket(http, (socket) => {
      const scopes: Array<Scope> = []
      const closes: Array<number> = []
      accepted.push({ connection: new FrameConnection(socket, { role: "responder", onScope: (s) => scopes.push(s), onClose: (c) => closes.push(c) }), scopes, closes })
    })
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve))
    const url = `ws://127.0.0.1:${(http.address() as { port: number }).port}`
    const dial = async () => {
      const socket = new WebSocket(url, { perMessageDeflate: false })
      await new Promise<void>((resolve) => socket.once("open", () => resolve()))
      return socket
    }
    try {
      const socket = await dial()
      const client = new FrameConnection(socket, { role: "opener" })
      const scope = client.openScope(tagged(1, "{}"))
      await until(() => accepted[0]?.scopes.length === 1, "the scope")
      const server = accepted[0]!
      const sent = [0, 1, 116, 117, 500, 65_526, 65_527, 200_000].map((n) => Crypto.randomBytes(n))
      for (const payload of sent) server.scopes[0]!.respond(payload)
      for (const [i, payload] of sent.entries()) expect((await scope.responses.take())?.equals(payload), `response ${i}`).toBe(true)
      // a channel request in three fragments, a ping between them (ws's public API)
      const frame = encodeFrame(FrameType.ChannelRequest, 1, 1, Crypto.randomBytes(5000))
      let pongs = 0
      socket.on("pong", () => pongs++)
      socket.send(frame.subarray(0, 100), { binary: true, fin: false })
      socket.ping(Buffer.from("between"))
      socket.send(frame.subarray(100, 3000), { binary: true, fin: false })
      socket.send(frame.subarray(3000), { binary: true, fin: true })
      const opened: Array<Buffer> = []
      server.scopes[0]!.peerOpened.listen((c) => opened.push(c.request), () => {})
      await until(() => opened.length === 1 && pongs === 1, "the fragmented request and the pong")
      expect(opened[0]!.equals(frame.subarray(9))).toBe(true)
      // the client closes with 4000: the server sees it, and ws sees its code answered
      const clientClosed = new Promise<number>((resolve) => socket.once("close", (code) => resolve(code)))
      socket.close(4000, "done")
      expect(await clientClosed).toBe(4000)
      expect(server.closes).toEqual([4000])
      // the server closes with 1001: ws sees 1001
      const second = await dial()
      await until(() => accepted.length === 2, "the second connection")
      const secondClosed = new Promise<number>((resolve) => second.once("close", (code) => resolve(code)))
      accepted[1]!.connection.close(1001, "going away")
      expect(await secondClosed).toBe(1001)
      // a text message from ws: 1003
      const third = await dial()
      const thirdClosed = new Promise<number>((resolve) => third.once("close", (code) => resolve(code)))
      third.send("text")
      expect(await thirdClosed).toBe(1003)
    } finally {
      await new Promise<void>((resolve) => http.close(() => resolve()))
    }
  })

  it("dialling ws as the server: frames both ways, its ping answered, its close code seen; a refusal and a closed port are told apart", async () => {
    const wss = new WebSocketServer({ port: 0, host: "127.0.0.1", perMessageDeflate: false, verifyClient: (info: { req: Http.IncomingMessage }) => info.req.url !== "/refused" })
    await new Promise<void>((resolve) => wss.once("listening", resolve))
    const port = (wss.address() as { port: number }).port
    const served: Array<{ socket: WebSocket; connection: FrameConnection; scopes: Array<Scope> }> = []
    wss.on("connection", (socket) => {
      const scopes: Array<Scope> = []
      served.push({ socket, connection: new FrameConnection(socket, { role: "responder", onScope: (s) => scopes.push(s) }), scopes })
    })
    try {
      const dialled = await dialWebSocket(`ws://127.0.0.1:${port}/`)
      if (!(dialled instanceof WireSocket)) throw new Error(dialled.message)
      const closes: Array<number> = []
      const opener = new FrameConnection(dialled, { role: "opener", onClose: (c) => closes.push(c) })
      expect(opener.isDirect).toBe(true)
      const scope = opener.openScope(tagged(1, "{}"))
      await until(() => served[0]?.scopes.length === 1, "the scope at ws")
      const sent = [0, 1, 125, 126, 65_535, 65_536, 300_000].map((n) => Crypto.randomBytes(n))
      const channels = sent.map((p) => scope.openChannel(p))
      const requests: Array<Buffer> = []
      served[0]!.scopes[0]!.peerOpened.listen((c) => {
        requests.push(c.request)
        c.respond(c.request)
        c.finish()
      }, () => {})
      for (const [i, channel] of channels.entries()) expect((await channel.responses.take())?.equals(sent[i]!), `answer ${i}`).toBe(true)
      for (const [i, request] of requests.entries()) expect(request.equals(sent[i]!), `request ${i}`).toBe(true)
      const pong = new Promise<Buffer>((resolve) => served[0]!.socket.once("pong", (data) => resolve(data)))
      served[0]!.socket.ping(Buffer.from("ping?"))
      expect((await pong).toString()).toBe("ping?")
      served[0]!.socket.close(4001, "bye")
      await until(() => closes.length === 1, "the close")
      expect(closes).toEqual([4001])
      const refused = await dialWebSocket(`ws://127.0.0.1:${port}/refused`)
      expect(refused).toMatchObject({ status: 401 })
      wss.close()
      await new Promise<void>((resolve) => wss.once("close", () => resolve()))
      const gone = await dialWebSocket(`ws://127.0.0.1:${port}/`)
      expect(gone).toMatchObject({ code: "ECONNREFUSED" })
    } finally {
      wss.close()
    }
  })
})

describe("the server's stop", () => {
  it("does not wait on a client that never answers its close", { timeout: 60_000 }, async () => {
    const w = await makeWorld()
    // a client that keeps its side open and never reads: it will not answer the close
    const raw = Net.connect({ port: w.server.port, host: "127.0.0.1", allowHalfOpen: true })
    await new Promise<void>((resolve) => raw.once("connect", () => resolve()))
    raw.write(`GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${Crypto.randomBytes(16).toString("base64")}\r\nSec-WebSocket-Version: 13\r\n\r\n`)
    let answered = ""
    raw.on("data", (d: Buffer) => (answered += d.toString("latin1")))
    await until(() => answered.includes("\r\n\r\n"), "the handshake")
    raw.pause()
    try {
      await w.close()
      expect(answered).toMatch(/^HTTP\/1.1 101/)
    } finally {
      raw.destroy()
    }
  })
})
