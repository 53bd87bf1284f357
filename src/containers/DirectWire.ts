/**
 * The server's own WebSocket framing on its hot path (docs/containers.md section 1, "The
 * relay's path"): the frames a relay carries are read from and written to the TCP socket under
 * a `ws` WebSocket here, not through `ws`'s receiver stream and sender, which cost a relayed
 * frame more than the rest of the server's handling of it. `ws` keeps the handshake and every
 * other frame: whatever is not one whole binary message (a control frame, a fragment, a text
 * message, a frame that breaks a rule) is handed to its receiver as it came, so pings, closes,
 * the size limit and protocol errors behave as they always did. Bytes arrive here in the order
 * the peer sent them and leave in the order they are sent: nothing is reordered or sent twice.
 */
import type { WebSocket } from "ws"
import { headerLength, type FrameType } from "./Frames.js"

/** writes one frame as one binary message; the payload is not copied unless it is short */
export type DirectSend = (type: FrameType, scope: number, channel: number, payload: Uint8Array) => void

interface WsInternals {
  _socket?: NodeJS.WritableStream
  _receiver?: { write(chunk: Buffer): boolean; _bufferedBytes?: number; _maxPayload?: number; _errored?: boolean }
  _isServer?: boolean
}

const binaryWhole = 0x82
/** a payload up to this long is copied behind its headers (one buffer); a longer one is written as it is */
const copyUpTo = 512

/**
 * Takes over the reading of SOCKET's binary messages (each whole payload goes to ON_MESSAGE;
 * `ws` emits the rest) and returns how to write one. Undefined when the socket is not an open
 * WebSocket with nothing read yet, or not `ws`'s (then `ws` keeps doing everything).
 * A socket this end dialled writes its frames masked with a zero key, as the server's own link
 * into a container is dialled (docs/containers.md section 10): take over no other dialled socket.
 */
export const takeOver = (socket: WebSocket, onMessage: (payload: Buffer) => void): DirectSend | undefined => {
  const ws = socket as unknown as WsInternals
  const raw = ws._socket
  const receiver = ws._receiver
  if (raw === undefined || receiver === undefined || socket.readyState !== socket.OPEN || receiver._bufferedBytes !== 0) return undefined
  const isServer = ws._isServer === true
  // ws's own limit for this socket (0: none); past it ws closes with 1009
  const maxPayload = receiver._maxPayload !== undefined && receiver._maxPayload > 0 ? receiver._maxPayload : Number.MAX_SAFE_INTEGER
  const delegate = receiver.write.bind(receiver)
  /** received bytes not yet a whole frame */
  const parts: Array<Buffer> = []
  let partsLength = 0
  /** bytes needed before the next frame can be read further */
  let need = 2
  /** a fragmented message is open: its frames (and what comes between them) are ws's */
  let fragmented = false
  /** ws saw a close or an error: it reads nothing more, nor do we */
  let done = false

  const read = (buffer: Buffer): void => {
    let at = 0
    while (!done) {
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
        const high = buffer.readUInt32BE(at + 2)
        // beyond any limit: ws refuses it (1009) from its header alone
        if (high > 0) return refuse(buffer.subarray(at))
        length = buffer.readUInt32BE(at + 6)
        header = 10
      }
      const masked = (b1 & 0x80) !== 0
      if (masked) header += 4
      if (length > maxPayload) return refuse(buffer.subarray(at))
      if (left < header + length) {
        need = header + length
        break
      }
      const end = at + header + length
      if (fragmented || b0 !== binaryWhole || masked !== isServer) {
        const opcode = b0 & 0x0f
        if (opcode <= 2) fragmented = (b0 & 0x80) === 0
        hand(buffer.subarray(at, end))
      } else {
        const payload = buffer.subarray(at + header, end)
        if (masked) unmask(payload, buffer, end - length - 4)
        onMessage(payload)
        if (socket.readyState !== socket.OPEN) done = true
      }
      at = end
    }
    if (at < buffer.length && !done) {
      const rest = buffer.subarray(at)
      parts.push(rest)
      partsLength = rest.length
      if (need <= partsLength) need = partsLength + 1
    }
  }

  /** one frame (or what follows a frame past the limit) for ws's receiver, as it came */
  const hand = (bytes: Buffer): void => {
    delegate(bytes)
    // a close, or a frame ws found wrong (it reports that on the next tick): ws reads nothing after it
    if (socket.readyState !== socket.OPEN || receiver._errored === true || (bytes[0]! & 0x0f) === 0x08) done = true
  }

  /** a frame past the limit: ws closes the connection for it, and nothing after it is read */
  const refuse = (bytes: Buffer): void => {
    done = true
    delegate(bytes)
  }

  receiver.write = (chunk: Buffer): boolean => {
    if (done) return true
    if (parts.length === 0) {
      need = 2
      read(chunk)
      return true
    }
    parts.push(chunk)
    partsLength += chunk.length
    if (partsLength < need) return true
    const whole = Buffer.concat(parts, partsLength)
    parts.length = 0
    partsLength = 0
    need = 2
    read(whole)
    return true
  }

  return (type, scope, channel, payload) => {
    const length = headerLength + payload.length
    const size = (length < 126 ? 2 : length < 65536 ? 4 : 10) + (isServer ? 0 : 4)
    const copied = payload.length <= copyUpTo
    const head = Buffer.allocUnsafe(size + headerLength + (copied ? payload.length : 0))
    head[0] = binaryWhole
    const maskBit = isServer ? 0 : 0x80
    if (length < 126) head[1] = length | maskBit
    else if (length < 65536) {
      head[1] = 126 | maskBit
      head.writeUInt16BE(length, 2)
    } else {
      head[1] = 127 | maskBit
      head.writeUInt32BE(Math.floor(length / 2 ** 32), 2)
      head.writeUInt32BE(length >>> 0, 6)
    }
    // toward the server: a zero mask, so the payload is sent as it is
    if (!isServer) head.writeUInt32BE(0, size - 4)
    head[size] = type
    head.writeUInt32BE(scope, size + 1)
    head.writeUInt32BE(channel, size + 5)
    if (copied) {
      head.set(payload, size + headerLength)
      raw.write(head)
    } else {
      raw.write(head)
      raw.write(payload)
    }
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
