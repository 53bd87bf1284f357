import * as Fs from "node:fs"
import * as Http from "node:http"
import type * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest"
import { busyboxImage } from "../support/ociImages.js"
import { startRegistry, storeUnder, type TestRegistry } from "../support/registry.js"
import { startTokenServer, type TokenServer } from "../support/tokenServer.js"
import { makeWorld, request, type World } from "./world.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 })

/**
 * Registries that ask for a sign-in (docs/containers.md section 7): Debian's docker-registry
 * with htpasswd (HTTP basic) and with token sign-in against a token server the test runs, the
 * identity's credentials in ROOT/registry-credentials/IDENTITY.json; through the real WebSocket
 * server, the store on disk and the in-process deployer. No client offers the image: only the
 * registry has it.
 */
const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-signin-"))
const user = "puller"
const password = "right-password-7f3a"
const wrongPassword = "wrong-password-91c2"
const image = busyboxImage({ run: { Entrypoint: ["/bin/busybox"], Cmd: ["echo", "signed in"], Env: ["PATH=/bin"] } })
const publicImage = busyboxImage({ run: { Entrypoint: ["/bin/busybox"], Cmd: ["echo", "public"], Env: ["PATH=/bin"] } })

let basic: TestRegistry
let tokens: TokenServer
let tokenRegistry: TestRegistry
const worlds: Array<World> = []

beforeAll(async () => {
  image.writeLayout(Path.join(dir, "layout"))
  publicImage.writeLayout(Path.join(dir, "public-layout"))
  basic = await startRegistry(Path.join(dir, "basic"), { auth: { kind: "htpasswd", users: { [user]: password } }, pushAs: `${user}:${password}` })
  basic.push(Path.join(dir, "layout"), "tests/busybox")
  tokens = await startTokenServer(Path.join(dir, "tokens"), { users: { [user]: password }, anonymousPull: ["tests/public"] })
  tokenRegistry = await startRegistry(Path.join(dir, "token"), {
    auth: { kind: "token", realm: tokens.realm, service: tokens.service, issuer: tokens.issuer, certificate: tokens.certificate },
    pushAs: `${user}:${password}`
  })
  await tokenRegistry.pushWhileServing(Path.join(dir, "layout"), "tests/busybox")
  await tokenRegistry.pushWhileServing(Path.join(dir, "public-layout"), "tests/public")
})

afterAll(async () => {
  await basic?.stop()
  await tokenRegistry?.stop()
  await tokens?.stop()
  Fs.rmSync(dir, { recursive: true, force: true })
})

afterEach(async () => {
  for (const w of worlds.splice(0)) await w.close()
})

const open = async (registry: TestRegistry, repository = "tests/busybox") => {
  const w = await makeWorld({ imageSource: (root) => storeUnder(root, { registries: [{ url: registry.url, repositories: [repository] }] }, () => {}) })
  worlds.push(w)
  return w
}

/** ROOT/registry-credentials/IDENTITY.json with REGISTRIES, mode MODE */
const writeCredentials = (w: World, identity: string, registries: unknown, mode = 0o600) => {
  const credentials = Path.join(w.root, "registry-credentials")
  Fs.mkdirSync(credentials, { recursive: true, mode: 0o700 })
  const file = Path.join(credentials, `${identity}.json`)
  Fs.writeFileSync(file, JSON.stringify({ registries }), { mode })
  Fs.chmodSync(file, mode)
  return file
}

const hostOf = (registry: TestRegistry) => new URL(registry.url).host

/** the run's first answer (its id, or its error) for the image DIGEST, no client offering it */
const runImage = async (w: World, digest: string, identity = "alice") => {
  const run = (await w.client(identity)).run(request(digest), { images: new Map() })
  const first = await run.first
  if (first.kind === "id") run.stop()
  await run.finished
  return first
}

/** what an error must never carry: the password, in clear or as a basic header has it */
const expectNoSecret = (message: string) => {
  for (const secret of [password, wrongPassword]) {
    expect(message).not.toContain(secret)
    expect(message).not.toContain(Buffer.from(`${user}:${secret}`).toString("base64"))
  }
}

describe("a registry with HTTP basic sign-in (htpasswd)", () => {
  it("the identity's username and password pull the image", async () => {
    const w = await open(basic)
    writeCredentials(w, "alice", { [hostOf(basic)]: { username: user, password } })
    expect(await runImage(w, image.digest)).toMatchObject({ kind: "id" })
    expect(w.deploys[0]!.spec.image).toMatchObject({ digest: image.digest, cmd: ["echo", "signed in"] })
    for (const d of image.blobs.keys()) expect(basic.requests()).toContain(`GET /v2/tests/busybox/blobs/${d}`)
  })

  it("a wrong password is the run's error naming the registry, never the password", async () => {
    const w = await open(basic)
    const file = writeCredentials(w, "alice", { [hostOf(basic)]: { username: user, password: wrongPassword } })
    const first = await runImage(w, image.digest)
    expect(first).toMatchObject({ kind: "error", message: expect.stringContaining(`the registry ${basic.url}/tests/busybox refused the credentials ${file} gives for ${hostOf(basic)}`) })
    expectNoSecret((first as { message: string }).message)
    expect(w.deploys).toEqual([])
  })

  it("an identity without credentials is told the registry asks for a sign-in; another identity's credentials are not its own", async () => {
    const w = await open(basic)
    writeCredentials(w, "alice", { [hostOf(basic)]: { username: user, password } })
    // alice signs in first: what her sign-in got is kept for her, not for bob
    expect(await runImage(w, image.digest)).toMatchObject({ kind: "id" })
    const bob = await runImage(w, image.digest, "bob")
    expect(bob).toMatchObject({
      kind: "error",
      message: expect.stringContaining(`the registry ${basic.url}/tests/busybox asks for a sign-in (Basic), and ${Path.join(w.root, "registry-credentials", "bob.json")} has no credentials for ${hostOf(basic)}`)
    })
  })

  it("a credentials file others may read is refused, naming it and its mode, and nothing is pulled", async () => {
    const w = await open(basic)
    const file = writeCredentials(w, "alice", { [hostOf(basic)]: { username: user, password } }, 0o644)
    const before = basic.requests().length
    const first = await runImage(w, image.digest)
    expect(first).toMatchObject({ kind: "error", message: expect.stringContaining(`the registry credentials ${file} may be read or written by others than its owner (mode 0644)`) })
    expectNoSecret((first as { message: string }).message)
    expect(basic.requests().length).toBe(before)
  })
})

