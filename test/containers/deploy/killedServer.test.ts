import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it, vi } from "vitest"
import { connect } from "../../../src/containers/Client.js"
import { mintToken } from "../../../src/containers/Server.js"
import { until } from "../world.js"
import { bundleServerMain, busyboxRootfs, containersUnder, leftovers, obtained, startServerProgram, tempDir, volumeMounts, type TestImage } from "./deployWorld.js"

vi.setConfig({ testTimeout: 300_000 })

/**
 * The server SIGKILLed while its container runs leaves processes' mounts, a loop device and
 * cgroups behind (its container dies with it, and the container's volume mount with its
 * namespace); its next start frees them before it listens, and then stands the spare of the shape
 * it last deployed up again, which the next request takes, its volume bound as it is taken; killed
 * again then, the start after frees that spare's mounts too.
 */
const base = tempDir("killed")
afterAll(() => Fs.rmSync(base, { recursive: true, force: true }))

describe("a server killed mid-run", () => {
  it("leaves nothing behind once it started again", async () => {
    const bundle = await bundleServerMain(base)
    const rootfs = busyboxRootfs(base)
    const image: TestImage = { rootfs, entrypoint: ["/bin/sh", "-c"], cmd: ["echo up >> /data/out; wget -q -O /dev/null --post-data up http://127.0.0.1:14978/ask/16; sleep 1000"], env: ["PATH=/bin"], workingDir: "/" }
    const digest = obtained(image).digest
    const images = Path.join(base, "images.json")
    Fs.writeFileSync(images, JSON.stringify([image]))
    const root = Path.join(base, "root")
    Fs.mkdirSync(root)
    const token = mintToken(root, "alice")

    const first = await startServerProgram(bundle, root, images)
    const client = await connect(first.url, token)
    await client.volumesCreate("data", "persistent")
    const volume = JSON.stringify([{ volume_name: "data", volume_relative_path: "", container_path: "/data", mode: "persistent" }])
    let up!: () => void
    const isUp = new Promise<void>((resolve) => (up = resolve))
    const run = client.run(`{"image":"${digest}","template":"t","memory":${128 << 20},"disk":${16 << 20},"volume_mounts":${volume}}`, { onAsk: (c) => (c.finish(), up()) })
    const started = await run.first
    expect(started.kind, JSON.stringify(started)).toBe("id")
    await isUp
    // and the spare stood up ahead for the next run of the image: the sweep frees it too
    await until(() => containersUnder(root).some((c) => c.spare && c.relayPid !== undefined), "the spare to stand up")
    const held = leftovers(root, [first.server.pid])
    // the container's disk and overlay, the spare's and its staging mount; the volume in the container's namespace
    expect(held.filter((l) => l.startsWith("mount")).length).toBe(5)
    expect(held.filter((l) => l.startsWith("volume mount")).length).toBe(1)
    expect(held.filter((l) => l.startsWith("loop")).length).toBe(2)
    expect(held.filter((l) => l.startsWith("cgroup")).length).toBe(4)
    expect(held.some((l) => l.startsWith("process"))).toBe(true)

    first.server.kill("SIGKILL")
    await run.finished
    client.close()
    // its container and relay end with it; the mounts, the loop device and the cgroups stay
    await until(() => leftovers(root).every((l) => !l.startsWith("process")), "the container's processes to end")
    expect(leftovers(root).some((l) => l.startsWith("mount"))).toBe(true)
    expect(volumeMounts(root)).toEqual([])

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
    const rerun = again.run(`{"image":"${digest}","template":"t","memory":${100 << 20},"disk":${16 << 20},"volume_mounts":${volume}}`, { onAsk: (c) => (c.finish(), upAgain()) })
    expect((await rerun.first).kind).toBe("id")
    await isUpAgain
    // it ran in the restored spare, its memory limit set to the request's as it was taken (lower than
    // it stood with, and well above what its proxy holds: a limit below that is not set, and the spare not taken)
    const running = containersUnder(root).find((c) => c.name === restored[0]!.name)
    expect(running?.spare).toBe(false)
    const record = JSON.parse(Fs.readFileSync(Path.join(root, "containers", restored[0]!.name, "record.json"), "utf8")) as { cgroups: Array<string> }
    const memoryGroup = record.cgroups.find((g) => Fs.existsSync(Path.join(g, "memory.limit_in_bytes")) || Fs.existsSync(Path.join(g, "memory.max")))!
    const limitFile = Fs.existsSync(Path.join(memoryGroup, "memory.max")) ? "memory.max" : "memory.limit_in_bytes"
    expect(Number(Fs.readFileSync(Path.join(memoryGroup, limitFile), "utf8"))).toBe(100 << 20)
    // its volume bound as it was taken, written from inside
    expect(volumeMounts(root)).toHaveLength(1)
    expect(Fs.readFileSync(Path.join(root, "volumes", "alice", "data", "data", "out"), "utf8")).toBe("up\nup\n")

    // killed again, with the spare's volume bound (and the next spare stood up, as before the first kill): the next start frees that too
    await until(() => containersUnder(root).some((c) => c.spare && c.relayPid !== undefined), "the next spare to stand up")
    second.server.kill("SIGKILL")
    await rerun.finished
    again.close()
    await until(() => leftovers(root).every((l) => !l.startsWith("process")), "the second server's containers' processes to end")
    expect(volumeMounts(root)).toEqual([])
    const takenBefore = containersUnder(root).map((c) => c.name)
    expect(takenBefore).toContain(restored[0]!.name)
    const third = await startServerProgram(bundle, root, images)
    expect(leftovers(root, [third.server.pid]).filter((l) => takenBefore.some((name) => l.includes(name)))).toEqual([])
    await until(() => containersUnder(root).some((c) => c.spare && c.relayPid !== undefined), "the spare to stand up a third time")
    third.server.kill("SIGTERM")
    await new Promise((resolve) => third.server.once("exit", resolve))
    expect(leftovers(root)).toEqual([])
    expect(Fs.readdirSync(Path.join(root, "containers"))).toEqual([])
  })
})
