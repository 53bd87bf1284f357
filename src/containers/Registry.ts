import * as Fs from "node:fs"
import { manifestMediaTypes } from "./OciImage.js"

/**
 * The registries the server's policy lists (docs/containers.md section 7), and a client of the
 * OCI distribution API for them: `GET /v2/NAME/manifests/DIGEST` and `GET /v2/NAME/blobs/DIGEST`,
 * redirects followed (a registry commonly sends blobs from a storage host). Anonymous access
 * only: a registry that asks for a token (401 with a Bearer challenge) is reported as such.
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

const get = async (place: RegistryPlace, kind: "manifests" | "blobs", digest: string, accept?: string): Promise<Response | Fetched> => {
  let response: Response
  try {
    response = await fetch(`${place.url}/v2/${place.repository}/${kind}/${digest}`, {
      redirect: "follow",
      headers: accept !== undefined ? { accept } : {}
    })
  } catch (e) {
    const cause = (e as { cause?: { message?: string } }).cause?.message
    return { kind: "failed", message: `the registry ${where(place)} cannot be reached: ${cause ?? (e as Error).message}` }
  }
  if (response.ok) return response
  await response.body?.cancel()
  if (response.status === 404) return { kind: "absent" }
  if (response.status === 401) {
    const challenge = response.headers.get("www-authenticate") ?? ""
    return {
      kind: "failed",
      message: `the registry ${where(place)} asks for credentials (${challenge.split(" ")[0] || "401"} authentication), which this server does not give`
    }
  }
  return { kind: "failed", message: `the registry ${where(place)} answered ${response.status} ${response.statusText} for ${kind}/${digest}` }
}

/** the manifest's bytes, at most LIMIT of them */
export const fetchManifest = async (place: RegistryPlace, digest: string, limit: number): Promise<Uint8Array | Fetched> => {
  const response = await get(place, "manifests", digest, manifestMediaTypes.join(", "))
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
export const fetchBlob = async (place: RegistryPlace, digest: string, write: (chunk: Uint8Array) => boolean): Promise<Fetched> => {
  const response = await get(place, "blobs", digest)
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
