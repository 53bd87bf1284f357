import * as Fs from "node:fs"
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest"
import type { PeerChannel } from "../../../src/containers/FrameConnection.js"
import { runContainersCli } from "../../../src/containers/ContainersCli.js"
import { fuseAskTag } from "../../../src/containers/fuse/Ask.js"
import { hostDirectoryHandler, hostFileHandler } from "../../../src/containers/fuse/HostHandler.js"
import { askOnScope, mountFuse, type FuseMount } from "../../../src/containers/fuse/Mount.js"
import { images, makeImage, makeWorld, request, until, type World } from "../world.js"
import { ensureHelper, mountsUnder, sh, teardown, testDir } from "./fuseWorld.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 120_000 })

/**
 * A FUSE mount's asks end to end through the tool-container server: the proxy's mount scope
 * (the in-process proxy, with a real kernel mount made on the host by `mountFuse` over that
 * scope), the server's relay to the client as a server channel, the client's handler
 * (src/containers/Client.ts), and back. The server relays every ask and answer verbatim.
 */
beforeAll(() => void ensureHelper())

let world: World | undefined
const dirs: Array<string> = []
const mounts: Array<FuseMount> = []
afterEach(async () => {
  for (const m of mounts.splice(0)) await m.unmount().catch(() => {})
  await world?.close()
  world = undefined
  for (const d of dirs.splice(0)) await teardown(d)
})

const img = makeImage()

