import * as Fs from "node:fs"
import { manifestMediaTypes } from "./OciImage.js"
import { credentialFingerprint, registryHost, type RegistryCredential } from "./RegistryCredentials.js"

/**
 * The registries the server's policy lists (docs/containers.md section 7), and a client of the
 * OCI distribution API for them: `GET /v2/NAME/manifests/DIGEST` and `GET /v2/NAME/blobs/DIGEST`,
 * redirects followed (a registry commonly sends blobs from a storage host). A registry that
 * answers 401 is signed in to as its `WWW-Authenticate` challenge says: `Basic` with the
 * identity's username and password, or `Bearer` (the distribution specification's token
 * sign-in: a token from the challenge's realm for its service and scope, with the identity's
 * username and password as basic credentials when it has them, anonymously when not).
 */
export interface RegistryPlace {
  /** http(s)://HOST[:PORT], no path */
  readonly url: string
  readonly repository: string
}

/** the policy file: `{"registries": [{"url": "https://HOST[:PORT]", "repositories": ["NAME", ...]}]}` */
export const readRegistryPolicy = (file: string): ReadonlyArray<RegistryPlace> | string => {
  let text: string
  try {
    text = Fs.readFileSync(file, "utf8")
  } catch (e) {
    if ((e as { code?: string }).code === "ENOENT") return []
    return `the registry policy ${file} cannot be read: ${(e as Error).message}`
  }
  const bad = (why: string) => `the registry policy ${file} ${why}`
  let policy: unknown
  try {
    policy = JSON.parse(text)
  } catch {
    return bad("is not JSON")
  }
  const registries = (policy as { registries?: unknown } | null)?.registries
  if (typeof policy !== "object" || policy === null || !Array.isArray(registries)) return bad('is not {"registries": [...]}')
  const places: Array<RegistryPlace> = []
  for (const r of registries as Array<unknown>) {
    const { url, repositories } = (r ?? {}) as { url?: unknown; repositories?: unknown }
    if (typeof url !== "string" || !/^https?:\/\/[^/?#]+$/.test(url)) return bad(`lists a registry whose url is not http(s)://HOST[:PORT]: ${JSON.stringify(url)}`)
    if (!Array.isArray(repositories) || !repositories.every((n) => typeof n === "string" && isRepositoryName(n))) {
      return bad(`lists ${url} without "repositories", a list of repository names`)
    }
    for (const repository of repositories as Array<string>) places.push({ url, repository })
  }
  return places
}

/** the distribution spec's repository name */
export const isRepositoryName = (name: string): boolean =>
  name.length <= 255 && /^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*$/.test(name)

export type Fetched = { readonly kind: "found" } | { readonly kind: "absent" } | { readonly kind: "failed"; readonly message: string }

const where = (place: RegistryPlace) => `${place.url}/${place.repository}`

const failed = (message: string): Fetched => ({ kind: "failed", message })

/** how one identity signs in to one registry of the policy */
export interface SignIn {
  /** the identity, so that one identity's token is never another's */
  readonly identity: string
  /** the identity's credential for the registry's host; undefined: it pulls anonymously */
  readonly credential: RegistryCredential | undefined
  /** where the identity's credentials live: errors name it, never what it holds */
  readonly source: string
  readonly tokens: TokenCache
}

/** an Authorization header value, and until when (ms since the epoch) it may be sent */
interface Authorization {
  readonly header: string
  readonly until: number
}

/**
 * The authorizations sign-ins got, per identity, credential, registry and scope, each kept until
 * its token's `expires_in` runs out (basic credentials until the registry refuses them), so that
 * a pull signs in once for its manifest and every blob; a sign-in under way is shared by every
 * request that waits for it.
 */
export class TokenCache {
  private readonly held = new Map<string, Authorization>()
  private readonly pending = new Map<string, Promise<Authorization | Fetched>>()

  constructor(private readonly now: () => number = Date.now) {}

  /** the header kept for KEY while it has not expired */
  get(key: string): string | undefined {
    const kept = this.held.get(key)
    if (kept === undefined) return undefined
    if (this.now() < kept.until) return kept.header
    this.held.delete(key)
    return undefined
  }

  /** forgets KEY's header (the registry refused it) */
  drop(key: string): void {
    this.held.delete(key)
  }

  /** KEY's header from SIGNIN (given the time it starts at), kept on success; a sign-in under way for KEY is joined */
  signIn(key: string, signIn: (startedAt: number) => Promise<Authorization | Fetched>): Promise<Authorization | Fetched> {
    let running = this.pending.get(key)
    if (running === undefined) {
      running = signIn(this.now())
        .then((got) => {
          if ("header" in got) this.held.set(key, got)
          return got
        })
        .finally(() => this.pending.delete(key))
      this.pending.set(key, running)
    }
    return running
  }
}

/** one challenge of a `WWW-Authenticate` header: its scheme (lower case) and its parameters */
export interface Challenge {
  readonly scheme: string
  readonly params: ReadonlyMap<string, string>
}

/** the challenges of a `WWW-Authenticate` header (RFC 9110 section 11.6.1; token68 forms are not read) */
export const parseChallenges = (header: string): ReadonlyArray<Challenge> => {
  const challenges: Array<{ scheme: string; params: Map<string, string> }> = []
  const piece = /\s*,?\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+)(?:\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]*))?/y
  for (let m = piece.exec(header); m !== null && m[0] !== ""; m = piece.exec(header)) {
    const [, name, value] = m
    if (value === undefined) challenges.push({ scheme: name!.toLowerCase(), params: new Map() })
    else challenges.at(-1)?.params.set(name!.toLowerCase(), value.startsWith('"') ? value.slice(1, -1).replace(/\\(.)/g, "$1") : value)
  }
  return challenges
}

