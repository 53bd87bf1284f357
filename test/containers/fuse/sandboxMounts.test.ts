import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest"
import { hostDirectoryHandler, hostFileHandler } from "../../../src/containers/fuse/HostHandler.js"
import type { FuseHandler } from "../../../src/containers/fuse/Handler.js"
import { until } from "../world.js"
import { busyboxRootfs, ensureHelper, processesSeeing, serve, teardown, testDir, type Served } from "./fuseWorld.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 120_000 })

/**
 * FUSE mounts inside a container as the proxy makes them: the serving program (what the proxy
 * runs, bundled, beside the helper, as a proxy kit lays them out) run by the host's Node through
 * its loader in `bwrap --unshare-user --unshare-pid --unshare-net` with a busybox-static root
 * file system and /dev/fuse; busybox's programs inside read and write the mounts, and the test
 * answers every ask with the handlers a client uses.
 */
beforeAll(() => void ensureHelper())

const dirs: Array<string> = []
const served: Array<Served> = []
afterEach(async () => {
  for (const s of served.splice(0)) await s.close()
  for (const d of dirs.splice(0)) await teardown(d)
})

const world = (name: string) => {
  const dir = testDir(name)
  dirs.push(dir)
  return { dir, rootfs: busyboxRootfs(dir) }
}

const start = async (dir: string, rootfs: string, mounts: Array<{ id: string; target: string; kind: "file" | "directory" }>, handlers: Map<string, FuseHandler>) => {
  const s = await serve({ dir, rootfs, mounts, handlers: (id) => handlers.get(id) })
  served.push(s)
  return s
}

const fuseMountsInside = async (s: Served) => (await s.run("grep fuse.ocx2 /proc/mounts | cut -d' ' -f2")).out.split("\n").filter((l) => l !== "")

describe("FUSE mounts inside a bwrap sandbox with a busybox rootfs", () => {
  it("a file mount and a directory mount: busybox's cat, echo >, ls, mkdir, rm and mv reach the handlers; rm and mv of the file mount fail with EBUSY", async () => {
    const { dir, rootfs } = world("sandbox")
    Fs.writeFileSync(`${dir}/token`, "s3cret\n")
    Fs.mkdirSync(`${dir}/src/lib`, { recursive: true })
    Fs.writeFileSync(`${dir}/src/main.c`, "int main;\n")
    Fs.writeFileSync(`${dir}/src/lib/util.c`, "int util;\n")
    const handlers = new Map<string, FuseHandler>([
      ["token", hostFileHandler(`${dir}/token`)],
      ["src", hostDirectoryHandler(`${dir}/src`)]
    ])
    const s = await start(dir, rootfs, [{ id: "token", target: "/etc/token", kind: "file" }, { id: "src", target: "/src", kind: "directory" }], handlers)
    expect(await fuseMountsInside(s)).toEqual(["/etc/token", "/src"])
    // the host sees neither: they are the sandbox's own
    expect(Fs.readFileSync("/proc/self/mounts", "utf8")).not.toContain(" /src fuse")

    expect(await s.run("cat /etc/token; ls /src; ls /src/lib; cat /src/main.c /src/lib/util.c")).toEqual({
      code: 0,
      out: "s3cret\nlib\nmain.c\nutil.c\nint main;\nint util;\n"
    })
    expect(await s.run("echo rotated > /etc/token && cat /etc/token")).toEqual({ code: 0, out: "rotated\n" })
    expect(Fs.readFileSync(`${dir}/token`, "utf8")).toBe("rotated\n")

    const rm = await s.run("rm -f /etc/token")
    expect(rm.code).not.toBe(0)
    expect(rm.out).toContain("Device or resource busy")
    const mv = await s.run("mv /etc/token /etc/moved")
    expect(mv.code).not.toBe(0)
    expect(mv.out).toContain("Device or resource busy")
    expect(Fs.readFileSync(`${dir}/token`, "utf8")).toBe("rotated\n")

    expect(
      await s.run("mkdir /src/out && echo built > /src/out/a.o && mv /src/out/a.o /src/out/b.o && rm /src/lib/util.c && ls /src/out && cat /src/out/b.o")
    ).toEqual({ code: 0, out: "b.o\nbuilt\n" })
    expect(Fs.readdirSync(`${dir}/src`, { recursive: true }).sort()).toEqual(["lib", "main.c", "out", "out/b.o"])
    expect(Fs.readFileSync(`${dir}/src/out/b.o`, "utf8")).toBe("built\n")

    // unmounted by the proxy: gone from the sandbox's mounts, the directory under it empty again
    await s.unmount("/src")
    expect(await fuseMountsInside(s)).toEqual(["/etc/token"])
    expect(await s.run("ls /src")).toEqual({ code: 0, out: "" })
    await s.unmount("/etc/token")
    expect(await fuseMountsInside(s)).toEqual([])
  })

  it("the serving program killed: its mounts end with the sandbox, and no process on the machine sees them", async () => {
    const { dir, rootfs } = world("killed")
    Fs.mkdirSync(`${dir}/data`)
    Fs.writeFileSync(`${dir}/data/a`, "a\n")
    const target = `/mnt/ocx2-${Crypto.randomBytes(6).toString("hex")}`
    const s = await start(dir, rootfs, [{ id: "d", target, kind: "directory" }], new Map([["d", hostDirectoryHandler(`${dir}/data`)]]))
    expect(await s.run(`cat ${target}/a`)).toEqual({ code: 0, out: "a\n" })
    // the check below sees a live mount: the sandbox's processes see it
    expect(processesSeeing(target).length).toBeGreaterThan(0)
    s.child.kill("SIGKILL")
    await s.exited
    await until(() => processesSeeing(target).length === 0, "no process seeing the mount")
    expect(Fs.readFileSync("/proc/mounts", "utf8")).not.toContain(target)
  })
})
