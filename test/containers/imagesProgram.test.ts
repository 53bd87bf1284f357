import { spawn, spawnSync, type ChildProcess } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import { buildImage, busyboxImage } from "../support/ociImages.js"
import { startRegistry, type TestRegistry } from "../support/registry.js"
import { listeningUrl } from "./world.js"

vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 })

/**
 * `ocx2-containers serve` as built, with its image store and registry policy given as options,
 * and `ocx2 containers run` as a person runs it: an image from a real registry on loopback, one
 * from an OCI layout the client offers, and each again from the store.
 */
const dist = Path.resolve(import.meta.dirname, "../../dist")
const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-images-program-"))
const root = Path.join(dir, "root")
const store = Path.join(dir, "elsewhere", "store")
const fromRegistry = busyboxImage({ run: { Cmd: ["from the registry"] } })
const fromLayout = busyboxImage({ run: { Cmd: ["from the layout"] } })
const behindSignIn = busyboxImage({ run: { Cmd: ["behind a sign-in"] } })
let registry: TestRegistry
/** asks for HTTP basic credentials */
let signIn: TestRegistry
let server: ChildProcess
let url: string

beforeAll(async () => {
  registry = await startRegistry(Path.join(dir, "registry"))
  fromRegistry.writeLayout(Path.join(dir, "pushed"))
  registry.push(Path.join(dir, "pushed"), "tests/busybox")
  fromLayout.writeLayout(Path.join(dir, "layout"))
  signIn = await startRegistry(Path.join(dir, "sign-in"), { auth: { kind: "htpasswd", users: { puller: "program-password" } }, pushAs: "puller:program-password" })
  behindSignIn.writeLayout(Path.join(dir, "behind"))
  signIn.push(Path.join(dir, "behind"), "tests/busybox")
  const policy = Path.join(dir, "registries.json")
  Fs.writeFileSync(policy, JSON.stringify({ registries: [{ url: registry.url, repositories: ["tests/busybox"] }] }))
  const token = spawnSync(process.execPath, [Path.join(dist, "ocx2-containers.mjs"), "token", "alice", "--root", root], { encoding: "utf8" })
  expect(token.status, token.stderr).toBe(0)
  Fs.writeFileSync(Path.join(dir, "token"), token.stdout)
  server = spawn(
    process.execPath,
    [Path.join(dist, "ocx2-containers.mjs"), "serve", "--root", root, "--listen", "127.0.0.1:0", "--deployer", "in-process", "--images", "store", "--store", store, "--registries", policy],
    { stdio: ["ignore", "pipe", "inherit"] }
  )
  url = await listeningUrl(server)
})

afterAll(async () => {
  if (server !== undefined && server.exitCode === null) {
    server.kill("SIGTERM")
    await new Promise((resolve) => server.once("exit", resolve))
  }
  await registry?.stop()
  await signIn?.stop()
  Fs.rmSync(dir, { recursive: true, force: true })
})

/** `ocx2 containers run IMAGE ...` to its id, then Ctrl-C */
const run = async (...args: Array<string>): Promise<{ code: number | null; out: string; err: string }> => {
  const child = spawn(process.execPath, [Path.join(dist, "ocx2.mjs"), "containers", "run", ...args, "--server", url, "--token-file", Path.join(dir, "token")], { stdio: ["ignore", "pipe", "pipe"] })
  let out = ""
  let err = ""
  let stopped = false
  child.stdout!.on("data", (d: Buffer) => {
    out += d.toString()
    if (!stopped && /^id \S+\n/.test(out)) stopped = child.kill("SIGINT")
  })
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()))
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
  return { code, out, err }
}

describe("ocx2-containers serve --images store --store DIR --registries FILE, as built", () => {
  it("runs an image from the registry, one from the client's layout, and each again from the store", async () => {
    const first = await run(`tests/busybox@${fromRegistry.digest}`)
    expect(first.code, first.err + first.out).toBe(0)
    expect(first.out).toMatch(/^id \S+\nended\n$/)
    const second = await run(`tests/busybox@${fromLayout.digest}`, "--layout", Path.join(dir, "layout"))
    expect(second.code, second.err).toBe(0)
    for (const image of [fromRegistry, fromLayout]) {
      const rootfs = Path.join(store, "rootfs", image.digest.slice(7))
      expect(Fs.readFileSync(Path.join(rootfs, "etc/motd"), "utf8")).toBe("layer 2\n")
      expect(Fs.existsSync(Path.join(rootfs, "etc/gone"))).toBe(false)
    }
    const held = JSON.parse(Fs.readFileSync(Path.join(store, "images", "alice", "index.json"), "utf8")) as { manifests: Array<{ digest: string }> }
    expect(held.manifests.map((m) => m.digest)).toEqual([fromRegistry.digest, fromLayout.digest])
    const before = registry.requests().length
    const again = await run(`tests/busybox@${fromLayout.digest}`)
    expect(again.code, again.err).toBe(0)
    expect((await run(`tests/busybox@${fromRegistry.digest}`)).code).toBe(0)
    expect(registry.requests().length).toBe(before)
    expect(Fs.existsSync(Path.join(root, "store"))).toBe(false)
  })

  it("signs in to a registry with ROOT/registry-credentials/IDENTITY.json", async () => {
    Fs.writeFileSync(
      Path.join(dir, "registries.json"),
      JSON.stringify({ registries: [{ url: registry.url, repositories: ["tests/busybox"] }, { url: signIn.url, repositories: ["tests/busybox"] }] })
    )
    const host = new URL(signIn.url).host
    const without = await run(`tests/busybox@${behindSignIn.digest}`)
    expect(without.code, without.err + without.out).toBe(1)
    expect(without.err).toContain(`the registry ${signIn.url}/tests/busybox asks for a sign-in (Basic), and ${Path.join(root, "registry-credentials", "alice.json")} has no credentials for ${host}`)
    Fs.mkdirSync(Path.join(root, "registry-credentials"), { mode: 0o700 })
    Fs.writeFileSync(Path.join(root, "registry-credentials", "alice.json"), JSON.stringify({ registries: { [host]: { username: "puller", password: "program-password" } } }), { mode: 0o600 })
    const signedIn = await run(`tests/busybox@${behindSignIn.digest}`)
    expect(signedIn.code, signedIn.err + signedIn.out).toBe(0)
    expect(signedIn.out).toMatch(/^id \S+\nended\n$/)
  })

  it("a tampered layer in the layout the client offers is the run's error, exit 1", async () => {
    // layers of its own: the store already holds busybox's, verified, and would not ask for them
    const tampered = buildImage([[{ path: "one", type: "file", content: "one" }], [{ path: "two", type: "file", content: "2".repeat(100) }]])
    const layout = Path.join(dir, "tampered")
    tampered.writeLayout(layout)
    const layer = Path.join(layout, "blobs", "sha256", tampered.layers[1]!.digest.slice(7))
    const bytes = Fs.readFileSync(layer)
    bytes[bytes.length - 6]! ^= 1
    Fs.writeFileSync(layer, bytes)
    const r = await run(`tests/busybox@${tampered.digest}`, "--layout", layout)
    expect(r.code, r.err + r.out).toBe(1)
    expect(r.err).toContain(`the layer ${tampered.layers[1]!.digest} (2 of 2) from the client is not what the manifest names`)
  })
})
