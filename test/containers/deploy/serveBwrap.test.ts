import { spawn, spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it, vi } from "vitest"
import { makeImage } from "../world.js"
import { dist, listeningUrl, tempDir } from "./deployWorld.js"

vi.setConfig({ testTimeout: 300_000 })

/** `ocx2-containers serve --deployer bwrap` as built: it finds its proxy and relay beside itself. */
const dir = tempDir("serve-bwrap")
afterAll(() => Fs.rmSync(dir, { recursive: true, force: true }))

describe("ocx2-containers serve --deployer bwrap, as built", () => {
  it("serves, deploys through bubblewrap (an image given without a rootfs is the run's error) and stops on SIGTERM", async () => {
    const root = Path.join(dir, "root")
    const program = Path.join(dist, "ocx2-containers.mjs")
    const token = spawnSync(process.execPath, [program, "token", "alice", "--root", root], { encoding: "utf8" })
    Fs.writeFileSync(Path.join(dir, "token"), token.stdout)
    const bad = spawnSync(process.execPath, [program, "serve", "--root", root, "--deployer", "docker"], { encoding: "utf8" })
    expect(bad.status).toBe(2)
    expect(bad.stderr).toContain("--deployer bwrap (containers) or in-process")

    const server = spawn(process.execPath, [program, "serve", "--root", root, "--listen", "127.0.0.1:0", "--deployer", "bwrap"], { stdio: ["ignore", "pipe", "inherit"] })
    const url = await listeningUrl(server)
    const { digest, image } = makeImage("tests/tool")
    const layout = Path.join(dir, "layout", "blobs", "sha256")
    Fs.mkdirSync(layout, { recursive: true })
    Fs.writeFileSync(Path.join(layout, digest.slice(7)), image.manifest)
    for (const [d, bytes] of image.blobs) Fs.writeFileSync(Path.join(layout, d.slice(7)), bytes)
    const run = spawnSync(process.execPath, [Path.join(dist, "ocx2.mjs"), "containers", "run", `tests/tool@${digest}`, "--layout", Path.join(dir, "layout"), "--server", url, "--token-file", Path.join(dir, "token")], { encoding: "utf8", timeout: 120_000 })
    expect(run.status, run.stderr).toBe(1)
    expect(run.stderr).toContain(`the deploy did not complete: the image ${digest} was given with no unpacked rootfs`)
    server.kill("SIGTERM")
    expect(await new Promise((resolve) => server.once("exit", (code) => resolve(code)))).toBe(0)
  })
})
