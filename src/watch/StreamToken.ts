// Who may follow a run's live stream on the node's stream server: the web page, where Fossil
// authenticated the viewer, signs a token naming the run, the viewer, the capabilities Fossil gave
// them and the repository, with a secret only the node's account reads (ROOT/node/stream.secret,
// mode 0600, made on first use). The server takes nothing else from the request: the viewer is
// whoever the page signed for, bound to what those capabilities let them read.

import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"

export interface StreamGrant {
  readonly run: string
  readonly user: string | undefined
  readonly capabilities: string
  readonly repository: string
  readonly role: "served" | "clone"
  /** milliseconds since the epoch */
  readonly expires: number
}

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
  if (!(grant.expires > now)) return { problem: "the token has expired: open the run page again" }
  return { grant }
}
