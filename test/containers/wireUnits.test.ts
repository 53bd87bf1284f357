import fc from "fast-check"
import * as Crypto from "node:crypto"
import { describe, expect, it, vi } from "vitest"
import { WebSocket, WebSocketServer } from "ws"
import { FrameConnection, type Scope } from "../../src/containers/FrameConnection.js"
import { decodeFrame, encodeFrame, FrameType, headerLength, tagged } from "../../src/containers/Frames.js"
import { memberText } from "../../src/containers/VerbatimMember.js"
import { acceptWebSocket, dialWebSocket, webSocketHttpServer, WireSocket } from "../../src/containers/WebSocketWire.js"
import { decodeVolumeRefusal, volumeRefusalAnswer } from "../../src/containers/Wire.js"
import { until } from "./world.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 300_000 })

/** Pure parts of the wire: the frame header, the exact text of a JSON member, refusal bytes. */
describe("the wire, unit by unit", () => {
  it("a frame is 9 bytes of header and its payload, both ways", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 6 }), fc.nat({ max: 0xffffffff }), fc.nat({ max: 0xffffffff }), fc.uint8Array(), (type, scope, channel, payload) => {
        const frame = encodeFrame(type as FrameType, scope, channel, payload)
        expect(frame.length).toBe(headerLength + payload.length)
        expect(frame.readUInt32BE(1)).toBe(scope)
        expect(decodeFrame(frame)).toEqual({ type, scope, channel, payload: Buffer.from(payload) })
      })
    )
    expect(decodeFrame(Buffer.alloc(8))).toBeUndefined()
    expect(decodeFrame(Buffer.from([7, 0, 0, 0, 0, 0, 0, 0, 0]))).toBeUndefined()
  })

  it("memberText gives a member's exact text, the last of duplicates, for any JSON", () => {
    expect(memberText(`{"a":1,"arguments" : [1.0000000000000000001, "\\"}"] ,"z":2}`, "arguments")).toBe(`[1.0000000000000000001, "\\"}"]`)
    expect(memberText(`{"arguments":1,"arguments":{"x":"}"}}`, "arguments")).toBe(`{"x":"}"}`)
    expect(memberText(`{"b":true}`, "arguments")).toBeUndefined()
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), fc.jsonValue(), (rest, value) => {
        const text = JSON.stringify({ ...rest, arguments: value }, null, Math.random() < 0.5 ? 1 : undefined)
        expect(JSON.parse(memberText(text, "arguments")!)).toEqual(JSON.parse(text).arguments)
      })
    )
  })

  it("a volume refusal is its byte, the name with its length, and for 5 the mode", () => {
    expect(volumeRefusalAnswer(5, "vol", "persistent")).toEqual(Buffer.concat([Buffer.from([5, 0, 3]), Buffer.from("volpersistent")]))
    expect(decodeVolumeRefusal(volumeRefusalAnswer(2, "é"))).toEqual({ byte: 2, name: "é" })
    expect(decodeVolumeRefusal(volumeRefusalAnswer(5, "v", "read_only"))).toEqual({ byte: 5, name: "v", mode: "read_only" })
  })
})

/**
 * A relay, as the server's connections do (src/containers/WebSocketWire.ts), reads whole binary
 * messages off the socket itself, sends a received payload on under new headers without
 * copying it, and sends what it sends in one tick in one write: what arrives must still be every
 * payload verbatim, in order, once, whatever the sizes, and a payload sent twice must arrive
 * twice intact.
 */
