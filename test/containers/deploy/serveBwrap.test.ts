import { spawn, spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it, vi } from "vitest"
import { buildImage } from "../../support/ociImages.js"
import { containersUnder, dist, leftovers, listeningUrl, tempDir } from "./deployWorld.js"

vi.setConfig({ testTimeout: 300_000 })

/** `ocx2-containers serve --deployer bwrap` as built: it finds its proxy, relay and FUSE helper beside itself. */
const dir = tempDir("serve-bwrap")
afterAll(() => Fs.rmSync(dir, { recursive: true, force: true }))

describe("ocx2-containers serve --deployer bwrap, as built", () => {
  it("serves, deploys a real image through bubblewrap with a FUSE mount served by ocx2 containers run, and stops on SIGTERM", async () => {
    const root = Path.join(dir, "root")
    const program = Path.join(dist, "ocx2-containers.mjs")
    const token = spawnSync(process.execPath, [program, "token", "alice", "--root", root], { encoding: "utf8" })
    Fs.writeFileSync(Path.join(dir, "token"), token.stdout)
    const bad = spawnSync(process.execPath, [program, "serve", "--root", root, "--deployer", "docker"], { encoding: "utf8" })
    expect(bad.status).toBe(2)
    expect(bad.stderr).toContain("--deployer bwrap (containers) or in-process")

    const server = spawn(process.execPath, [program, "serve", "--root", root, "--listen", "127.0.0.1:0", "--deployer", "bwrap"], { stdio: ["ignore", "pipe", "inherit"] })
    const url = await listeningUrl(server)
    // a real image (busybox), obtained from the client's layout into the server's store, run in a
    // real container whose program reads a FUSE file mount the client serves, and says what it read
    const applets = ["sh", "cat", "grep", "sleep", "wget"]
    const image = buildImage([[
      { path: "bin/", type: "directory" },
      { path: "bin/busybox", type: "file", content: Fs.readFileSync("/bin/busybox"), mode: 0o755 },
      ...applets.map((a) => ({ path: `bin/${a}`, type: "symlink" as const, target: "busybox" })),
      { path: "etc/", type: "directory" },
      { path: "tmp/", type: "directory", mode: 0o1777 }
    ]], {
      run: {
        Entrypoint: ["/bin/sh", "-c"],
        Cmd: ["until grep -q ' /etc/token ' /proc/mounts; do sleep 0.05; done; wget -q -O /dev/null --post-data \"token=$(cat /etc/token)\" http://127.0.0.1:14978/ask/17"],
        Env: ["PATH=/bin"]
      }
    })
    image.writeLayout(Path.join(dir, "layout"))
    Fs.writeFileSync(Path.join(dir, "token-file"), "t0ken")
    const run = spawnSync(process.execPath, [Path.join(dist, "ocx2.mjs"), "containers", "run", `tests/tool@${image.digest}`, "--layout", Path.join(dir, "layout"),
      "--fuse-file", `token:/etc/token:${Path.join(dir, "token-file")}`, "--server", url, "--token-file", Path.join(dir, "token")], { encoding: "utf8", timeout: 120_000 })
    expect(run.status, run.stderr).toBe(0)
    expect(run.stdout).toMatch(/^id \S+$/m)
    expect(run.stdout).toContain(`ask 17 ${Buffer.from("token=t0ken").toString("base64")} (answered with nothing)`)
    expect(run.stdout).toMatch(/^ended$/m)
    // the image was unpacked into the server's store once, and the container left nothing behind
    expect(Fs.readdirSync(Path.join(root, "store", "rootfs"))).toEqual([image.digest.slice(7)])
    // (but the spare stood up ahead for the next run of the same image, which the server frees as it stops)
    expect(containersUnder(root).filter((c) => !c.spare)).toEqual([])
    server.kill("SIGTERM")
    expect(await new Promise((resolve) => server.once("exit", (code) => resolve(code)))).toBe(0)
    expect(Fs.readdirSync(Path.join(root, "containers"))).toEqual([])
    expect(leftovers(root)).toEqual([])
  })
})