describe("a registry with token sign-in (a Bearer challenge and its realm)", () => {
  it("the identity's username and password get a token once for the manifest and every blob", async () => {
    const w = await open(tokenRegistry)
    writeCredentials(w, "alice", { [hostOf(tokenRegistry)]: { username: user, password } })
    const before = tokens.signIns().length
    expect(await runImage(w, image.digest)).toMatchObject({ kind: "id" })
    expect(w.deploys[0]!.spec.image).toMatchObject({ digest: image.digest })
    // the manifest's 401 signed in; the config's and both layers' requests used the kept token
    expect(tokens.signIns().slice(before)).toEqual([{ scope: "repository:tests/busybox:pull", user, granted: true }])
    for (const d of image.blobs.keys()) expect(tokenRegistry.requests()).toContain(`GET /v2/tests/busybox/blobs/${d}`)
  })

  it("a wrong password is the run's error naming the registry, never the password", async () => {
    const w = await open(tokenRegistry)
    const file = writeCredentials(w, "alice", { [hostOf(tokenRegistry)]: { username: user, password: wrongPassword } })
    const first = await runImage(w, image.digest)
    expect(first).toMatchObject({
      kind: "error",
      message: expect.stringContaining(`the registry ${tokenRegistry.url}/tests/busybox refused the credentials ${file} gives for ${hostOf(tokenRegistry)} (its token service answered 401)`)
    })
    expectNoSecret((first as { message: string }).message)
    expect(w.deploys).toEqual([])
  })

  it("without credentials: an anonymous token pulls a public repository, and a private one is refused naming the registry", async () => {
    const w = await open(tokenRegistry, "tests/public")
    const before = tokens.signIns().length
    expect(await runImage(w, publicImage.digest)).toMatchObject({ kind: "id" })
    expect(tokens.signIns().slice(before)).toEqual([{ scope: "repository:tests/public:pull", user: undefined, granted: true }])
    const closed = await open(tokenRegistry)
    expect(await runImage(closed, image.digest)).toMatchObject({
      kind: "error",
      message: expect.stringContaining(`the registry ${tokenRegistry.url}/tests/busybox refused an anonymous pull`)
    })
  })

  it("a token the identity holds is sent as it is, without asking the token service", async () => {
    const w = await open(tokenRegistry)
    writeCredentials(w, "alice", { [hostOf(tokenRegistry)]: { token: tokens.issue("tests/busybox") } })
    const before = tokens.signIns().length
    expect(await runImage(w, image.digest)).toMatchObject({ kind: "id" })
    expect(tokens.signIns().length).toBe(before)
  })
})

describe("where an authorization goes", () => {
  /** a server on loopback answering with HANDLE; its url */
  const serve = async (handle: Http.RequestListener) => {
    const server = Http.createServer(handle)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    return { server, url: `http://127.0.0.1:${(server.address() as Net.AddressInfo).port}` }
  }

  it("the registry's own origin gets it; the storage host its blobs redirect to does not", async () => {
    const storageSaw: Array<string | undefined> = []
    const storage = await serve((req, res) => {
      storageSaw.push(req.headers.authorization)
      res.end(image.blobs.get(req.url!.slice(1)))
    })
    const expected = `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`
    const front = await serve((req, res) => {
      if (req.headers.authorization !== expected) {
        res.writeHead(401, { "www-authenticate": 'Basic realm="front"' }).end()
        return
      }
      const digest = req.url!.split("/").at(-1)!
      if (req.url!.includes("/manifests/")) res.writeHead(200, { "content-type": "application/vnd.oci.image.manifest.v1+json" }).end(image.manifest)
      else res.writeHead(307, { location: `${storage.url}/${digest}` }).end()
    })
    try {
      const w = await makeWorld({ imageSource: (root) => storeUnder(root, { registries: [{ url: front.url, repositories: ["tests/busybox"] }] }, () => {}) })
      worlds.push(w)
      writeCredentials(w, "alice", { [new URL(front.url).host]: { username: user, password } })
      expect(await runImage(w, image.digest)).toMatchObject({ kind: "id" })
      expect(storageSaw).toHaveLength(image.blobs.size)
      expect(storageSaw.every((a) => a === undefined)).toBe(true)
    } finally {
      front.server.close()
      storage.server.close()
    }
  })
})