describe("a frame relayed as it came", () => {
  /** a connection whose responder (ACCEPTED) or opener (OPENER) frames with the server's own framing, the other end ws */
  const pair = async (direct: { accepted?: boolean; opener?: boolean }) => {
    const scopes: Array<Scope> = []
    let accepted!: (c: FrameConnection) => void
    const acceptedConnection = new Promise<FrameConnection>((resolve) => (accepted = resolve))
    const responder = (socket: WireSocket | WebSocket) => accepted(new FrameConnection(socket, { role: "responder", onScope: (s) => scopes.push(s) }))
    let close: () => Promise<void>
    let port: number
    if (direct.accepted === true) {
      const http = webSocketHttpServer()
      acceptWebSocket(http, responder)
      await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve))
      port = (http.address() as { port: number }).port
      close = () => new Promise<void>((resolve) => http.close(() => resolve()))
    } else {
      const wss = new WebSocketServer({ port: 0, host: "127.0.0.1", perMessageDeflate: false })
      await new Promise<void>((resolve) => wss.once("listening", resolve))
      wss.on("connection", responder)
      port = (wss.address() as { port: number }).port
      close = () => new Promise<void>((resolve) => wss.close(() => resolve()))
    }
    let socket: WireSocket | WebSocket
    if (direct.opener === true) {
      const dialled = await dialWebSocket(`ws://127.0.0.1:${port}`)
      if (!(dialled instanceof WireSocket)) throw new Error(dialled.message)
      socket = dialled
    } else {
      socket = new WebSocket(`ws://127.0.0.1:${port}`, { perMessageDeflate: false })
      await new Promise<void>((resolve) => (socket as WebSocket).once("open", () => resolve()))
    }
    const opener = new FrameConnection(socket, { role: "opener" })
    const responding = await acceptedConnection
    expect([responding.isDirect, opener.isDirect]).toEqual([direct.accepted === true, direct.opener === true])
    return { close, opener, responder: responding, scopes }
  }

  it("every payload, small or large, arrives verbatim, in order, once; one sent twice arrives twice", async () => {
    // a → relay → b: the relay is the responder of a's connection and the opener toward b
    const ab = await pair({ accepted: true })
    const rb = await pair({ opener: true })
    try {
      const fromA = ab.opener.openScope(tagged(1, "{}"))
      const toB = rb.opener.openScope(tagged(1, "{}"))
      await until(() => ab.scopes.length === 1 && rb.scopes.length === 1, "both scopes opened")
      const relayScope = ab.scopes[0]!
      const bScope = rb.scopes[0]!
      const sent = Array.from({ length: 300 }, (_, i) => Crypto.randomBytes([0, 1, 1023, 1024, 1025, 16_384, 70_000][i % 7]! + (i % 3)))
      // the relay opens a channel toward b for each channel a opens, with a's request as it came,
      // and b answers each with its request, which the relay sends to a twice, under two headers:
      // on the channel, and on the scope's main stream
      relayScope.peerOpened.listen((channel) => {
        const out = toB.openChannel(channel.request)
        out.responses.listen(
          (payload) => {
            channel.respond(payload)
            relayScope.respond(payload)
          },
          () => channel.finish()
        )
      }, () => {})
      const atB: Array<Buffer> = []
      bScope.peerOpened.listen((channel) => {
        atB.push(channel.request)
        channel.respond(channel.request)
        channel.finish()
      }, () => {})
      // a opens them all in one tick: the relay receives many in one read, and sends them in one write
      const channels = sent.map((payload) => fromA.openChannel(payload))
      for (const [i, channel] of channels.entries()) {
        const first = await channel.responses.take()
        const second = await fromA.responses.take()
        expect(first?.equals(sent[i]!), `the answer ${i} on its channel`).toBe(true)
        expect(second?.equals(sent[i]!), `the answer ${i} on the main stream`).toBe(true)
        expect(await channel.responses.take()).toBeUndefined()
        expect(channel.finished).toBe(true)
      }
      expect(atB).toHaveLength(sent.length)
      for (const [i, request] of atB.entries()) expect(request.equals(sent[i]!), `the request ${i}`).toBe(true)
    } finally {
      for (const p of [ab, rb]) {
        p.opener.close()
        await p.close()
      }
    }
  })
})
