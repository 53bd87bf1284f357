import { spawn, spawnSync, type ChildProcess } from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Path from "node:path"
import { afterAll, beforeAll } from "vitest"
import * as StoreImageSource from "../../layers/StoreImageSource.js"
import type { BuiltImage } from "./ociImages.js"

/**
 * A real OCI distribution registry on loopback for a test (Debian's `docker-registry`), its
 * storage in DIR, on a port of its own; images are pushed into it from an OCI image layout
 * with `skopeo copy --preserve-digests`, so the registry serves the very manifest digest.
 * With `auth` it asks for a sign-in: HTTP basic against an htpasswd file (bcrypt, written with
 * apache2-utils' `htpasswd -B`), or the distribution specification's token sign-in with tokens
 * from a token server's realm that it trusts by the server's certificate (test/support/tokenServer.ts).
 */
export type RegistryAuth =
  | { readonly kind: "htpasswd"; readonly users: Readonly<Record<string, string>> }
  | { readonly kind: "token"; readonly realm: string; readonly service: string; readonly issuer: string; readonly certificate: string }

export interface RegistryOptions {
  readonly auth?: RegistryAuth
  /** USER:PASSWORD skopeo pushes as, for a registry with auth */
  readonly pushAs?: string
}

export interface TestRegistry {
  /** http://127.0.0.1:PORT */
  readonly url: string
  /** pushes the OCI layout at LAYOUT (tag REF) as REPOSITORY:REF; as a Docker schema 2 image (a manifest of another digest) with `docker` */
  readonly push: (layout: string, repository: string, ref?: string, docker?: "docker") => void
  /** push without blocking this process: a token server it runs must answer skopeo's sign-in */
  readonly pushWhileServing: (layout: string, repository: string, ref?: string) => Promise<void>
  /** where the registry keeps the blob DIGEST's bytes (a test tampers with them there) */
  readonly blobFile: (digest: string) => string
  readonly requests: () => ReadonlyArray<string>
  /** everything the registry logged (a test looks for what must not be there) */
  readonly log: () => string
  readonly stop: () => Promise<void>
}

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = Net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as Net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

/** the registry config's `auth:` section for AUTH, its htpasswd file written in DIR */
const authConfig = (dir: string, auth: RegistryAuth | undefined): ReadonlyArray<string> => {
  if (auth === undefined) return []
  if (auth.kind === "token") {
    return ["auth:", "  token:", `    realm: ${auth.realm}`, `    service: ${auth.service}`, `    issuer: ${auth.issuer}`, `    rootcertbundle: ${auth.certificate}`]
  }
  const file = Path.join(dir, "htpasswd")
  Fs.writeFileSync(file, "")
  for (const [user, password] of Object.entries(auth.users)) {
    // the password on stdin (-i), not in the process list
    const r = spawnSync("htpasswd", ["-B", "-i", file, user], { input: password, encoding: "utf8" })
    if (r.status !== 0) throw new Error(`htpasswd failed (apache2-utils): ${r.stderr ?? r.error}`)
  }
  return ["auth:", "  htpasswd:", "    realm: ocx2-test-registry", `    path: ${file}`]
}

