import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"

/**
 * What an identity signs in to registries with (docs/containers.md section 7): one file per
 * identity under the server's root, `ROOT/registry-credentials/IDENTITY.json`, never anything a
 * request carries:
 *
 *     {"registries": {"HOST[:PORT]": {"username": "NAME", "password": "SECRET"} | {"token": "TOKEN"}}}
 *
 * The file must be the server's user's own and neither readable nor writable by anyone else
 * (mode 0600 or 0400): one that is is refused, so a secret a careless chmod exposed is never used.
 * A missing file is an identity without credentials (anonymous pulls). Errors name the file and
 * the host, never a username, password or token.
 */
export type RegistryCredential =
  | { readonly kind: "basic"; readonly username: string; readonly password: string }
  | { readonly kind: "token"; readonly token: string }

export interface IdentityCredentials {
  /** where they were read from: errors name it instead of anything it holds */
  readonly file: string
  readonly byHost: ReadonlyMap<string, RegistryCredential>
}

export const credentialsFile = (dir: string, identity: string): string => Path.join(dir, `${identity}.json`)

/** the key a registry's credentials are listed under: its url's host, with the port when the url names one */
export const registryHost = (url: string): string => new URL(url).host

/** a short fingerprint of a credential, so a token got with it is not used once it changed (never the secret itself) */
export const credentialFingerprint = (credential: RegistryCredential | undefined): string =>
  credential === undefined ? "anonymous" : Crypto.createHash("sha256").update(JSON.stringify(credential)).digest("hex").slice(0, 16)

/** the identity's credentials from DIR, or why they cannot be used */
export const readCredentials = (dir: string, identity: string): IdentityCredentials | string => {
  const file = credentialsFile(dir, identity)
  let text: string
  let fd: number | undefined
  try {
    // the mode is read from the descriptor the text is read through: no swap between the check and the read
    fd = Fs.openSync(file, Fs.constants.O_RDONLY | Fs.constants.O_NOFOLLOW)
    const refused = refusedStat(file, Fs.fstatSync(fd))
    if (refused !== undefined) return refused
    text = Fs.readFileSync(fd, "utf8")
  } catch (e) {
    const code = (e as { code?: string }).code
    if (code === "ENOENT") return { file, byHost: new Map() }
    if (code === "ELOOP") return `the registry credentials ${file} is a symbolic link: make it a file of its own, mode 0600`
    return `the registry credentials ${file} cannot be read: ${code ?? (e as Error).message}`
  } finally {
    if (fd !== undefined) Fs.closeSync(fd)
  }
  return parseCredentials(file, text)
}

const refusedStat = (file: string, stat: Fs.Stats): string | undefined => {
  if (!stat.isFile()) return `the registry credentials ${file} is not a file`
  const mode = (stat.mode & 0o777).toString(8).padStart(4, "0")
  if ((stat.mode & 0o077) !== 0) {
    return `the registry credentials ${file} may be read or written by others than its owner (mode ${mode}): it is not used until it is mode 0600 (chmod 600 ${file})`
  }
  const uid = process.getuid?.()
  if (uid !== undefined && stat.uid !== uid) return `the registry credentials ${file} is not owned by the server's user (uid ${uid}): it is not used`
  return undefined
}

/** the file's text as credentials; what is wrong names the host and the field, never a value */
export const parseCredentials = (file: string, text: string): IdentityCredentials | string => {
  const bad = (why: string) => `the registry credentials ${file} ${why}`
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    // JSON.parse's message quotes the text, which may be a secret
    return bad("is not JSON")
  }
  const registries = (parsed as { registries?: unknown } | null)?.registries
  if (typeof registries !== "object" || registries === null || Array.isArray(registries)) {
    return bad('is not {"registries": {"HOST[:PORT]": {"username", "password"} or {"token"}}}')
  }
  const byHost = new Map<string, RegistryCredential>()
  for (const [host, entry] of Object.entries(registries as Record<string, unknown>)) {
    if (!/^[A-Za-z0-9.-]+(?::\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](?::\d{1,5})?$/.test(host)) return bad(`lists ${JSON.stringify(host)}, which is not HOST[:PORT]`)
    const credential = credentialOf(entry)
    if (credential === undefined) return bad(`lists ${host} with neither a "username" and "password" (strings) nor a "token" (a string)`)
    byHost.set(host.toLowerCase(), credential)
  }
  return { file, byHost }
}

const credentialOf = (entry: unknown): RegistryCredential | undefined => {
  if (typeof entry !== "object" || entry === null) return undefined
  const { username, password, token } = entry as { username?: unknown; password?: unknown; token?: unknown }
  if (token !== undefined) return typeof token === "string" && token !== "" && username === undefined && password === undefined ? { kind: "token", token } : undefined
  // a colon in the username cannot be told from the separator of HTTP basic's user:password
  if (typeof username !== "string" || username === "" || username.includes(":") || typeof password !== "string") return undefined
  return { kind: "basic", username, password }
}
