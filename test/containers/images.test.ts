import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterEach, describe, expect, it, vi } from "vitest"
import * as StoreImageSource from "../../layers/StoreImageSource.js"
import type { ClientImage } from "../../src/containers/Client.js"
import { sha256 } from "../../src/containers/OciImage.js"
import { ServerChannel } from "../../src/containers/Wire.js"
import { buildImage, busyboxImage, type BuiltImage } from "../support/ociImages.js"
import { registryHolding, startRegistry, storeUnder } from "../support/registry.js"
import type { TarSpec } from "../support/tarBuild.js"
import { makeWorld, request, type World } from "./world.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 })

/**
 * Images for real (docs/containers.md section 7), through the real WebSocket server and the
 * in-process deployer: the store on disk under each test's ROOT, a real registry on loopback
 * (Debian's docker-registry, filled by skopeo from an OCI layout), the client over the oci
 * channels; Debian's busybox-static in two gzip layers, the second with whiteouts.
 */
const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-images-"))
const busybox = busyboxImage()
/** pushed to the registry, and never offered by a client */
const inRegistry = busyboxImage({ run: { Entrypoint: ["/bin/busybox"], Cmd: ["echo", "from the registry"], Env: ["PATH=/bin"] } })
const registry = registryHolding(dir, inRegistry, "tests/busybox")
const worlds: Array<World> = []
let unpacked: Array<string> = []

afterEach(async () => {
  for (const w of worlds.splice(0)) await w.close()
  unpacked = []
})

const open = async (registries: unknown = { registries: [{ url: registry().url, repositories: ["tests/busybox"] }]}) => {
  const w = await makeWorld({
    imageSource: (root) => storeUnder(root, registries, (digest) => unpacked.push(digest))
  })
  worlds.push(w)
  return w
}

const clientImages = (...images: ReadonlyArray<BuiltImage | [string, ClientImage]>) =>
  new Map(images.map((i) => (Array.isArray(i) ? i : [i.digest, i.client()] as [string, ClientImage])))

/** runs IMAGE to its id (or error) and gives the first answer and the oci channels the server opened */
const runImage = async (w: World, digest: string, images = new Map<string, ClientImage>(), identity = "alice") => {
  const channels: Array<number> = []
  const run = (await w.client(identity)).run(request(digest), { images, onServerChannel: (c) => channels.push(c.request[0]!) })
  const first = await run.first
  if (first.kind === "id") {
    run.stop()
  }
  await run.finished
  return { first, oci: channels.filter((t) => t === ServerChannel.ociHas || t === ServerChannel.ociManifest || t === ServerChannel.ociBlob) }
}

/** the busybox image's rootfs, as both its layers make it */
const expectBusyboxRootfs = (rootfs: string) => {
  expect(Fs.readFileSync(Path.join(rootfs, "bin/busybox")).equals(Fs.readFileSync("/bin/busybox"))).toBe(true)
  expect(Fs.statSync(Path.join(rootfs, "bin/busybox")).mode & 0o777).toBe(0o755)
  expect(Fs.readlinkSync(Path.join(rootfs, "bin/sh"))).toBe("busybox")
  // the hard link of layer 2 to layer 1's file
  expect(Fs.statSync(Path.join(rootfs, "bin/bb")).ino).toBe(Fs.statSync(Path.join(rootfs, "bin/busybox")).ino)
  expect(Fs.readFileSync(Path.join(rootfs, "etc/motd"), "utf8")).toBe("layer 2\n")
  // `.wh.gone` removed layer 1's file; `.wh..wh..opq` all of /var/cache that layer 1 made, not layer 2's own c
  expect(Fs.existsSync(Path.join(rootfs, "etc/gone"))).toBe(false)
  expect(Fs.readdirSync(Path.join(rootfs, "etc")).sort()).toEqual(["motd"])
  expect(Fs.readdirSync(Path.join(rootfs, "var/cache")).sort()).toEqual(["c"])
  expect(Fs.statSync(Path.join(rootfs, "tmp")).mode & 0o7777).toBe(0o1777)
}

/** the rootfs runs: busybox's sh in a sandbox whose / is the rootfs, read-only */
const runInRootfs = (rootfs: string, script: string) =>
  spawnSync("bwrap", ["--ro-bind", rootfs, "/", "--unshare-all", "--die-with-parent", "--clearenv", "--setenv", "PATH", "/bin", "--chdir", "/etc", "/bin/sh", "-c", script], { encoding: "utf8", timeout: 60_000 })