export const startRegistry = async (dir: string, options: RegistryOptions = {}): Promise<TestRegistry> => {
  Fs.mkdirSync(dir, { recursive: true })
  const auth = authConfig(dir, options.auth)
  const storage = Path.join(dir, "storage")
  const log = Path.join(dir, "registry.log")
  for (let attempt = 0; ; attempt++) {
    const port = await freePort()
    const config = Path.join(dir, "config.yml")
    Fs.writeFileSync(
      config,
      [
        "version: 0.1",
        "log:",
        "  level: info",
        "  accesslog:",
        "    disabled: false",
        "storage:",
        "  filesystem:",
        `    rootdirectory: ${storage}`,
        "http:",
        `  addr: 127.0.0.1:${port}`,
        "  secret: a-test-secret",
        ...auth,
        ""
      ].join("\n")
    )
    const out = Fs.openSync(log, "a")
    const child: ChildProcess = spawn("docker-registry", ["serve", config], { stdio: ["ignore", out, out] })
    Fs.closeSync(out)
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
    let gone = false
    void exited.then(() => (gone = true))
    const url = `http://127.0.0.1:${port}`
    // ready when it answers /v2/ (401 when it asks for a sign-in); gone when another process took the port first
    for (;;) {
      if (gone) break
      const ok = await fetch(`${url}/v2/`).then((r) => r.ok || r.status === 401, () => false)
      if (ok) break
      await new Promise((r) => setTimeout(r, 20))
    }
    if (gone) {
      if (attempt < 5) continue
      throw new Error(`docker-registry did not start: ${Fs.readFileSync(log, "utf8").slice(-2000)}`)
    }
    const skopeoCopy = (layout: string, repository: string, ref: string, docker: "docker" | undefined) => [
      "copy",
      "--insecure-policy",
      "--dest-tls-verify=false",
      ...(docker === undefined ? ["--preserve-digests"] : ["--format", "v2s2"]),
      ...(options.pushAs !== undefined ? ["--dest-creds", options.pushAs] : []),
      `oci:${layout}:${ref}`,
      `docker://127.0.0.1:${port}/${repository}:${ref}`
    ]
    return {
      url,
      push: (layout, repository, ref = "latest", docker) => {
        const r = spawnSync("skopeo", skopeoCopy(layout, repository, ref, docker), { encoding: "utf8", timeout: 120_000 })
        if (r.status !== 0) throw new Error(`skopeo copy failed: ${r.stderr}`)
      },
      pushWhileServing: (layout, repository, ref = "latest") =>
        new Promise<void>((resolve, reject) => {
          const child = spawn("skopeo", skopeoCopy(layout, repository, ref, undefined), { stdio: ["ignore", "ignore", "pipe"] })
          let stderr = ""
          child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()))
          child.once("error", reject)
          child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`skopeo copy failed: ${stderr}`))))
        }),
      blobFile: (digest) => Path.join(storage, "docker", "registry", "v2", "blobs", "sha256", digest.slice(7, 9), digest.slice(7), "data"),
      requests: () => Fs.readFileSync(log, "utf8").split("\n").flatMap((l) => /"(GET|HEAD) (\/v2\/\S+) HTTP/.exec(l)?.slice(1, 3).join(" ") ?? []),
      log: () => Fs.readFileSync(log, "utf8"),
      stop: async () => {
        if (!gone) child.kill("SIGTERM")
        await exited
      }
    }
  }
}

/**
 * A test file's registry (its top level calls this once): started before its cases in DIR/registry,
 * holding IMAGE as REPOSITORY (pushed from its layout in DIR/layout); stopped, and DIR removed, after them.
 */
export const registryHolding = (dir: string, image: BuiltImage, repository: string): (() => TestRegistry) => {
  let registry: TestRegistry | undefined
  beforeAll(async () => {
    registry = await startRegistry(Path.join(dir, "registry"))
    image.writeLayout(Path.join(dir, "layout"))
    registry.push(Path.join(dir, "layout"), repository)
  })
  afterAll(async () => {
    await registry?.stop()
    Fs.rmSync(dir, { recursive: true, force: true })
  })
  return () => registry!
}

/**
 * The image store under ROOT, fetching from the registries REGISTRIES lists (written to
 * ROOT/registries.json), signing in with ROOT/registry-credentials/IDENTITY.json as the server does.
 */
export const storeUnder = (root: string, registries: unknown, onUnpack: (digest: string) => void) => {
  Fs.writeFileSync(Path.join(root, "registries.json"), JSON.stringify(registries))
  return StoreImageSource.layer({
    store: Path.join(root, "store"),
    registries: Path.join(root, "registries.json"),
    credentials: Path.join(root, "registry-credentials"),
    imagePolicy: Path.join(root, "image-policy.json"),
    onUnpack
  })
}
