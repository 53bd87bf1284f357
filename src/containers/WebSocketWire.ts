/**
 * The server's own WebSocket (RFC 6455) on the raw socket an HTTP upgrade gives, in both roles:
 * the server's side of a client's connection (`acceptWebSocket`), and the client's side of its
 * one connection into a container's proxy (`dialWebSocket`). docs/containers.md section 1, "The
 * relay's path". Only public APIs of Node are used: `ws` offers no public way to read and write
 * whole messages on its socket without its receiver stream and sender, which cost a relayed frame
 * more than the rest of the server's handling of it.
 *
 * What it does: a whole binary message is cut from the socket's bytes where it lies (unmasked in
 * place) and handed on; a fragmented one is put together (control frames may come between its
 * fragments); a ping is answered with its pong; a close is answered with the same code and ends
 * the connection. What breaks a rule of RFC 6455 closes the connection and nothing behind it is
 * read: a reserved bit or opcode, a server's frame that is masked or a client's that is not, a
 * control frame that is fragmented or longer than 125 bytes, a continuation with nothing to
 * continue or a new message inside one, a close code that may not be sent, a close payload of
 * one byte (1002); a close reason that is not UTF-8 (1007); a message past the size limit
 * (1009). A text message is handed on as text (the frame layer closes with 1003). No extension
 * is offered or taken (no permessage-deflate: frames are relayed as they came), no subprotocol.
 * Nothing times out: a close waits for the peer's as long as the peer's TCP connection lives.
 */
import * as Crypto from "node:crypto"
import * as Http from "node:http"
import type * as Net from "node:net"
import type * as Stream from "node:stream"
import { headerLength, type FrameType } from "./Frames.js"

const guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
const acceptKey = (key: string): string => Crypto.createHash("sha1").update(key + guid).digest("base64")

const Opcode = { continuation: 0, text: 1, binary: 2, close: 8, ping: 9, pong: 10 } as const

const binaryWhole = 0x80 | Opcode.binary
/** a payload up to this long is copied behind its headers (one buffer); a longer one is written as it is */
const copyUpTo = 512

/** close codes a peer may send (RFC 6455 7.4.1 and IANA's registry: 1004, 1005, 1006 and 1015 never go on the wire) */
export const sendableCloseCode = (code: number): boolean =>
  (code >= 1000 && code <= 1014 && code !== 1004 && code !== 1005 && code !== 1006) || (code >= 3000 && code <= 4999)

const utf8 = new TextDecoder("utf-8", { fatal: true })

export type WireRole = "server" | "client"

export interface WireSocketOptions {
  /** the longest message taken (whole, its fragments together); past it the connection closes with 1009 */
  readonly maxPayload?: number
}

/**
 * One WebSocket connection on a socket whose handshake is done. `onMessage` is given each
 * message (binary or text) in order; `onClose` once, with the close code (the peer's, the one
 * this side sent for a broken rule, or 1006 when the socket ended without a close).
 */
export class WireSocket {
  onMessage: (payload: Buffer, isBinary: boolean) => void = () => {}
  onClose: (code: number) => void = () => {}
  private readonly isServer: boolean
  private readonly maxPayload: number
  /** received bytes not yet a whole frame */
  private readonly parts: Array<Buffer> = []
  private partsLength = 0
  /** bytes needed before the next frame can be read further */
  private need = 2
  /** the fragments of the message being put together, and whether it is binary */
  private fragments: Array<Buffer> | undefined
  private fragmentsLength = 0
  private fragmentsBinary = false
  /** a close was sent, or the connection failed: nothing more is sent */
  private closeSent = false
  /** a close was received, or a rule broken: nothing more is read */
  private done = false
  private closed = false

