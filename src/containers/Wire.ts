/** The bytes of docs/containers.md sections 3, 5, 8 and 10 that the server itself composes. */
import { tagged } from "./Frames.js"

export const Endpoint = {
  agentsRun: 0,
  toolsRun: 1,
  toolsConnect: 2,
  volumesList: 3,
  volumesStat: 4,
  volumesRead: 5,
  volumesWrite: 6,
  volumesFiletree: 7,
  volumesEdit: 8,
  volumesDelete: 9,
  volumesCreate: 10,
  volumesFuseServe: 11,
  containersFuseServe: 12,
  imagesCheck: 13,
  version: 14,
  containersOutput: 15
} as const

/** the first byte of a response */
export const Answer = {
  ok: 0x00,
  id: 0x00,
  busy: 0x01,
  heldByContainer: 0x02,
  heldByFuseServe: 0x03,
  notMounted: 0x04,
  wrongMode: 0x05,
  error: 0x06,
  active: 0x07,
  inactive: 0x08,
  /** proxy only: the begin's first answer */
  begun: 0x10,
  /** registration answers */
  registered: 0x00,
  deploy: 0x01
} as const

export const ClientChannel = { stop: 0, secrets: 1, fuseMount: 2 } as const
export const ServerChannel = { ociHas: 1, ociManifest: 2, ociBlob: 3, registration: 4, writeData: 5, hold: 6, goOn: 7 } as const
export const ProxyScope = { begin: 1, mount: 2, tree: 3 } as const
export const ProxyChannel = { stopTree: 0, secrets: 1 } as const

export const errorAnswer = (message: string): Buffer => tagged(Answer.error, message)
export const okAnswer = (body: Uint8Array | string = ""): Buffer => tagged(Answer.ok, body)

/** `byte [u16 length][name]` and, for 0x05, the mode to the end */
export const volumeRefusalAnswer = (byte: number, name: string, mode?: string): Buffer => {
  const n = Buffer.from(name, "utf8")
  const m = Buffer.from(mode ?? "", "utf8")
  const out = Buffer.allocUnsafe(3 + n.length + m.length)
  out[0] = byte
  out.writeUInt16BE(n.length, 1)
  out.set(n, 3)
  out.set(m, 3 + n.length)
  return out
}

export const decodeVolumeRefusal = (payload: Buffer): { byte: number; name: string; mode?: string } | undefined => {
  if (payload.length < 3 || payload[0]! < 1 || payload[0]! > 5) return undefined
  const length = payload.readUInt16BE(1)
  if (payload.length < 3 + length) return undefined
  const name = payload.subarray(3, 3 + length).toString("utf8")
  const rest = payload.subarray(3 + length).toString("utf8")
  return payload[0] === 5 ? { byte: 5, name, mode: rest } : { byte: payload[0]!, name }
}