/** GET URL, redirects followed by hand: AUTHORIZATION goes to URL's own origin only, never to a storage host it redirects to */
const request = async (url: string, authorization: string | undefined, accept?: string): Promise<Response> => {
  const origin = new URL(url).origin
  let at = url
  for (let hop = 0; ; hop++) {
    const headers: Record<string, string> = accept !== undefined ? { accept } : {}
    if (authorization !== undefined && new URL(at).origin === origin) headers.authorization = authorization
    const response = await fetch(at, { redirect: "manual", headers })
    const location = response.headers.get("location")
    if (response.status < 300 || response.status > 399 || location === null || hop === 10) return response
    await response.body?.cancel()
    at = new URL(location, at).href
  }
}

const unreachable = (what: string, e: unknown): Fetched => {
  const cause = (e as { cause?: { message?: string } }).cause?.message
  return failed(`${what} cannot be reached: ${cause ?? (e as Error).message}`)
}

/** the scope a pull from PLACE needs */
const pullScope = (place: RegistryPlace) => `repository:${place.repository}:pull`

const cacheKey = (place: RegistryPlace, signIn: SignIn) =>
  [signIn.identity, credentialFingerprint(signIn.credential), place.url, pullScope(place)].join("\0")

/** why the registry's 401 is not answered with a credential: SIGNIN has none for it, or not one the challenge takes */
const noCredential = (place: RegistryPlace, signIn: SignIn | undefined, scheme: string): Fetched =>
  failed(
    signIn?.credential === undefined
      ? `the registry ${where(place)} asks for a sign-in (${scheme}), and ${signIn?.source ?? "this server"} has no credentials for ${registryHost(place.url)}`
      : `the registry ${where(place)} asks for a username and password (Basic), and ${signIn.source} gives a token for ${registryHost(place.url)}`
  )

const refused = (place: RegistryPlace, signIn: SignIn, how: string): Fetched =>
  failed(
    signIn.credential === undefined
      ? `the registry ${where(place)} refused an anonymous pull (${how}), and ${signIn.source} has no credentials for ${registryHost(place.url)}`
      : `the registry ${where(place)} refused the credentials ${signIn.source} gives for ${registryHost(place.url)} (${how})`
  )

/** the distribution specification's token sign-in: a token for the challenge's service and scope from its realm */
const bearerToken = async (place: RegistryPlace, challenge: Challenge, signIn: SignIn, startedAt: number): Promise<Authorization | Fetched> => {
  if (signIn.credential?.kind === "token") return { header: `Bearer ${signIn.credential.token}`, until: Infinity }
  const realm = challenge.params.get("realm")
  let url: URL
  try {
    url = new URL(realm ?? "")
  } catch {
    return failed(`the registry ${where(place)} asks for a token sign-in without a realm that is a URL`)
  }
  if ((url.protocol !== "https:" && url.protocol !== "http:") || url.username !== "" || url.password !== "") {
    return failed(`the registry ${where(place)} asks for a token sign-in at a realm that is not an http(s) URL`)
  }
  const service = challenge.params.get("service")
  if (service !== undefined) url.searchParams.set("service", service)
  url.searchParams.set("scope", challenge.params.get("scope") ?? pullScope(place))
  const basic = signIn.credential === undefined ? undefined : basicHeader(signIn.credential)
  const tokenService = `the token service ${url.origin}${url.pathname} of the registry ${where(place)}`
  let response: Response
  try {
    response = await request(url.href, basic)
  } catch (e) {
    return unreachable(tokenService, e)
  }
  if (response.status === 401 || response.status === 403) {
    await response.body?.cancel()
    return refused(place, signIn, `its token service answered ${response.status}`)
  }
  if (!response.ok) {
    await response.body?.cancel()
    return failed(`${tokenService} answered ${response.status} ${response.statusText}`)
  }
  let answer: { token?: unknown; access_token?: unknown; expires_in?: unknown }
  try {
    answer = (await response.json()) as typeof answer
  } catch {
    return failed(`${tokenService} answered with something that is not JSON`)
  }
  const token = typeof answer?.token === "string" && answer.token !== "" ? answer.token : answer?.access_token
  if (typeof token !== "string" || token === "") return failed(`${tokenService} answered without a token`)
  // the specification's default lifetime is 60 seconds; counted from before the request, so never past the token's own
  const seconds = typeof answer.expires_in === "number" && answer.expires_in > 0 ? answer.expires_in : 60
  return { header: `Bearer ${token}`, until: startedAt + seconds * 1000 }
}