describe("FUSE asks relayed by the server", () => {
  it("a file mount and a directory mount of a run: the container's reads and writes reach the client's host file and directory", async () => {
    const dir = testDir("relayed")
    dirs.push(dir)
    Fs.writeFileSync(`${dir}/token`, "t0ken\n")
    Fs.mkdirSync(`${dir}/src`)
    Fs.writeFileSync(`${dir}/src/a`, "a\n")
    const w = (world = await makeWorld())
    const run = (await w.client()).run(
      request(img.digest, { fuse_file_mounts: [{ id: "token", container_path: "/etc/token" }], fuse_directory_mounts: [{ id: "src", container_path: "/src" }] }),
      { images: images(img), fuse: new Map([["token", hostFileHandler(`${dir}/token`)], ["src", hostDirectoryHandler(`${dir}/src`)]]) }
    )
    expect(await run.first).toMatchObject({ kind: "id" })
    const proxy = w.deploys.at(-1)!.proxy
    expect(proxy.mounts.map((m) => m.request)).toEqual([
      { id: "token", path: "/etc/token", kind: "file" },
      { id: "src", path: "/src", kind: "directory" }
    ])
    // what a container proxy does for each mount scope, with the host standing in for the container
    for (const [i, m] of proxy.mounts.entries()) {
      const target = `${dir}/container${m.request.path}`
      mounts.push(await mountFuse({ id: m.request.id, target, kind: m.request.kind as "file" | "directory", ask: askOnScope(proxy.mounts[i]!.scope) }))
    }
    expect(mountsUnder(dir)).toEqual([`${dir}/container/etc/token`, `${dir}/container/src`])
    const c = `${dir}/container`
    expect(await sh(`cat ${c}/etc/token ${c}/src/a && echo new > ${c}/etc/token && mkdir ${c}/src/d && echo b > ${c}/src/d/b && ls ${c}/src`)).toEqual({
      code: 0,
      out: "t0ken\na\na\nd\n"
    })
    expect(Fs.readFileSync(`${dir}/token`, "utf8")).toBe("new\n")
    expect(Fs.readFileSync(`${dir}/src/d/b`, "utf8")).toBe("b\n")
    expect((await sh(`rm ${c}/etc/token`)).out).toContain("Device or resource busy")

    // the client stops the run: the container (its proxy) is stopped; the proxy's mounts end with it
    run.stop()
    await run.finished
    for (const m of mounts.splice(0)) await m.unmount()
    expect(mountsUnder(dir)).toEqual([])
  })

  it("a mount the client asks for after the id, on the fuse-mount channel, is answered by the handler it names", async () => {
    const dir = testDir("later")
    dirs.push(dir)
    Fs.writeFileSync(`${dir}/late`, "late\n")
    const w = (world = await makeWorld())
    const others: Array<PeerChannel> = []
    const run = (await w.client()).run(request(img.digest), { images: images(img), onAsk: (c) => others.push(c) })
    expect(await run.first).toMatchObject({ kind: "id" })
    const made = run.fuseMount("late", "/late", "file", hostFileHandler(`${dir}/late`))
    expect((await made.responses.take())?.[0]).toBe(0)
    const proxy = w.deploys.at(-1)!.proxy
    const m = await mountFuse({ id: "late", target: `${dir}/late-mount`, kind: "file", ask: askOnScope(proxy.mounts[0]!.scope) })
    mounts.push(m)
    expect(await sh(`cat ${dir}/late-mount`)).toEqual({ code: 0, out: "late\n" })
    // an ask of the container's own program (not a FUSE ask) still goes to onAsk
    void proxy.ask(Buffer.from([fuseAskTag + 1, 1, 2]))
    await until(() => others.length === 1, "the program's ask")
    expect(others[0]!.request).toEqual(Buffer.from([fuseAskTag + 1, 1, 2]))
    run.stop()
    await run.finished
  })

  it("ocx2 containers run --fuse-file and --fuse-directory serve the host's file and directory to the container", async () => {
    const dir = testDir("cli")
    dirs.push(dir)
    Fs.writeFileSync(`${dir}/token`, "cli-token\n")
    Fs.mkdirSync(`${dir}/tree`)
    Fs.writeFileSync(`${dir}/tree/x`, "x\n")
    const layout = `${dir}/layout/blobs/sha256`
    Fs.mkdirSync(layout, { recursive: true })
    Fs.writeFileSync(`${layout}/${img.digest.slice(7)}`, img.image.manifest)
    for (const [d, bytes] of img.image.blobs) Fs.writeFileSync(`${layout}/${d.slice(7)}`, bytes)
    const w = (world = await makeWorld())
    Fs.writeFileSync(`${dir}/auth`, w.token("alice"))
    const common = ["--layout", `${dir}/layout`, "--server", w.url, "--token-file", `${dir}/auth`]
    // what is wrong with a mount's host side is said before anything is asked of the server
    expect(await runContainersCli(["run", `tests/tool@${img.digest}`, ...common, "--fuse-file", "t:/etc/t"])).toBe(2)
    expect(await runContainersCli(["run", `tests/tool@${img.digest}`, ...common, "--fuse-directory", `t:/t:${dir}/nothing`])).toBe(2)
    expect(await runContainersCli(["run", `tests/tool@${img.digest}`, ...common, "--fuse-directory", `t:/t:${dir}/token`])).toBe(2)
    expect(w.deploys).toEqual([])

    const cli = runContainersCli(["run", `tests/tool@${img.digest}`, ...common, "--fuse-file", `token:/etc/token:${dir}/token`, "--fuse-directory", `tree:/tree:${dir}/tree`])
    await until(() => w.deploys.length === 1 && w.deploys[0]!.proxy.mounts.length === 2, "the two mounts")
    const proxy = w.deploys[0]!.proxy
    for (const m of proxy.mounts) {
      mounts.push(await mountFuse({ id: m.request.id, target: `${dir}/c${m.request.path}`, kind: m.request.kind as "file" | "directory", ask: askOnScope(m.scope) }))
    }
    expect(await sh(`cat ${dir}/c/etc/token ${dir}/c/tree/x && echo y > ${dir}/c/tree/y`)).toEqual({ code: 0, out: "cli-token\nx\n" })
    expect(Fs.readFileSync(`${dir}/tree/y`, "utf8")).toBe("y\n")
    // the container's program ends: so does the run, and the command with status 0
    await proxy.endBegin()
    expect(await cli).toBe(0)
  })
})
