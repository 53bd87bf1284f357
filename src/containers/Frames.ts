/**
 * The frame layer of docs/containers.md section 1: one binary WebSocket message per frame,
 * `[type u8][scope u32 BE][channel u32 BE][payload]`. The frame layer never reads a payload.
 */
export const FrameType = {
  Auth: 0,
  Request: 1,
  Response: 2,
  ResponseFinish: 3,
  ChannelRequest: 4,
  ChannelResponse: 5,
  ChannelResponseFinish: 6
} as const
export type FrameType = (typeof FrameType)[keyof typeof FrameType]

export const headerLength = 9

export interface Frame {
  readonly type: FrameType
  readonly scope: number
  readonly channel: number
  readonly payload: Buffer
}

export const encodeFrame = (type: FrameType, scope: number, channel: number, payload: Uint8Array = empty): Buffer => {
  const frame = Buffer.allocUnsafe(headerLength + payload.length)
  frame[0] = type
  frame.writeUInt32BE(scope, 1)
  frame.writeUInt32BE(channel, 5)
  frame.set(payload, headerLength)
  return frame
}

/** undefined: not a frame (too short, or a type this revision does not define) */
export const decodeFrame = (message: Buffer): Frame | undefined => {
  if (message.length < headerLength) return undefined
  const type = message[0]!
  if (type > FrameType.ChannelResponseFinish) return undefined
  return {
    type: type as FrameType,
    scope: message.readUInt32BE(1),
    channel: message.readUInt32BE(5),
    payload: message.subarray(headerLength)
  }
}

export const empty: Buffer = Buffer.alloc(0)

/** a payload: one tag byte, then the body */
export const tagged = (tag: number, body: Uint8Array | string = empty): Buffer => {
  const bytes = typeof body === "string" ? Buffer.from(body, "utf8") : body
  const payload = Buffer.allocUnsafe(1 + bytes.length)
  payload[0] = tag
  payload.set(bytes, 1)
  return payload
}