  constructor(
    readonly socket: Net.Socket | Stream.Duplex,
    role: WireRole,
    options: WireSocketOptions = {},
    head?: Buffer
  ) {
    this.isServer = role === "server"
    this.maxPayload = options.maxPayload !== undefined && options.maxPayload > 0 ? options.maxPayload : Number.MAX_SAFE_INTEGER
    const net = socket as Net.Socket
    if (typeof net.setNoDelay === "function") net.setNoDelay(true)
    if (typeof net.setTimeout === "function") net.setTimeout(0)
    socket.on("data", (chunk: Buffer) => this.received(chunk))
    // the peer's FIN: what it sent has been read; this side ends its own
    socket.on("end", () => socket.end())
    socket.on("error", () => socket.destroy())
    socket.on("close", () => this.ended(1006))
    if (head !== undefined && head.length > 0) this.received(head)
  }

  get isOpen(): boolean {
    return !this.closeSent && !this.closed
  }

  /** what waits to be written */
  get bufferedAmount(): number {
    return this.socket.writableLength
  }

  pause(): void {
    this.socket.pause()
  }

  resume(): void {
    this.socket.resume()
  }

  cork(): void {
    this.socket.cork()
  }

  uncork(): void {
    this.socket.uncork()
  }

  /** resolves once what waits to be written is under LIMIT bytes (or the connection ended) */
  whenUnder(limit: number): Promise<void> {
    if (this.closed || this.socket.writableLength < limit) return Promise.resolve()
    return new Promise((resolve) => {
      const done = () => {
        this.socket.removeListener("drain", done)
        this.socket.removeListener("close", done)
        resolve()
      }
      this.socket.once("drain", done)
      this.socket.once("close", done)
    })
  }

  /** one frame of docs/containers.md section 1 as one binary message; the payload is not copied unless it is short */
  sendFrame(type: FrameType, scope: number, channel: number, payload: Uint8Array): void {
    if (this.closeSent || this.closed) return
    const length = headerLength + payload.length
    const size = this.headSize(length)
    const copied = payload.length <= copyUpTo
    const head = Buffer.allocUnsafe(size + headerLength + (copied ? payload.length : 0))
    this.writeHead(head, binaryWhole, length, size)
    head[size] = type
    head.writeUInt32BE(scope, size + 1)
    head.writeUInt32BE(channel, size + 5)
    if (copied) {
      head.set(payload, size + headerLength)
      this.socket.write(head)
    } else {
      this.socket.write(head)
      this.socket.write(payload)
    }
  }

  /** one whole message (tests, and anything that is not a frame) */
  send(payload: Uint8Array, isBinary = true): void {
    if (this.closeSent || this.closed) return
    this.control(0x80 | (isBinary ? Opcode.binary : Opcode.text), payload)
  }

  ping(payload: Uint8Array = Buffer.alloc(0)): void {
    if (this.closeSent || this.closed) return
    this.control(0x80 | Opcode.ping, payload)
  }

  /** starts the closing handshake: the close frame, then this side's FIN; the peer's close ends it */
  close(code = 1000, reason = ""): void {
    if (this.closeSent || this.closed) return
    this.sendClose(code, reason)
  }

  /** resolves once this side's close and FIN have been handed to the kernel (or the socket is gone) */
  whenFlushed(): Promise<void> {
    if (this.socket.writableFinished || this.socket.destroyed) return Promise.resolve()
    return new Promise((resolve) => {
      this.socket.once("finish", () => resolve())
      this.socket.once("close", () => resolve())
    })
  }

  /** ends the connection at once, without a close */
  terminate(): void {
    this.closeSent = true
    this.done = true
    this.socket.destroy()
    this.ended(1006)
  }

  private headSize(length: number): number {
    return (length < 126 ? 2 : length < 65536 ? 4 : 10) + (this.isServer ? 0 : 4)
  }

  /** the frame header; a client's frames carry a zero mask, so the payload goes as it is (section 10) */
  private writeHead(head: Buffer, first: number, length: number, size: number): void {
    head[0] = first
    const maskBit = this.isServer ? 0 : 0x80
    if (length < 126) head[1] = length | maskBit
    else if (length < 65536) {
      head[1] = 126 | maskBit
      head.writeUInt16BE(length, 2)
    } else {
      head[1] = 127 | maskBit
      head.writeUInt32BE(Math.floor(length / 2 ** 32), 2)
      head.writeUInt32BE(length >>> 0, 6)
    }
    if (!this.isServer) head.writeUInt32BE(0, size - 4)
  }

