import { spawn, spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import { listeningUrl, makeImage } from "./world.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 300_000 })

/**
 * The programs as built (npm run build): ocx2-containers serving with its in-process deployer,
 * and `ocx2 containers` as a person runs it, an image from an OCI image layout on disk.
 */
const dist = Path.resolve(import.meta.dirname, "../../dist")
const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-containers-programs-"))
const root = Path.join(dir, "root")
let server: ReturnType<typeof spawn>
let url: string

const ocx2 = (...args: Array<string>) =>
  spawnSync(process.execPath, [Path.join(dist, "ocx2.mjs"), "containers", ...args, "--server", url, "--token-file", Path.join(dir, "token")], { cwd: dir, encoding: "utf8", timeout: 120_000 })

beforeAll(async () => {
  const token = spawnSync(process.execPath, [Path.join(dist, "ocx2-containers.mjs"), "token", "alice", "--root", root], { encoding: "utf8" })
  expect(token.status, token.stderr).toBe(0)
  Fs.writeFileSync(Path.join(dir, "token"), token.stdout)
  expect(Fs.readFileSync(Path.join(root, "tokens"), "utf8")).toMatch(/^alice [0-9a-f]{64}\n$/)
  server = spawn(process.execPath, [Path.join(dist, "ocx2-containers.mjs"), "serve", "--root", root, "--listen", "127.0.0.1:0", "--deployer", "in-process"], { stdio: ["ignore", "pipe", "inherit"] })
  url = await listeningUrl(server)
}, 120_000)

afterAll(() => {
  server?.kill("SIGTERM")
  Fs.rmSync(dir, { recursive: true, force: true })
})

describe("ocx2-containers and ocx2 containers, as built", () => {
  it("version, volumes and a run from an OCI layout, stopped by SIGINT", async () => {
    const version = ocx2("version")
    expect(version.status, version.stderr).toBe(0)
    expect(JSON.parse(version.stdout).version).toBe("ocx2-containers 1")
    expect(ocx2("volume-create", "data", "persistent").status).toBe(0)
    expect(ocx2("volumes").stdout).toBe("data persistent\n")
    const { digest, image } = makeImage("tests/tool")
    const layout = Path.join(dir, "layout", "blobs", "sha256")
    Fs.mkdirSync(layout, { recursive: true })
    Fs.writeFileSync(Path.join(layout, digest.slice(7)), image.manifest)
    for (const [d, bytes] of image.blobs) Fs.writeFileSync(Path.join(layout, d.slice(7)), bytes)
    const run = spawn(process.execPath, [Path.join(dist, "ocx2.mjs"), "containers", "run", `tests/tool@${digest}`, "--layout", Path.join(dir, "layout"), "--volume", "data:/data:persistent", "--arguments", `{"n": 1}`, "--server", url, "--token-file", Path.join(dir, "token")], { stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    run.stdout!.on("data", (d: Buffer) => (out += d.toString()))
    await new Promise<void>((resolve) => {
      const check = () => (/^id [A-Za-z0-9_-]{43}\n/.test(out) ? resolve() : setTimeout(check, 20))
      check()
    })
    run.kill("SIGINT")
    const code = await new Promise<number | null>((resolve) => run.once("exit", resolve))
    expect(code).toBe(0)
    expect(out).toMatch(/^id \S+\nended\n$/)
  }, 120_000)

  it("refusals and bad usage exit 2 with what is wrong; the run's error exits 1", () => {
    const refused = ocx2("run", `tests/tool@sha256:${"0".repeat(64)}`, "--volume", "nothing:/n:persistent")
    expect(refused.status).toBe(1)
    expect(refused.stderr).toContain("volumes::list")
    const usage = ocx2("run", "no-digest")
    expect(usage.status).toBe(2)
    expect(usage.stderr).toContain("REPOSITORY@sha256:DIGEST")
    const nowhere = ocx2("run", `tests/tool@sha256:${"1".repeat(64)}`)
    expect(nowhere.status).toBe(1)
    expect(nowhere.stderr).toContain("no source has the image")
  })

  it("a token that is not in ROOT/tokens is turned away", () => {
    Fs.writeFileSync(Path.join(dir, "token"), "not-a-token")
    const r = ocx2("version")
    expect(r.status).toBe(1)
    expect(r.stderr).toContain("did not accept the token")
  })
})

describe("ocx2 containers among the commands", () => {
  const plain = (...args: Array<string>) => spawnSync(process.execPath, [Path.join(dist, "ocx2.mjs"), ...args], { cwd: dir, encoding: "utf8", timeout: 120_000 })

  it("is listed by ocx2 --help and ocx2 list, and its help describes every option", () => {
    const help = plain("--help")
    expect(help.status).toBe(0)
    expect(help.stdout).toMatch(/^ {2}- containers +Run a tool container/m)
    expect(plain("list").stdout).toContain("ocx2 containers run|volumes|volume-create|version|output [SUBJECT] [MODE]")
    for (const asked of [plain("help", "containers"), plain("containers", "--help")]) {
      expect(asked.status).toBe(0)
      for (const option of ["--server SERVER", "--token-file TOKEN-FILE", "--layout LAYOUT", "--volume VOLUME", "--fuse-file", "--fuse-directory", "--secrets", "--stream STREAM", "--dry-run"]) {
        expect(asked.stdout).toContain(option)
      }
    }
    // ocx2's own options are not its own: refused (exit 1, as every refusal since issue 40), with how to call it
    const global = plain("--json", "containers", "version")
    expect(global.status).toBe(1)
    expect(JSON.parse(global.stdout).stopped.message).toContain("ocx2 containers COMMAND")
  })

  it("--dry-run checks the arguments, says what it would send and connects to nothing", () => {
    // a server that is not there: a dry run never dials it
    const nowhere = ["--server", "ws://127.0.0.1:9", "--token-file", Path.join(dir, "token")]
    Fs.writeFileSync(Path.join(dir, "token"), "some-token")
    const run = plain("containers", "run", `tests/tool@sha256:${"2".repeat(64)}`, "--arguments", `{"n": 1}`, "--volume", "data:/data:persistent", "--dry-run", ...nowhere)
    expect(run.status, run.stderr).toBe(0)
    expect(run.stdout).toContain(`"image":"sha256:${"2".repeat(64)}"`)
    expect(run.stdout).toContain(`"arguments":{"n": 1}`)
    expect(run.stdout).toContain("nothing was done (a dry run)")
    const create = plain("containers", "volume-create", "v", "persistent", "--dry-run", ...nowhere)
    expect(create.status).toBe(0)
    expect(create.stdout).toContain("create the volume v (persistent)")
    // bad usage is bad usage, dry or not
    const bad = plain("containers", "volume-create", "v", "--dry-run", ...nowhere)
    expect(bad.status).toBe(2)
    expect(bad.stderr).toContain("volume-create takes NAME and MODE")
  })
})
