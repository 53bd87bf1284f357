import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest"
import { Errno } from "../../../src/containers/fuse/Ask.js"
import { answerFuseAsk, FuseErrno, type FuseHandler } from "../../../src/containers/fuse/Handler.js"
import { hostDirectoryHandler, hostFileHandler } from "../../../src/containers/fuse/HostHandler.js"
import { mountFuse, type FuseMount } from "../../../src/containers/fuse/Mount.js"
import { gate, until } from "../world.js"
import { busybox, ensureHelper, mountsUnder, serve, sh, teardown, testDir } from "./fuseWorld.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 120_000 })

/**
 * FUSE mounts on the host, made by this process (src/containers/fuse/Mount.ts) and answered by
 * the client's handlers in this process: busybox's programs, run as their own processes, do
 * what a container's program would do, and every read and write reaches the handler.
 */
beforeAll(() => void ensureHelper())

const dirs: Array<string> = []
const mounts: Array<FuseMount> = []
afterEach(async () => {
  for (const m of mounts.splice(0)) await m.unmount().catch(() => {})
  for (const d of dirs.splice(0)) await teardown(d)
})

const dir = (name: string) => {
  const d = testDir(name)
  dirs.push(d)
  return d
}

const mount = async (id: string, target: string, kind: "file" | "directory", handler: FuseHandler) => {
  const m = await mountFuse({ id, target, kind, ask: (request) => answerFuseAsk((asked) => (asked === id ? handler : undefined), request) })
  mounts.push(m)
  return m
}

/** a handler that counts the ops it answered */
const counted = (h: FuseHandler, counts: Map<string, number>): FuseHandler =>
  Object.fromEntries(
    Object.entries(h).map(([op, f]) => [op, (...args: Array<never>) => (counts.set(op, (counts.get(op) ?? 0) + 1), (f as (...a: Array<never>) => unknown)(...args))])
  ) as FuseHandler