  private control(first: number, payload: Uint8Array): void {
    const size = this.headSize(payload.length)
    const frame = Buffer.allocUnsafe(size + payload.length)
    this.writeHead(frame, first, payload.length, size)
    frame.set(payload, size)
    this.socket.write(frame)
  }

  private sendClose(code: number | undefined, reason = ""): void {
    this.closeSent = true
    const payload = code === undefined ? Buffer.alloc(0) : Buffer.concat([Buffer.from([code >> 8, code & 0xff]), Buffer.from(reason, "utf8").subarray(0, 123)])
    this.control(0x80 | Opcode.close, payload)
    this.socket.end()
  }

  /** a broken rule: the close with its code, nothing behind it read */
  private fail(code: number, reason: string): void {
    this.done = true
    if (!this.closeSent && !this.closed) this.sendClose(code, reason)
    this.ended(code)
  }

  private ended(code: number): void {
    if (this.closed) return
    this.closed = true
    this.done = true
    this.onClose(code)
  }

  private received(chunk: Buffer): void {
    if (this.done) return
    if (this.parts.length === 0) {
      this.need = 2
      return this.read(chunk)
    }
    this.parts.push(chunk)
    this.partsLength += chunk.length
    if (this.partsLength < this.need) return
    const whole = Buffer.concat(this.parts, this.partsLength)
    this.parts.length = 0
    this.partsLength = 0
    this.need = 2
    this.read(whole)
  }

  private read(buffer: Buffer): void {
    let at = 0
    while (!this.done) {
      const left = buffer.length - at
      if (left < 2) break
      const b0 = buffer[at]!
      const b1 = buffer[at + 1]!
      let length = b1 & 0x7f
      let header = 2
      if (length === 126) {
        if (left < 4) break
        length = buffer.readUInt16BE(at + 2)
        header = 4
      } else if (length === 127) {
        if (left < 10) break
        // beyond any limit (and past 2^53 not even a length JavaScript holds)
        if (buffer.readUInt32BE(at + 2) > 0) return this.fail(1009, "the message is too long")
        length = buffer.readUInt32BE(at + 6)
        header = 10
      }
      const masked = (b1 & 0x80) !== 0
      if (masked) header += 4
      // the common case first: one whole binary message, masked as its sender must
      if (b0 === binaryWhole && masked === this.isServer && this.fragments === undefined) {
        if (length > this.maxPayload) return this.fail(1009, "the message is too long")
        if (left < header + length) {
          this.need = header + length
          break
        }
        const end = at + header + length
        const payload = buffer.subarray(at + header, end)
        if (masked) unmask(payload, buffer, end - length - 4)
        at = end
        this.onMessage(payload, true)
        continue
      }
      const problem = this.frameProblem(b0, masked, length)
      if (problem !== undefined) return this.fail(problem[0], problem[1])
      if (left < header + length) {
        this.need = header + length
        break
      }
      const end = at + header + length
      const payload = buffer.subarray(at + header, end)
      if (masked) unmask(payload, buffer, end - length - 4)
      at = end
      this.frame(b0, payload)
    }
    if (at < buffer.length && !this.done) {
      const rest = buffer.subarray(at)
      this.parts.push(rest)
      this.partsLength = rest.length
      if (this.need <= this.partsLength) this.need = this.partsLength + 1
    }
  }

