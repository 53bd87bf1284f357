import { spawnSync } from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Net from "node:net"
import * as Path from "node:path"

/**
 * A registry token server for a test: the realm of the distribution specification's token
 * sign-in (docs.docker.com/registry/spec/auth/token). `GET /token?service=S&scope=SCOPE`,
 * with HTTP basic credentials or none, answers `{"token", "access_token", "expires_in"}`: a JWT
 * signed (RS256) by a key made with `openssl` for the test, its certificate in the JWT's `x5c`
 * and in the registry's `rootcertbundle`. A user with the right password gets every action the
 * scope asks for; a wrong password is 401; anonymous sign-ins get `pull` of the repositories in
 * `anonymousPull` and nothing else (so the registry refuses them the rest).
 */
export interface TokenServer {
  /** http://127.0.0.1:PORT/token */
  readonly realm: string
  readonly service: string
  readonly issuer: string
  /** the certificate the registry trusts (PEM file) */
  readonly certificate: string
  /** each sign-in asked of it: its scope and the user its basic credentials named (undefined: anonymous) */
  readonly signIns: () => ReadonlyArray<{ readonly scope: string; readonly user: string | undefined; readonly granted: boolean }>
  /** a token for REPOSITORY's pull, as the server would issue it (a test's pre-issued token) */
  readonly issue: (repository: string) => string
  readonly stop: () => Promise<void>
}

export interface TokenServerOptions {
  readonly users: Readonly<Record<string, string>>
  readonly anonymousPull?: ReadonlyArray<string>
  /** the tokens' expires_in (default 300) */
  readonly expiresIn?: number
}

const base64url = (b: Buffer | string) => Buffer.from(b).toString("base64url")

/** a key and a self-signed certificate for it, in DIR */
const makeKey = (dir: string) => {
  const key = Path.join(dir, "token-key.pem")
  const certificate = Path.join(dir, "token-cert.pem")
  const r = spawnSync(
    "openssl",
    ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate, "-days", "2", "-subj", "/CN=ocx2 test token issuer"],
    { encoding: "utf8" }
  )
  if (r.status !== 0) throw new Error(`openssl failed: ${r.stderr}`)
  const der = new Crypto.X509Certificate(Fs.readFileSync(certificate)).raw
  return { key: Crypto.createPrivateKey(Fs.readFileSync(key)), certificate, der }
}

export const startTokenServer = async (dir: string, options: TokenServerOptions): Promise<TokenServer> => {
  Fs.mkdirSync(dir, { recursive: true })
  const { key, certificate, der } = makeKey(dir)
  const service = "ocx2-test-registry"
  const issuer = "ocx2-test-issuer"
  const signIns: Array<{ scope: string; user: string | undefined; granted: boolean }> = []

  const jwt = (subject: string, access: ReadonlyArray<{ type: string; name: string; actions: ReadonlyArray<string> }>) => {
    const now = Math.floor(Date.now() / 1000)
    const header = base64url(JSON.stringify({ typ: "JWT", alg: "RS256", x5c: [der.toString("base64")] }))
    const claims = base64url(
      JSON.stringify({ iss: issuer, sub: subject, aud: service, exp: now + 600, nbf: now - 60, iat: now, jti: Crypto.randomBytes(8).toString("hex"), access })
    )
    const signature = Crypto.sign("sha256", Buffer.from(`${header}.${claims}`), key)
    return `${header}.${claims}.${base64url(signature)}`
  }

  /** the access a scope `repository:NAME:ACTIONS` is granted: all of it to a user, pull of the anonymous repositories to anyone */
  const grant = (scope: string, user: string | undefined) => {
    const [type, name, actions] = scope.split(":")
    if (type !== "repository" || name === undefined || actions === undefined) return []
    const asked = actions.split(",")
    const given = user !== undefined ? asked : (options.anonymousPull ?? []).includes(name) ? asked.filter((a) => a === "pull") : []
    return given.length === 0 ? [] : [{ type, name, actions: given }]
  }

  const server = Http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x")
    if (url.pathname !== "/token") {
      res.writeHead(404).end()
      return
    }
    const scope = url.searchParams.get("scope") ?? ""
    let user: string | undefined
    const authorization = req.headers.authorization
    if (authorization !== undefined) {
      const [name, ...rest] = Buffer.from(authorization.replace(/^Basic /, ""), "base64").toString("utf8").split(":")
      if (!authorization.startsWith("Basic ") || name === undefined || options.users[name] !== rest.join(":")) {
        signIns.push({ scope, user: name, granted: false })
        res.writeHead(401, { "content-type": "application/json" }).end(JSON.stringify({ errors: [{ code: "UNAUTHORIZED", message: "wrong credentials" }] }))
        return
      }
      user = name
    }
    const access = grant(scope, user)
    signIns.push({ scope, user, granted: access.length > 0 })
    const token = jwt(user ?? "", access)
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ token, access_token: token, expires_in: options.expiresIn ?? 300 }))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as Net.AddressInfo).port
  return {
    realm: `http://127.0.0.1:${port}/token`,
    service,
    issuer,
    certificate,
    signIns: () => [...signIns],
    issue: (repository) => jwt("pre-issued", [{ type: "repository", name: repository, actions: ["pull"] }]),
    stop: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