describe("images from the store, the client and a registry", () => {
  it("an image by digest from the registry the policy lists: every blob fetched, verified, unpacked with its whiteouts", async () => {
    const w = await open()
    const { first, oci } = await runImage(w, inRegistry.digest)
    expect(first).toMatchObject({ kind: "id" })
    // the client was asked (oci-has) and did not hold it: the registry gave it
    expect(oci).toEqual([ServerChannel.ociHas])
    const got = registry().requests()
    expect(got).toContain(`GET /v2/tests/busybox/manifests/${inRegistry.digest}`)
    for (const d of inRegistry.blobs.keys()) expect(got).toContain(`GET /v2/tests/busybox/blobs/${d}`)
    const image = w.deploys[0]!.spec.image
    expect(image).toMatchObject({ digest: inRegistry.digest, entrypoint: ["/bin/busybox"], cmd: ["echo", "from the registry"], env: ["PATH=/bin"], workingDir: "/" })
    expect(image.rootfs).toBe(Path.join(w.root, "store", "rootfs", inRegistry.digest.slice(7)))
    expectBusyboxRootfs(image.rootfs)
    const ran = runInRootfs(image.rootfs, "cat /etc/motd; ls /var/cache; pwd")
    expect(ran.stdout, ran.stderr).toBe("layer 2\nc\n/etc\n")
    // held for alice from now on, in OCI image-layout form
    const layout = Path.join(w.root, "store", "images", "alice")
    expect(JSON.parse(Fs.readFileSync(Path.join(layout, "oci-layout"), "utf8"))).toEqual({ imageLayoutVersion: "1.0.0" })
    expect(JSON.parse(Fs.readFileSync(Path.join(layout, "index.json"), "utf8")).manifests.map((m: { digest: string }) => m.digest)).toEqual([inRegistry.digest])
    for (const [d, bytes] of [[inRegistry.digest, inRegistry.manifest] as const, ...inRegistry.blobs]) {
      expect(Fs.readFileSync(Path.join(layout, "blobs", "sha256", d.slice(7))).equals(bytes)).toBe(true)
    }
    expect(unpacked).toEqual([inRegistry.digest])
  })

  it("an image from the client over oci-has, oci-manifest and oci-blob; the image's Entrypoint, Cmd, Env and WorkingDir handed on", async () => {
    const w = await open({ registries: [] })
    const { first, oci } = await runImage(w, busybox.digest, clientImages(busybox))
    expect(first).toMatchObject({ kind: "id" })
    expect(oci).toEqual([ServerChannel.ociHas, ServerChannel.ociManifest, ServerChannel.ociBlob, ServerChannel.ociBlob, ServerChannel.ociBlob])
    const image = w.deploys[0]!.spec.image
    expect(image).toMatchObject({ entrypoint: ["/bin/sh", "-c"], cmd: ["cat /etc/motd"], env: ["PATH=/bin", "GREETING=hello"], workingDir: "/etc" })
    expect(image.layers.map((l) => l.digest)).toEqual(busybox.layers.map((l) => l.digest))
    expect(Buffer.from(image.manifest).equals(busybox.manifest)).toBe(true)
    expectBusyboxRootfs(image.rootfs)
    expect(Fs.readdirSync(Path.join(w.root, "store", "tmp"))).toEqual([])
  })

  it("from the store: a second run of the image fetches nothing and unpacks nothing; another identity does not get it", async () => {
    const w = await open({ registries: [] })
    expect((await runImage(w, busybox.digest, clientImages(busybox))).first).toMatchObject({ kind: "id" })
    const rootfs = w.deploys[0]!.spec.image.rootfs
    const inode = Fs.statSync(rootfs).ino
    const again = await runImage(w, busybox.digest)
    expect(again.first).toMatchObject({ kind: "id" })
    expect(again.oci).toEqual([])
    expect(w.deploys[1]!.spec.image.rootfs).toBe(rootfs)
    expect(Fs.statSync(rootfs).ino).toBe(inode)
    expect(unpacked).toEqual([busybox.digest])
    // bob's client does not hold it and no registry has it: alice's image is not bob's
    const bob = await runImage(w, busybox.digest, new Map(), "bob")
    expect(bob.first).toMatchObject({ kind: "error", message: expect.stringContaining(`no source has the image ${busybox.digest}: it is not held for bob`) })
    // bob's own client gives it: verified for him, and the rootfs made once is used again
    expect((await runImage(w, busybox.digest, clientImages(busybox), "bob")).first).toMatchObject({ kind: "id" })
    expect(unpacked).toEqual([busybox.digest])
  })

  it("concurrent runs of one manifest unpack it once", async () => {
    const w = await open({ registries: [] })
    const runs = await Promise.all(["alice", "bob", "carol", "alice"].map((who) => runImage(w, busybox.digest, clientImages(busybox), who)))
    for (const r of runs) expect(r.first).toMatchObject({ kind: "id" })
    expect(unpacked).toEqual([busybox.digest])
    expect(new Set(w.deploys.map((d) => d.spec.image.rootfs)).size).toBe(1)
  })

  it("a tampered manifest, config or layer from the client is the run's error, naming which and why; nothing of it is kept", async () => {
    const w = await open({ registries: [] })
    // the config and layer 1 come whole in the layer cases: kept, and not asked for again
    const [config, , layer2] = [...busybox.blobs.keys()]
    const tampered = (change: (blobs: Map<string, Buffer>) => Buffer | void): [string, ClientImage] => {
      const blobs = new Map(busybox.blobs)
      const manifest = change(blobs) ?? busybox.manifest
      return [busybox.digest, { repository: "tests/busybox", manifest, blobs }]
    }
    const flip = (b: Buffer) => {
      const c = Buffer.from(b)
      c[c.length >> 1]! ^= 1
      return c
    }
    const cases: Array<[string, [string, ClientImage], RegExp]> = [
      ["manifest", tampered(() => Buffer.concat([busybox.manifest, Buffer.from("\n")])), /^the manifest from the client is not the image sha256:\w+: its bytes hash to sha256:/],
      ["config", tampered((b) => void b.set(config!, flip(b.get(config!)!))), /^the config sha256:\w+ from the client is not what the manifest names: its bytes hash to sha256:/],
      ["layer", tampered((b) => void b.set(layer2!, flip(b.get(layer2!)!))), /^the layer sha256:\w+ \(2 of 2\) from the client is not what the manifest names: its bytes hash to/],
      ["longer layer", tampered((b) => void b.set(layer2!, Buffer.concat([b.get(layer2!)!, Buffer.from("x")]))), /^the layer sha256:\w+ \(2 of 2\) from the client is not what the manifest names: more than the \d+ bytes its descriptor says came/]
    ]
    for (const [which, image, message] of cases) {
      const { first } = await runImage(w, busybox.digest, new Map([image]))
      expect(first, which).toMatchObject({ kind: "error" })
      expect((first as { message: string }).message, which).toMatch(message)
    }
    expect(w.deploys).toHaveLength(0)
    expect(unpacked).toEqual([])
    expect(Fs.readdirSync(Path.join(w.root, "store", "rootfs"))).toEqual([])
    expect(Fs.readdirSync(Path.join(w.root, "store", "tmp"))).toEqual([])
    // no tampered byte is in the layout: every blob there is what its name says
    const blobs = Path.join(w.root, "store", "images", "alice", "blobs", "sha256")
    for (const hex of Fs.readdirSync(blobs)) expect(sha256(Fs.readFileSync(Path.join(blobs, hex)))).toBe(`sha256:${hex}`)
    // and the image, given whole, runs
    expect((await runImage(w, busybox.digest, clientImages(busybox))).first).toMatchObject({ kind: "id" })
  })

  it("a layer tampered in the registry is the run's error", async () => {
    const reg = await startRegistry(Path.join(dir, "tampered-registry"))
    try {
      const image = buildImage([[{ path: "f", type: "file", content: "the real bytes" }]])
      image.writeLayout(Path.join(dir, "tampered-layout"))
      reg.push(Path.join(dir, "tampered-layout"), "tests/tampered")
      const file = reg.blobFile(image.layers[0]!.digest)
      const bytes = Fs.readFileSync(file)
      bytes[bytes.length - 5]! ^= 0xff
      Fs.writeFileSync(file, bytes)
      const w = await open({ registries: [{ url: reg.url, repositories: ["tests/tampered"] }] })
      const { first } = await runImage(w, image.digest)
      expect(first).toMatchObject({
        kind: "error",
        message: expect.stringMatching(new RegExp(`^the layer ${image.layers[0]!.digest} \\(1 of 1\\) from the registry ${reg.url}/tests/tampered is not what the manifest names: its bytes hash to`))
      })
      expect(w.deploys).toHaveLength(0)
    } finally {
      await reg.stop()
    }
  })

  it("a Docker schema 2 image (Docker manifest and layer media types) from the registry", async () => {
    registry().push(Path.join(dir, "layout"), "tests/docker", "latest", "docker")
    const head = await fetch(`${registry().url}/v2/tests/docker/manifests/latest`, { headers: { accept: "application/vnd.docker.distribution.manifest.v2+json" } })
    const manifest = Buffer.from(await head.arrayBuffer())
    expect(JSON.parse(manifest.toString()).mediaType).toBe("application/vnd.docker.distribution.manifest.v2+json")
    const digest = sha256(manifest)
    expect(digest).not.toBe(inRegistry.digest)
    const w = await open({ registries: [{ url: registry().url, repositories: ["tests/absent", "tests/docker"] }] })
    expect((await runImage(w, digest)).first).toMatchObject({ kind: "id" })
    const image = w.deploys[0]!.spec.image
    expect(image.layers.map((l) => l.mediaType)).toEqual(["application/vnd.docker.image.rootfs.diff.tar.gzip", "application/vnd.docker.image.rootfs.diff.tar.gzip"])
    expect(image).toMatchObject({ entrypoint: ["/bin/busybox"], cmd: ["echo", "from the registry"] })
    expectBusyboxRootfs(image.rootfs)
  })

  it("a registry's redirects are followed (a registry commonly sends blobs from elsewhere)", async () => {
    const redirects: Array<string> = []
    const redirector = Http.createServer((req, res) => {
      redirects.push(req.url!)
      res.writeHead(307, { location: `${registry().url}${req.url}` })
      res.end()
    })
    await new Promise<void>((resolve) => redirector.listen(0, "127.0.0.1", resolve))
    try {
      const port = (redirector.address() as { port: number }).port
      const w = await open({ registries: [{ url: `http://127.0.0.1:${port}`, repositories: ["tests/busybox"] }] })
      expect((await runImage(w, inRegistry.digest)).first).toMatchObject({ kind: "id" })
      expect(redirects).toEqual([`/v2/tests/busybox/manifests/${inRegistry.digest}`, ...[...inRegistry.blobs.keys()].map((d) => `/v2/tests/busybox/blobs/${d}`)])
      expectBusyboxRootfs(w.deploys[0]!.spec.image.rootfs)
    } finally {
      redirector.close()
    }
  })

  it("what a server that stopped mid-fetch or mid-unpack left in the store's tmp is removed when it starts", async () => {
    const store = Path.join(dir, "restarted-store")
    Fs.mkdirSync(Path.join(store, "tmp", "rootfs-half", "bin"), { recursive: true })
    Fs.writeFileSync(Path.join(store, "tmp", "blob-half"), "half a layer")
    StoreImageSource.make({ store })
    expect(Fs.readdirSync(Path.join(store, "tmp"))).toEqual([])
    expect(Fs.readdirSync(Path.join(store, "rootfs"))).toEqual([])
  })

  it("a layer whose uncompressed bytes are not the config's diff_id is the run's error", async () => {
    const w = await open({ registries: [] })
    const image = busyboxImage({ diffIds: [sha256(Buffer.from("one")), sha256(Buffer.from("two"))] })
    const { first } = await runImage(w, image.digest, clientImages(image))
    expect(first).toMatchObject({
      kind: "error",
      message: expect.stringMatching(/^the layer sha256:\w+ \(1 of 2\) is not the image's: its uncompressed bytes hash to sha256:\w+ where the config's diff_id says sha256:/)
    })
    expect(Fs.readdirSync(Path.join(w.root, "store", "rootfs"))).toEqual([])
    expect(Fs.readdirSync(Path.join(w.root, "store", "tmp"))).toEqual([])
  })

  it("a layer whose entries would leave the rootfs is refused: an absolute path, .., a symlink, a hard link", async () => {
    const w = await open({ registries: [] })
    const outside = Path.join(w.root, "outside")
    Fs.mkdirSync(outside)
    Fs.writeFileSync(Path.join(outside, "secret"), "not the image's")
    const base: Array<TarSpec> = [{ path: "etc/", type: "directory" }, { path: "etc/ok", type: "file", content: "ok" }]
    const cases: Array<[string, Array<TarSpec>, string]> = [
      ["absolute", [{ path: `${outside}/planted`, type: "file", content: "x" }], `the entry ${JSON.stringify(`${outside}/planted`)} is an absolute path`],
      ["dot-dot", [{ path: "etc/../../planted", type: "file", content: "x" }], 'the entry "etc/../../planted" climbs out with ..'],
      ["symlink", [{ path: "out", type: "symlink", target: outside }, { path: "out/planted", type: "file", content: "x" }], 'the entry "out/planted" goes through the symlink "out"'],
      ["symlink directory", [{ path: "up", type: "symlink", target: "../../.." }, { path: "up/planted/", type: "directory" }], 'the entry "up/planted/" goes through the symlink "up"'],
      ["hard link", [{ path: "etc/secret", type: "link", target: `${outside}/secret` }], `the hard link "etc/secret" to ${JSON.stringify(`${outside}/secret`)} is an absolute path`],
      ["hard link dot-dot", [{ path: "etc/secret", type: "link", target: "../outside/secret" }], 'the hard link "etc/secret" to "../outside/secret" climbs out with ..'],
      ["hard link through a symlink", [{ path: "out", type: "symlink", target: outside }, { path: "etc/secret", type: "link", target: "out/secret" }], 'the entry "out/secret" goes through the symlink "out"']
    ]
    for (const [which, entries, why] of cases) {
      const image = buildImage([base, entries])
      const { first } = await runImage(w, image.digest, clientImages(image))
      expect(first, which).toMatchObject({ kind: "error" })
      expect((first as { message: string }).message, which).toBe(`the layer ${image.layers[1]!.digest} (2 of 2) is refused: ${why}`)
    }
    expect(Fs.readdirSync(outside)).toEqual(["secret"])
    expect(Fs.existsSync(Path.join(w.root, "planted"))).toBe(false)
    expect(Fs.existsSync("/planted")).toBe(false)
    expect(Fs.readdirSync(Path.join(w.root, "store", "rootfs"))).toEqual([])
    expect(Fs.readdirSync(Path.join(w.root, "store", "tmp"))).toEqual([])
    expect(w.deploys).toHaveLength(0)
  })

  it("a symlink the image holds is written as a symlink and never followed; a later entry replaces it", async () => {
    const w = await open({ registries: [] })
    const image = buildImage([
      [{ path: "etc", type: "symlink", target: "/etc" }, { path: "passwd", type: "symlink", target: "/etc/passwd" }],
      [{ path: "etc/", type: "directory" }, { path: "etc/own", type: "file", content: "own" }, { path: "passwd", type: "file", content: "image" }]
    ], { compression: "tar" })
    const before = Fs.readFileSync("/etc/passwd", "utf8")
    expect((await runImage(w, image.digest, clientImages(image))).first).toMatchObject({ kind: "id" })
    const rootfs = w.deploys[0]!.spec.image.rootfs
    expect(Fs.lstatSync(Path.join(rootfs, "etc")).isDirectory()).toBe(true)
    expect(Fs.readdirSync(Path.join(rootfs, "etc"))).toEqual(["own"])
    expect(Fs.lstatSync(Path.join(rootfs, "passwd")).isFile()).toBe(true)
    expect(Fs.readFileSync("/etc/passwd", "utf8")).toBe(before)
  })

  it("an image from nowhere, a digest that names an index, a registry whose token service refuses an anonymous pull: each the run's error saying so", async () => {
    // a registry whose realm is itself and gives no token without credentials
    const challenger = Http.createServer((req, res) => {
      res.writeHead(401, req.url?.startsWith("/token") ? {} : { "www-authenticate": `Bearer realm="http://${req.headers.host}/token",service="registry"` })
      res.end()
    })
    await new Promise<void>((resolve) => challenger.listen(0, "127.0.0.1", resolve))
    try {
      const port = (challenger.address() as { port: number }).port
      const w = await open({ registries: [{ url: registry().url, repositories: ["tests/absent"] }, { url: `http://127.0.0.1:${port}`, repositories: ["tests/private"] }] })
      const nowhere = await runImage(w, busybox.digest)
      expect(nowhere.first).toMatchObject({
        kind: "error",
        message: `no source has the image ${busybox.digest}: it is not held for alice, the client does not hold it, and the registry http://127.0.0.1:${port}/tests/private refused an anonymous pull (its token service answered 401), and ${Path.join(w.root, "registry-credentials", "alice.json")} has no credentials for 127.0.0.1:${port}`
      })
      const index = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json", manifests: [] }))
      const indexRun = await runImage(w, sha256(index), new Map([[sha256(index), { repository: "tests/index", manifest: index, blobs: new Map() }]]))
      expect(indexRun.first).toMatchObject({ kind: "error", message: expect.stringContaining("names an image index, not an image manifest") })
    } finally {
      challenger.close()
    }
  })

  it("a registry policy that is not valid is the run's error naming the file; the image policy refuses before anything", async () => {
    const w = await open({ registries: [{ url: "ftp://nowhere" }] })
    const bad = await runImage(w, inRegistry.digest)
    expect(bad.first).toMatchObject({ kind: "error", message: expect.stringContaining(`the registry policy ${Path.join(w.root, "registries.json")} lists a registry whose url is not http(s)`) })
    Fs.writeFileSync(Path.join(w.root, "image-policy.json"), JSON.stringify({ refuse: [busybox.digest] }))
    const refused = await runImage(w, busybox.digest, clientImages(busybox))
    expect(refused.first).toMatchObject({ kind: "error" })
    expect(refused.oci).toEqual([])
  })
})