  /** what is wrong with a frame from its header alone: [close code, reason] */
  private frameProblem(b0: number, masked: boolean, length: number): [number, string] | undefined {
    const fin = (b0 & 0x80) !== 0
    const opcode = b0 & 0x0f
    if ((b0 & 0x70) !== 0) return [1002, "a reserved bit is set"]
    if (masked !== this.isServer) return [1002, this.isServer ? "a client's frame is masked" : "a server's frame is not masked"]
    if (opcode >= 8) {
      if (opcode > Opcode.pong) return [1002, "a reserved opcode"]
      if (!fin) return [1002, "a fragmented control frame"]
      if (length > 125) return [1002, "a control frame longer than 125 bytes"]
      return undefined
    }
    if (opcode > Opcode.binary) return [1002, "a reserved opcode"]
    if (opcode === Opcode.continuation && this.fragments === undefined) return [1002, "a continuation with no message to continue"]
    if (opcode !== Opcode.continuation && this.fragments !== undefined) return [1002, "a new message inside a fragmented one"]
    if ((this.fragments === undefined ? 0 : this.fragmentsLength) + length > this.maxPayload) return [1009, "the message is too long"]
    return undefined
  }

  private frame(b0: number, payload: Buffer): void {
    const opcode = b0 & 0x0f
    const fin = (b0 & 0x80) !== 0
    if (opcode === Opcode.ping) return this.closeSent ? undefined : this.control(0x80 | Opcode.pong, payload)
    if (opcode === Opcode.pong) return
    if (opcode === Opcode.close) return this.closeReceived(payload)
    if (opcode !== Opcode.continuation) {
      if (fin) return this.onMessage(payload, opcode === Opcode.binary)
      // the fragments are copied: the buffer they lie in is the socket's, reused by the next read's concat
      this.fragments = [Buffer.from(payload)]
      this.fragmentsLength = payload.length
      this.fragmentsBinary = opcode === Opcode.binary
      return
    }
    this.fragments!.push(Buffer.from(payload))
    this.fragmentsLength += payload.length
    if (!fin) return
    const whole = Buffer.concat(this.fragments!, this.fragmentsLength)
    this.fragments = undefined
    this.fragmentsLength = 0
    this.onMessage(whole, this.fragmentsBinary)
  }

  private closeReceived(payload: Buffer): void {
    if (payload.length === 1) return this.fail(1002, "a close payload of one byte")
    let code: number | undefined
    if (payload.length >= 2) {
      code = payload.readUInt16BE(0)
      if (!sendableCloseCode(code)) return this.fail(1002, `the close code ${code} may not be sent`)
      try {
        utf8.decode(payload.subarray(2))
      } catch {
        return this.fail(1007, "the close reason is not UTF-8")
      }
    }
    this.done = true
    // the peer's close answered with its own code (an empty close with an empty one)
    if (!this.closeSent) this.sendClose(code)
    this.ended(code ?? 1005)
  }
}

/** a received payload unmasked in place; the mask is the 4 bytes at MASK_AT of BUFFER */
const unmask = (payload: Buffer, buffer: Buffer, maskAt: number): void => {
  const m0 = buffer[maskAt]!
  const m1 = buffer[maskAt + 1]!
  const m2 = buffer[maskAt + 2]!
  const m3 = buffer[maskAt + 3]!
  if ((m0 | m1 | m2 | m3) === 0) return
  const mask = [m0, m1, m2, m3]
  const length = payload.length
  // bytes up to a 4-byte boundary one by one, then whole words (the mask turned to match), then the tail
  let i = 0
  const misaligned = (4 - (payload.byteOffset & 3)) & 3
  for (; i < Math.min(misaligned, length); i++) payload[i]! ^= mask[i & 3]!
  const words = (length - i) >>> 2
  if (words > 0) {
    const word = mask[i & 3]! | (mask[(i + 1) & 3]! << 8) | (mask[(i + 2) & 3]! << 16) | (mask[(i + 3) & 3]! << 24)
    const view = new Int32Array(payload.buffer, payload.byteOffset + i, words)
    const le = littleEndian ? word : swap(word)
    for (let w = 0; w < words; w++) view[w]! ^= le
    i += words * 4
  }
  for (; i < length; i++) payload[i]! ^= mask[i & 3]!
}

const littleEndian = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1
const swap = (x: number): number => ((x & 0xff) << 24) | ((x & 0xff00) << 8) | ((x >>> 8) & 0xff00) | (x >>> 24)

