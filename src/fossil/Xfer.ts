/**
 * A client of Fossil's sync protocol (xfer.c) over HTTP: one request carries a
 * `login` card signed with the user's shared secret, then cards; the body is a 4-byte
 * big-endian size then zlib, both ways. Errors come back as `error` cards in an HTTP
 * 200 reply (fossil-mechanics 1.3 c).
 */
import * as Zlib from "node:zlib"
import { defossilize, fossilize } from "./Fossilize.js"
import { sha1 } from "./Hash.js"

export interface XferLogin {
  readonly user: string
  readonly password: string
  readonly projectCode: string
}

/** One card of the server's reply; file-like cards keep their payload. */
export interface ReplyCard {
  readonly name: string
  readonly args: ReadonlyArray<string>
  readonly payload: Buffer | undefined
}

export interface XferReply {
  readonly status: number
  readonly cards: ReadonlyArray<ReplyCard>
  /** the text of each `error` card, defossilized */
  readonly errors: ReadonlyArray<string>
}

export class XferUnreachable extends Error {}
export class XferProtocolError extends Error {}

const frame = (body: Buffer): Buffer => {
  const n = Buffer.alloc(4)
  n.writeUInt32BE(body.length)
  return Buffer.concat([n, Zlib.deflateSync(body)])
}

/** The shared secret Fossil stores for a password: sha1(project-code/login/password). */
export const sharedSecret = (login: XferLogin): string => sha1(`${login.projectCode}/${login.user}/${login.password}`)

/** Without it the server takes us for a 1.x client and sends no SHA3 artifact. */
const clientVersion = Buffer.from("pragma client-version 22100 20230226 192424\n")

export const signed = (login: XferLogin, body: Buffer): Buffer => {
  const payload = Buffer.concat([clientVersion, body])
  const nonce = sha1(payload)
  const signature = sha1(nonce + sharedSecret(login))
  return Buffer.concat([Buffer.from(`login ${fossilize(login.user)} ${nonce} ${signature}\n`), payload])
}

/** Payload size of a card that is followed by bytes, from its arguments. */
const payloadSize = (name: string, args: ReadonlyArray<string>): number => {
  if (name === "file") return Number(args[args.length - 1])
  if (name === "cfile") return Number(args[args.length - 1])
  if (name === "uvfile") return (Number(args[4]) & 5) === 0 ? Number(args[3]) : 0
  if (name === "config") return Number(args[1]) + 1
  return 0
}

export const parseReply = (body: Buffer): ReadonlyArray<ReplyCard> => {
  const cards: Array<ReplyCard> = []
  let at = 0
  while (at < body.length) {
    let end = body.indexOf(0x0a, at)
    if (end < 0) end = body.length
    const line = body.toString("utf8", at, end)
    at = end + 1
    if (line.length === 0 || line.startsWith("#")) continue
    const [name = "", ...args] = line.split(" ")
    const size = payloadSize(name, args)
    if (!Number.isFinite(size) || size < 0 || at + size > body.length + 1) {
      throw new XferProtocolError(`xfer reply: bad ${name} card "${line.slice(0, 120)}"`)
    }
    const payload = size > 0 ? body.subarray(at, at + size) : undefined
    at += size
    cards.push({ name, args, payload })
  }
  return cards
}

export const xferRequest = async (
  url: string,
  login: XferLogin,
  payload: Buffer,
  timeoutMs = 30_000
): Promise<XferReply> => {
  let res: Response
  try {
    res = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/x-fossil" },
      body: frame(signed(login, payload)),
      signal: AbortSignal.timeout(timeoutMs)
    })
  } catch (cause) {
    const why = cause instanceof Error ? (cause.cause instanceof Error ? cause.cause.message : cause.message) : String(cause)
    throw new XferUnreachable(why)
  }
  const body = Buffer.from(await res.arrayBuffer())
  if (res.status !== 200) throw new XferUnreachable(`HTTP ${res.status} from ${url}`)
  let text: Buffer
  try {
    text = Zlib.inflateSync(body.subarray(4))
  } catch {
    throw new XferProtocolError(`the reply of ${url} is not a Fossil sync reply (${body.length} bytes)`)
  }
  const cards = parseReply(text)
  const errors = cards.filter((c) => c.name === "error").map((c) => defossilize(c.args.join(" ")))
  return { status: res.status, cards, errors }
}

/** A card line followed by its bytes (no newline after them: Fossil counts exactly). */
export const fileCard = (hash: string, bytes: Uint8Array): Buffer =>
  Buffer.concat([Buffer.from(`file ${hash} ${bytes.length}\n`), bytes])

export const uvfileCard = (name: string, mtime: number, hash: string, bytes: Uint8Array): Buffer =>
  Buffer.concat([Buffer.from(`uvfile ${name} ${mtime} ${hash} ${bytes.length} 0\n`), bytes])

/** The server-code field of push/pull only has to differ from the server's own. */
export const clientCode = sha1("ocx2")

/** Hashes the reply says the server holds (sent as file, cfile or igot). */
export const heldHashes = (cards: ReadonlyArray<ReplyCard>): Set<string> =>
  new Set(cards.filter((c) => c.name === "file" || c.name === "cfile" || c.name === "igot").map((c) => c.args[0]!))