describe("FUSE mounts on the host", () => {
  it("a file mount: reads and writes reach the host's file; rm and mv of it fail with EBUSY; unmounted, it is gone", async () => {
    const d = dir("file")
    Fs.writeFileSync(`${d}/served`, "secret\n")
    const counts = new Map<string, number>()
    const m = await mount("token", `${d}/token`, "file", counted(hostFileHandler(`${d}/served`), counts))
    expect(mountsUnder(d)).toEqual([`${d}/token`])

    expect(await sh(`cat ${d}/token`)).toEqual({ code: 0, out: "secret\n" })
    expect(counts.get("read")).toBeGreaterThan(0)
    expect(await sh(`echo more >> ${d}/token && cat ${d}/token`)).toEqual({ code: 0, out: "secret\nmore\n" })
    expect(Fs.readFileSync(`${d}/served`, "utf8")).toBe("secret\nmore\n")
    expect(await sh(`echo new > ${d}/token`)).toEqual({ code: 0, out: "" })
    expect(Fs.readFileSync(`${d}/served`, "utf8")).toBe("new\n")
    expect(counts.get("setattr")).toBeGreaterThan(0) // the truncation of > reached the handler

    const rm = await sh(`rm -f ${d}/token`)
    expect(rm.code).not.toBe(0)
    expect(rm.out).toContain("Device or resource busy")
    const mv = await sh(`mv ${d}/token ${d}/elsewhere`)
    expect(mv.code).not.toBe(0)
    expect(mv.out).toContain("Device or resource busy")
    expect(Fs.readFileSync(`${d}/served`, "utf8")).toBe("new\n")

    await m.unmount()
    expect(mountsUnder(d)).toEqual([])
    await m.ended
  })

  it("a directory mount: ls, cat, echo >, mkdir, mv, rm and rmdir reach the host's directory; unmounted, it is gone", async () => {
    const d = dir("directory")
    const host = `${d}/host`
    Fs.mkdirSync(`${host}/sub`, { recursive: true })
    Fs.writeFileSync(`${host}/a.txt`, "alpha\n")
    Fs.writeFileSync(`${host}/sub/b.txt`, "beta\n")
    const m = await mount("src", `${d}/mnt`, "directory", hostDirectoryHandler(host))
    const mnt = `${d}/mnt`

    expect(await sh(`ls ${mnt}; ls ${mnt}/sub; cat ${mnt}/a.txt ${mnt}/sub/b.txt`)).toEqual({ code: 0, out: "a.txt\nsub\nb.txt\nalpha\nbeta\n" })
    expect(await sh(`echo gamma > ${mnt}/c.txt && mkdir ${mnt}/new && mv ${mnt}/c.txt ${mnt}/new/c.txt && rm ${mnt}/a.txt && rm ${mnt}/sub/b.txt && rmdir ${mnt}/sub`)).toEqual({ code: 0, out: "" })
    expect(Fs.readdirSync(host, { recursive: true }).sort()).toEqual(["new", "new/c.txt"])
    expect(Fs.readFileSync(`${host}/new/c.txt`, "utf8")).toBe("gamma\n")
    // a file the client changed is read anew at the next open
    Fs.writeFileSync(`${host}/new/c.txt`, "changed by the client\n")
    expect(await sh(`cat ${mnt}/new/c.txt`)).toEqual({ code: 0, out: "changed by the client\n" })
    // a write of more than one request (the kernel's 1 MiB at most), and its reading back
    const big = Buffer.alloc(3 * 1024 * 1024 + 17, "x")
    Fs.writeFileSync(`${d}/big`, big)
    expect(await sh(`cat ${d}/big > ${mnt}/big && wc -c < ${mnt}/big`)).toEqual({ code: 0, out: `${big.length}\n` })
    expect(Fs.readFileSync(`${host}/big`).equals(big)).toBe(true)
    // rmdir of a directory that is not empty: the handler's ENOTEMPTY, as it answered it
    const rmdir = await sh(`rmdir ${mnt}/new`)
    expect(rmdir.out).toContain("Directory not empty")

    await m.unmount()
    expect(mountsUnder(d)).toEqual([])
    expect(Fs.readdirSync(`${d}/mnt`)).toEqual([])
  })

  it("each ask is answered as the client answers it: its errno, or its data, never altered", async () => {
    const d = dir("errno")
    const h: FuseHandler = {
      stat: async (path) => {
        if (path === "") return { kind: "directory", mode: 0o755, size: 0n, mtimeNs: 0n }
        if (path === "denied") throw new FuseErrno(Errno.EACCES)
        if (path === "ro") return { kind: "file", mode: 0o644, size: 5n, mtimeNs: 1_700_000_000_123_456_789n }
        throw new FuseErrno(Errno.ENOENT)
      },
      list: async () => [{ name: "denied", kind: "file" }, { name: "ro", kind: "file" }],
      read: async (_path, offset, size) => Buffer.from("hello").subarray(Number(offset), Number(offset) + size),
      write: async () => {
        throw new FuseErrno(Errno.EROFS)
      }
    }
    await mount("e", `${d}/mnt`, "directory", h)
    expect((await sh(`cat ${d}/mnt/denied`)).out).toContain("Permission denied")
    expect((await sh(`cat ${d}/mnt/nothing`)).out).toContain("No such file or directory")
    expect(await sh(`cat ${d}/mnt/ro`)).toEqual({ code: 0, out: "hello" })
    expect((await sh(`echo x >> ${d}/mnt/ro`)).out).toContain("Read-only file system")
    // mkdir: no such op in this handler, ENOSYS as it answered
    expect((await sh(`mkdir ${d}/mnt/x`)).out).toContain("Function not implemented")
    expect(await sh(`stat -c '%s %Y %a' ${d}/mnt/ro`)).toEqual({ code: 0, out: "5 1700000000 644\n" })
  })

  it("a slow answer does not hold up the others: many asks are in flight at once", async () => {
    const d = dir("slow")
    const host = `${d}/host`
    Fs.mkdirSync(host)
    Fs.writeFileSync(`${host}/slow.txt`, "slow\n")
    Fs.writeFileSync(`${host}/fast.txt`, "fast\n")
    const base = hostDirectoryHandler(host)
    const slowAsked = gate()
    const release = gate()
    const h: FuseHandler = {
      ...base,
      read: async (path, offset, size) => {
        if (path === "slow.txt") {
          slowAsked.open()
          await release.promise
        }
        return base.read!(path, offset, size)
      }
    }
    const m = await mount("s", `${d}/mnt`, "directory", h)
    const slow = sh(`cat ${d}/mnt/slow.txt`)
    await slowAsked.promise
    expect(m.inFlight()).toBe(1)
    // while the slow read waits, other asks are asked and answered
    expect(await sh(`cat ${d}/mnt/fast.txt; ls ${d}/mnt; echo w > ${d}/mnt/w.txt`)).toEqual({ code: 0, out: "fast\nfast.txt\nslow.txt\n" })
    expect(Fs.readFileSync(`${host}/w.txt`, "utf8")).toBe("w\n")
    expect(m.inFlight()).toBe(1)
    release.open()
    expect(await slow).toEqual({ code: 0, out: "slow\n" })
    await until(() => m.inFlight() === 0, "no ask in flight")
  })

  it("an ask the kernel interrupts (its program got a signal) is answered EINTR at once; the late answer goes nowhere", async () => {
    const d = dir("interrupt")
    Fs.mkdirSync(`${d}/host`)
    Fs.writeFileSync(`${d}/host/slow.txt`, "slow\n")
    const base = hostDirectoryHandler(`${d}/host`)
    const asked = gate()
    const release = gate()
    let answered = 0
    // a stat (the kernel's LOOKUP): a request the program waits for itself, unlike a read, which
    // the kernel may make in the background ahead of the program (readahead) and never interrupts
    const m = await mount("i", `${d}/mnt`, "directory", {
      ...base,
      stat: async (path) => {
        if (path !== "slow.txt") return base.stat!(path)
        asked.open()
        await release.promise
        answered++
        return base.stat!(path)
      }
    })
    const child = spawn(busybox(), ["stat", `${d}/mnt/slow.txt`], { stdio: "ignore" })
    const ended = new Promise<NodeJS.Signals | null>((resolve) => child.once("exit", (_code, signal) => resolve(signal)))
    await asked.promise
    child.kill("SIGTERM")
    // stat ends while its ask is still unanswered by the client
    expect(await ended).toBe("SIGTERM")
    expect(answered).toBe(0)
    expect(m.inFlight()).toBe(0)
    release.open()
    await until(() => answered === 1, "the client's late answer")
    expect(await sh(`ls ${d}/mnt && cat ${d}/mnt/slow.txt`)).toEqual({ code: 0, out: "slow.txt\nslow\n" })
  })

  it("a target that is the other kind is refused; a missing one is made", async () => {
    const d = dir("targets")
    Fs.mkdirSync(`${d}/adir`)
    Fs.writeFileSync(`${d}/afile`, "")
    Fs.writeFileSync(`${d}/served`, "x")
    await expect(mount("f", `${d}/adir`, "file", hostFileHandler(`${d}/served`))).rejects.toThrow(/is a directory/)
    await expect(mount("d", `${d}/afile`, "directory", hostDirectoryHandler(d))).rejects.toThrow(/is not a directory/)
    await mount("f", `${d}/made/deep/token`, "file", hostFileHandler(`${d}/served`))
    expect(await sh(`cat ${d}/made/deep/token`)).toEqual({ code: 0, out: "x" })
    expect(mountsUnder(d)).toEqual([`${d}/made/deep/token`])
  })

  it("a serving process killed leaves a stale mount; the teardown unmounts it lazily and it is gone", async () => {
    const d = dir("killed")
    Fs.mkdirSync(`${d}/host`)
    Fs.writeFileSync(`${d}/host/a.txt`, "alpha\n")
    const handler = hostDirectoryHandler(`${d}/host`)
    const served = await serve({ dir: d, handlers: () => handler, mounts: [{ id: "d", target: `${d}/mnt`, kind: "directory" }] })
    expect(await sh(`cat ${d}/mnt/a.txt`)).toEqual({ code: 0, out: "alpha\n" })
    served.child.kill("SIGKILL")
    await served.exited
    // the helper died with it: the connection is gone, the mount stays, stale
    expect(mountsUnder(d)).toEqual([`${d}/mnt`])
    expect((await sh(`ls ${d}/mnt`)).out).toContain("Transport endpoint is not connected")
    await served.close()
    await teardown(d)
    expect(Fs.readFileSync("/proc/mounts", "utf8")).not.toContain(d)
  })
})

describe("FUSE asks on the wire", () => {
  it("an ask that is not one, and an ask of a mount with no handler, are answered with an errno", async () => {
    expect(await answerFuseAsk(() => undefined, Buffer.from([16, 0]))).toEqual(Buffer.from([1, 0, Errno.EINVAL]))
    const h = hostDirectoryHandler(dir("wire"))
    const ask = Buffer.concat([Buffer.from([16, 0, 1]), Buffer.from("x"), Buffer.from([1, 0, 0])])
    expect(await answerFuseAsk(() => undefined, ask)).toEqual(Buffer.from([1, 0, Errno.EIO]))
    const answer = await answerFuseAsk(() => h, ask)
    expect(answer[0]).toBe(0)
    expect(answer[1]).toBe(2) // the root: a directory
    // a path that climbs out of what is served
    const climb = Buffer.concat([Buffer.from([16, 0, 1]), Buffer.from("x"), Buffer.from([1, 0, 5]), Buffer.from("../.."), Buffer.alloc(0)])
    expect(await answerFuseAsk(() => h, climb)).toEqual(Buffer.from([1, 0, Errno.EINVAL]))
  })
})