const refuseUpgrade = (socket: Stream.Duplex, status: number, text: string, more = ""): void => {
  socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Length: 0\r\n${more}\r\n`)
  socket.on("error", () => socket.destroy())
}

/** an HTTP server that answers every request not asking to upgrade with 426 (acceptWebSocket serves the upgrades) */
export const webSocketHttpServer = (): Http.Server =>
  Http.createServer((_request, response) => {
    response.writeHead(426, { "content-type": "text/plain", upgrade: "websocket" })
    response.end("a WebSocket server\n")
  })

/**
 * Serves WebSocket upgrades on HTTP: each handshake RFC 6455 allows is answered 101 and its
 * socket handed to ON_SOCKET; any other request to upgrade is refused (400, or 426 naming the
 * version).
 */
export const acceptWebSocket = (http: Http.Server, onSocket: (socket: WireSocket, request: Http.IncomingMessage) => void, options: WireSocketOptions = {}): void => {
  http.on("upgrade", (request: Http.IncomingMessage, socket: Stream.Duplex, head: Buffer) => {
    socket.on("error", () => socket.destroy())
    const key = request.headers["sec-websocket-key"]
    if (request.headers["sec-websocket-version"] !== "13") return refuseUpgrade(socket, 426, "Upgrade Required", "Sec-WebSocket-Version: 13\r\n")
    const isWebSocket = request.method === "GET" && (request.headers.upgrade ?? "").toLowerCase() === "websocket"
    if (!isWebSocket || typeof key !== "string" || !/^[+/0-9A-Za-z]{21}[AQgw]==$/.test(key)) return refuseUpgrade(socket, 400, "Bad Request")
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptKey(key)}\r\n\r\n`)
    onSocket(new WireSocket(socket, "server", options, head), request)
  })
}

/** what a dial that did not give a connection met: a refusal by the peer's HTTP, or a socket's error */
export type DialFailure = { readonly status: number; readonly message: string } | { readonly code: string | undefined; readonly message: string }

/** ws://HOST:PORT/PATH, or ws+unix:SOCKET:/PATH (the form `ws` reads) */
const dialTarget = (url: string): Http.RequestOptions => {
  if (url.startsWith("ws+unix:")) {
    const rest = url.slice("ws+unix:".length)
    const colon = rest.indexOf(":")
    return colon < 0 ? { socketPath: rest, path: "/" } : { socketPath: rest.slice(0, colon), path: rest.slice(colon + 1) || "/" }
  }
  const u = new URL(url)
  if (u.protocol !== "ws:") throw new Error(`${url} is not a ws: URL`)
  return { host: u.hostname.replace(/^\[|\]$/g, ""), port: Number(u.port || 80), path: u.pathname + u.search }
}

/** one WebSocket dialled as its client (frames masked with a zero key, section 10), or why not */
export const dialWebSocket = (url: string, options: WireSocketOptions = {}): Promise<WireSocket | DialFailure> =>
  new Promise((resolve) => {
    const key = Crypto.randomBytes(16).toString("base64")
    const request = Http.request({
      ...dialTarget(url),
      agent: false,
      headers: { Connection: "Upgrade", Upgrade: "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": key }
    })
    request.once("upgrade", (response: Http.IncomingMessage, socket: Net.Socket, head: Buffer) => {
      if (response.headers["sec-websocket-accept"] !== acceptKey(key) || (response.headers.upgrade ?? "").toLowerCase() !== "websocket") {
        socket.destroy()
        return resolve({ status: 101, message: "the handshake's answer is not RFC 6455's" })
      }
      resolve(new WireSocket(socket, "client", options, head))
    })
    request.once("response", (response: Http.IncomingMessage) => {
      response.resume()
      request.destroy()
      resolve({ status: response.statusCode ?? 0, message: `HTTP ${response.statusCode}` })
    })
    request.once("error", (error: NodeJS.ErrnoException) => resolve({ code: error.code, message: error.message }))
    request.end()
  })
