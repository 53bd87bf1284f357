import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it, vi } from "vitest"
import { connect } from "../../../src/containers/Client.js"
import { mintToken } from "../../../src/containers/Server.js"
import { until } from "../world.js"
import { bundleServerMain, busyboxRootfs, containersUnder, leftovers, obtained, startServerProgram, tempDir, type TestImage } from "./deployWorld.js"

vi.setConfig({ testTimeout: 300_000 })

/**
 * The server SIGKILLed while its container runs leaves processes' mounts, a loop device and
 * cgroups behind (its container dies with it); its next start frees them before it listens, and
 * then stands the spare of the shape it last deployed up again, which the next request takes.
 */
const base = tempDir("killed")
afterAll(() => Fs.rmSync(base, { recursive: true, force: true }))

describe("a server killed mid-run", () => {
  it("leaves nothing behind once it started again", async () => {
    const bundle = await bundleServerMain(base)
    const rootfs = busyboxRootfs(base)
    const image: TestImage = { rootfs, entrypoint: ["/bin/sh", "-c"], cmd: ["wget -q -O /dev/null --post-data up http://127.0.0.1:14978/ask/16; sleep 1000"], env: ["PATH=/bin"], workingDir: "/" }
    const digest = obtained(image).digest
    const images = Path.join(base, "images.json")
    Fs.writeFileSync(images, JSON.stringify([image]))
    const root = Path.join(base, "root")
    Fs.mkdirSync(root)
    const token = mintToken(root, "alice")

    const first = await startServerProgram(bundle, root, images)
    const client = await connect(first.url, token)
    let up!: () => void
    const isUp = new Promise<void>((resolve) => (up = resolve))
    const run = client.run(JSON.stringify({ image: digest, template: "t", memory: 128 << 20, disk: 16 << 20 }), { onAsk: (c) => (c.finish(), up()) })
    const started = await run.first
    expect(started.kind, JSON.stringify(started)).toBe("id")
    await isUp
    // and the spare stood up ahead for the next run of the image: the sweep frees it too
    await until(() => containersUnder(root).some((c) => c.spare && c.relayPid !== undefined), "the spare to stand up")
    const held = leftovers(root, [first.server.pid])
    expect(held.filter((l) => l.startsWith("mount")).length).toBe(4)
    expect(held.filter((l) => l.startsWith("loop")).length).toBe(2)
    expect(held.filter((l) => l.startsWith("cgroup")).length).toBe(4)
    expect(held.some((l) => l.startsWith("process"))).toBe(true)

    first.server.kill("SIGKILL")
    await run.finished
    client.close()
    // its container and relay end with it; the mounts, the loop device and the cgroups stay
    await until(() => leftovers(root).every((l) => !l.startsWith("process")), "the container's processes to end")
    expect(leftovers(root).some((l) => l.startsWith("mount"))).toBe(true)

    const before = containersUnder(root).map((c) => c.name)
    expect(before).toHaveLength(2)
    const second = await startServerProgram(bundle, root, images)
    // nothing of the first server's containers is left once the second listens
    expect(leftovers(root, [second.server.pid]).filter((l) => before.some((name) => l.includes(name)))).toEqual([])
    // the shape the first deployed (written under ROOT) has its spare stood up again, before any request
    await until(() => containersUnder(root).some((c) => c.spare && c.relayPid !== undefined), "the spare to stand up again")
    const restored = containersUnder(root)
    expect(restored).toHaveLength(1)
    expect(before).not.toContain(restored[0]!.name)
    const again = await connect(second.url, token)
    let upAgain!: () => void
    const isUpAgain = new Promise<void>((resolve) => (upAgain = resolve))
    const rerun = again.run(JSON.stringify({ image: digest, template: "t", memory: 64 << 20, disk: 16 << 20 }), { onAsk: (c) => (c.finish(), upAgain()) })
    expect((await rerun.first).kind).toBe("id")
    await isUpAgain
    // it ran in the restored spare, its memory limit set to the request's as it was taken
    const running = containersUnder(root).find((c) => c.name === restored[0]!.name)
    expect(running?.spare).toBe(false)
    const record = JSON.parse(Fs.readFileSync(Path.join(root, "containers", restored[0]!.name, "record.json"), "utf8")) as { cgroups: Array<string> }
    const memoryGroup = record.cgroups.find((g) => Fs.existsSync(Path.join(g, "memory.limit_in_bytes")) || Fs.existsSync(Path.join(g, "memory.max")))!
    const limitFile = Fs.existsSync(Path.join(memoryGroup, "memory.max")) ? "memory.max" : "memory.limit_in_bytes"
    expect(Number(Fs.readFileSync(Path.join(memoryGroup, limitFile), "utf8"))).toBe(64 << 20)
    await rerun.stop()
    await rerun.finished
    again.close()
    second.server.kill("SIGTERM")
    await new Promise((resolve) => second.server.once("exit", resolve))
    expect(leftovers(root)).toEqual([])
    expect(Fs.readdirSync(Path.join(root, "containers"))).toEqual([])
  })
})
