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
 */
export interface TestRegistry {
  /** http://127.0.0.1:PORT */
  readonly url: string
  /** pushes the OCI layout at LAYOUT (tag REF) as REPOSITORY:REF; as a Docker schema 2 image (a manifest of another digest) with `docker` */
  readonly push: (layout: string, repository: string, ref?: string, docker?: "docker") => void
  /** where the registry keeps the blob DIGEST's bytes (a test tampers with them there) */
  readonly blobFile: (digest: string) => string
  readonly requests: () => ReadonlyArray<string>
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

export const startRegistry = async (dir: string): Promise<TestRegistry> => {
  Fs.mkdirSync(dir, { recursive: true })
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
    // ready when it answers /v2/; gone when another process took the port first
    for (;;) {
      if (gone) break
      const ok = await fetch(`${url}/v2/`).then((r) => r.ok, () => false)
      if (ok) break
      await new Promise((r) => setTimeout(r, 20))
    }
    if (gone) {
      if (attempt < 5) continue
      throw new Error(`docker-registry did not start: ${Fs.readFileSync(log, "utf8").slice(-2000)}`)
    }
    return {
      url,
      push: (layout, repository, ref = "latest", docker) => {
        const format = docker === undefined ? ["--preserve-digests"] : ["--format", "v2s2"]
        const r = spawnSync(
          "skopeo",
          ["copy", "--insecure-policy", "--dest-tls-verify=false", ...format, `oci:${layout}:${ref}`, `docker://127.0.0.1:${port}/${repository}:${ref}`],
          { encoding: "utf8", timeout: 120_000 }
        )
        if (r.status !== 0) throw new Error(`skopeo copy failed: ${r.stderr}`)
      },
      blobFile: (digest) => Path.join(storage, "docker", "registry", "v2", "blobs", "sha256", digest.slice(7, 9), digest.slice(7), "data"),
      requests: () => Fs.readFileSync(log, "utf8").split("\n").flatMap((l) => /"(GET|HEAD) (\/v2\/\S+) HTTP/.exec(l)?.slice(1, 3).join(" ") ?? []),
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

/** The image store under ROOT, fetching from the registries REGISTRIES lists (written to ROOT/registries.json). */
export const storeUnder = (root: string, registries: unknown, onUnpack: (digest: string) => void) => {
  Fs.writeFileSync(Path.join(root, "registries.json"), JSON.stringify(registries))
  return StoreImageSource.layer({
    store: Path.join(root, "store"),
    registries: Path.join(root, "registries.json"),
    imagePolicy: Path.join(root, "image-policy.json"),
    onUnpack
  })
}