const basicHeader = (credential: RegistryCredential & { kind: "basic" }) =>
  `Basic ${Buffer.from(`${credential.username}:${credential.password}`, "utf8").toString("base64")}`

/** an authorization that answers the 401 CHALLENGES, by the scheme the registry asks for */
const authorize = async (place: RegistryPlace, header: string, signIn: SignIn | undefined, startedAt: number): Promise<Authorization | Fetched> => {
  const challenges = parseChallenges(header)
  const bearer = challenges.find((c) => c.scheme === "bearer")
  if (bearer !== undefined && signIn !== undefined) return bearerToken(place, bearer, signIn, startedAt)
  if (bearer !== undefined) return noCredential(place, signIn, "Bearer")
  if (challenges.some((c) => c.scheme === "basic")) {
    if (signIn?.credential?.kind !== "basic") return noCredential(place, signIn, "Basic")
    return { header: basicHeader(signIn.credential), until: Infinity }
  }
  return failed(`the registry ${where(place)} asks for credentials (${challenges[0]?.scheme ?? "401"} authentication), which this server does not give`)
}

const get = async (place: RegistryPlace, kind: "manifests" | "blobs", digest: string, signIn: SignIn | undefined, accept?: string): Promise<Response | Fetched> => {
  const url = `${place.url}/v2/${place.repository}/${kind}/${digest}`
  const key = signIn === undefined ? undefined : cacheKey(place, signIn)
  let response: Response
  try {
    response = await request(url, key === undefined ? undefined : signIn!.tokens.get(key), accept)
    if (response.status === 401) {
      await response.body?.cancel()
      const challenge = response.headers.get("www-authenticate") ?? ""
      // a kept token the registry no longer takes is replaced once, as a first sign-in is made
      if (key !== undefined) signIn!.tokens.drop(key)
      const got = key === undefined ? await authorize(place, challenge, undefined, Date.now()) : await signIn!.tokens.signIn(key, (at) => authorize(place, challenge, signIn, at))
      if (!("header" in got)) return got
      response = await request(url, got.header, accept)
      if (response.status === 401) {
        await response.body?.cancel()
        if (key !== undefined) signIn!.tokens.drop(key)
        return refused(place, signIn!, `it answered 401 to the ${got.header.split(" ")[0]} authorization`)
      }
    }
  } catch (e) {
    return unreachable(`the registry ${where(place)}`, e)
  }
  if (response.ok) return response
  await response.body?.cancel()
  if (response.status === 404) return { kind: "absent" }
  return failed(`the registry ${where(place)} answered ${response.status} ${response.statusText} for ${kind}/${digest}`)
}

/** the manifest's bytes, at most LIMIT of them */
export const fetchManifest = async (place: RegistryPlace, digest: string, limit: number, signIn?: SignIn): Promise<Uint8Array | Fetched> => {
  const response = await get(place, "manifests", digest, signIn, manifestMediaTypes.join(", "))
  if (!(response instanceof Response)) return response
  const chunks: Array<Uint8Array> = []
  let length = 0
  for await (const chunk of response.body ?? []) {
    length += (chunk as Uint8Array).length
    if (length > limit) {
      await response.body?.cancel()
      return { kind: "failed", message: `the registry ${where(place)} sent a manifest larger than ${limit} bytes for ${digest}` }
    }
    chunks.push(chunk as Uint8Array)
  }
  return Buffer.concat(chunks)
}

/** streams the blob to WRITE, which answers false once it takes no more */
export const fetchBlob = async (place: RegistryPlace, digest: string, write: (chunk: Uint8Array) => boolean, signIn?: SignIn): Promise<Fetched> => {
  const response = await get(place, "blobs", digest, signIn)
  if (!(response instanceof Response)) return response
  try {
    for await (const chunk of response.body ?? []) {
      if (!write(chunk as Uint8Array)) {
        await response.body?.cancel().catch(() => {})
        break
      }
    }
  } catch (e) {
    return { kind: "failed", message: `the registry ${where(place)} broke off sending ${digest}: ${(e as Error).message}` }
  }
  return { kind: "found" }
}
