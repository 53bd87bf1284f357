// Who may follow a run's live stream on the node's stream server: the web page, where Fossil
// authenticated the viewer, signs a token naming the run, the viewer, the capabilities Fossil gave
// them, the repository and the page's own origin, with a secret only the node's account reads
// (ROOT/node/stream.secret, mode 0600, made on first use). A token is good for one run, for two
// minutes and for one connection (its nonce is spent when the stream opens): a browser's
// EventSource can only carry it in the URL, where a proxy's log may keep it, and a token spent at
// once is worth nothing there. The server takes the viewer from the token and their capabilities
// from the repository, again and again while it streams (StreamReader.ts), never from the request.

import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"

export interface StreamGrant {
  readonly run: string
  readonly user: string | undefined
  readonly capabilities: string
  readonly repository: string
  readonly role: "served" | "clone"
  /** the origin of the page that signed it (the Fossil server's, as the browser saw it): the one origin the stream answers to */
  readonly origin: string | undefined
  /** random: the token's identity, spent by the first connection it opens */
  readonly nonce: string
  /** milliseconds since the epoch */
  readonly expires: number
}

/** How long a page's token may wait for its connection. */
export const TOKEN_MS = 2 * 60_000

export const newNonce = (): string => Crypto.randomBytes(16).toString("base64url")

export const secretFile = (nodeDir: string): string => Path.join(nodeDir, "stream.secret")

/** The node's stream secret, made (32 random bytes) when there is none yet. */
export const streamSecret = (nodeDir: string): Buffer => {
  const file = secretFile(nodeDir)
  try {
    return Fs.readFileSync(file)
  } catch {
    Fs.mkdirSync(nodeDir, { recursive: true })
    const secret = Crypto.randomBytes(32)
    const partial = `${file}.${process.pid}`
    Fs.writeFileSync(partial, secret, { mode: 0o600 })
    try {
      // another page may have made one meanwhile: the first one made is the secret
      Fs.linkSync(partial, file)
    } catch {
      // it exists
    } finally {
      Fs.rmSync(partial, { force: true })
    }
    return Fs.readFileSync(file)
  }
}

const mac = (secret: Buffer, body: string): string => Crypto.createHmac("sha256", secret).update(body).digest("base64url")

export const signGrant = (secret: Buffer, grant: StreamGrant): string => {
  const body = Buffer.from(JSON.stringify(grant), "utf8").toString("base64url")
  return `${body}.${mac(secret, body)}`
}

/** The grant a token carries, or why it is not taken. */
export const verifyGrant = (secret: Buffer, token: string, now: number): { readonly grant: StreamGrant } | { readonly problem: string } => {
  const [body, signature, extra] = token.split(".")
  if (body === undefined || signature === undefined || extra !== undefined) return { problem: "the token is not one this node signed" }
  const expected = Buffer.from(mac(secret, body))
  const given = Buffer.from(signature)
  if (expected.length !== given.length || !Crypto.timingSafeEqual(expected, given)) return { problem: "the token is not one this node signed" }
  let grant: StreamGrant
  try {
    grant = JSON.parse(Buffer.from(body, "base64url").toString("utf8")) as StreamGrant
  } catch {
    return { problem: "the token is not one this node signed" }
  }
  // a token of an older release (12 hours, no nonce) is not taken
  if (typeof grant.nonce !== "string" || grant.nonce === "" || typeof grant.expires !== "number" || grant.expires > now + 2 * TOKEN_MS) {
    return { problem: "the token is not one this release signs: open the run page again" }
  }
  if (!(grant.expires > now)) return { problem: "the token has expired: open the run page again" }
  return { grant }
}
