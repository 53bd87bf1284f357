import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it, vi } from "vitest"
import { connect } from "../../../src/containers/Client.js"
import { imageLaunch } from "../../../src/containers/deploy/ImageLaunch.js"
import { encodeLaunch } from "../../../src/containers/proxy/Launch.js"
import { hostFileHandler } from "../../../src/containers/fuse/HostHandler.js"
import { mintToken } from "../../../src/containers/Server.js"
import { until } from "../world.js"
import { containersUnder, deployCases, leftovers, tempDir, volumeMounts, type DeployWorld } from "./deployWorld.js"

vi.setConfig({ testTimeout: 300_000, hookTimeout: 120_000 })

/**
 * The spares (docs/containers.md section 12): kept per identity, image and disk, their memory
 * limit set as they are taken (and enforced then), a few of them for the shapes most recently
 * deployed, stood up again when a server starts on the same ROOT, and nothing of a client in
 * one before it is taken.
 */
const { base, worlds, sh, world: deployed } = deployCases("spares")

const api = "http://127.0.0.1:14978"

const world = (images: ReadonlyArray<ReturnType<typeof sh>>, root?: string, spares?: number) =>
  deployed(images, root, spares === undefined ? {} : { spares })

const request = (digest: string, more: Record<string, unknown> = {}) =>
  JSON.stringify({ image: digest, template: "t", memory: 256 << 20, disk: 32 << 20, ...more })

/** the spares standing under ROOT, once their relays run */
const sparesOf = (root: string) => containersUnder(root).filter((c) => c.spare && c.relayPid !== undefined).map((c) => c.name)

const recordOf = (root: string, name: string) =>
  JSON.parse(Fs.readFileSync(Path.join(root, "containers", name, "record.json"), "utf8")) as { cgroups: Array<string> }

/** the memory limit the container's cgroup holds now */
const memoryLimitOf = (root: string, name: string): number => {
  for (const g of recordOf(root, name).cgroups) {
    for (const f of ["memory.max", "memory.limit_in_bytes"]) if (Fs.existsSync(Path.join(g, f))) return Number(Fs.readFileSync(Path.join(g, f), "utf8"))
  }
  throw new Error(`no memory cgroup for ${name}`)
}

const processesOf = (root: string, name: string) =>
  Fs.readFileSync(Path.join(recordOf(root, name).cgroups[0]!, "cgroup.procs"), "utf8").split("\n").filter((l) => l !== "").map(Number)
    .map((pid) => ({ pid, cmdline: Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ").trim() }))

/** runs one request; at the program's first ask, `atAsk` sees the container the run holds (by name) */
const runOnce = async (w: DeployWorld, body: string, atAsk: (running: string) => void = () => {}, identity?: string) => {
  const client = identity === undefined ? await w.client() : await connect(w.url, mintToken(w.root, identity))
  const asks: Array<string> = []
  const run = client.run(body, {
    onAsk: (channel) => {
      const running = containersUnder(w.root).filter((c) => !c.spare)
      expect(running).toHaveLength(1)
      atAsk(running[0]!.name)
      asks.push(channel.request.subarray(1).toString("utf8"))
      channel.finish()
    }
  })
  const first = await run.first
  await run.finished
  if (identity !== undefined) client.close()
  return { first, asks, later: run.later.map((p) => `${p[0]} ${p.subarray(1).toString("utf8")}`) }
}

describe("the spares", () => {
  it("have their memory limit set as they are taken, lower or higher than the one they stood with, and the kernel holds the container to it", async () => {
    // 200 MiB touched at once: past 128 MiB, within 512 MiB
    // the program is the hog: the proxy tells how it ended
    const hog = sh(`wget -q -O /dev/null --post-data up ${api}/ask/16; exec dd if=/dev/zero of=/dev/null bs=200M count=1`)
    const w = await world([hog])
    const fits = await runOnce(w, request(hog.digest, { memory: 512 << 20 }))
    expect(fits.asks).toEqual(["up"])
    expect(fits.later).toEqual(["7 ", "8 {}"])
    await until(() => sparesOf(w.root).length === 1, "the spare to stand up")
    const [spare] = sparesOf(w.root)
    expect(memoryLimitOf(w.root, spare!)).toBe(512 << 20)
    let limit = 0
    let ranIn = ""
    const killed = await runOnce(w, request(hog.digest, { memory: 128 << 20 }), (name) => ((ranIn = name), (limit = memoryLimitOf(w.root, name))))
    expect(ranIn).toBe(spare)
    expect(limit).toBe(128 << 20)
    expect(killed.asks).toEqual(["up"])
    expect(killed.later.at(-1)).toBe("6 the program was killed by SIGKILL, out of memory: it passed the container's memory limit")
    // the next spare stands with the memory last asked; taken with more, its program fits again
    await until(() => sparesOf(w.root).length === 1 && sparesOf(w.root)[0] !== spare, "the next spare to stand up")
    const [next] = sparesOf(w.root)
    expect(memoryLimitOf(w.root, next!)).toBe(128 << 20)
    const again = await runOnce(w, request(hog.digest, { memory: 512 << 20 }), (name) => ((ranIn = name), (limit = memoryLimitOf(w.root, name))))
    expect(ranIn).toBe(next)
    expect(limit).toBe(512 << 20)
    expect(again.asks).toEqual(["up"])
    expect(again.later).toEqual(["7 ", "8 {}"])
  })

  it("serve only the identity, image and disk they were stood up for", async () => {
    const image = sh(`wget -q -O /dev/null --post-data up ${api}/ask/16`)
    const other = sh(`wget -q -O /dev/null --post-data other ${api}/ask/16`)
    // room for every shape this test deploys: none pushes the first out
    const w = await world([image, other], undefined, 4)
    await runOnce(w, request(image.digest))
    await until(() => sparesOf(w.root).length === 1, "the spare to stand up")
    const [spare] = sparesOf(w.root)
    const ranIn: Array<string> = []
    const at = (name: string) => void ranIn.push(name)
    // another identity, another disk, another image: each a container of its own, the spare left standing
    expect((await runOnce(w, request(image.digest), at, "bob")).asks).toEqual(["up"])
    expect((await runOnce(w, request(image.digest, { disk: 48 << 20 }), at)).asks).toEqual(["up"])
    expect((await runOnce(w, request(other.digest), at)).asks).toEqual(["other"])
    expect(ranIn).not.toContain(spare)
    expect(sparesOf(w.root)).toContain(spare)
    // the shape it was stood up for takes it, whatever its memory
    expect((await runOnce(w, request(image.digest, { memory: 200 << 20 }), at)).asks).toEqual(["up"])
    expect(ranIn.at(-1)).toBe(spare)
  })

  it("carry nothing of a client before they are taken: no mount, file or process of the run before, only the image's launch", async () => {
    const served = Path.join(base, "served")
    Fs.mkdirSync(served)
    const image = sh(`until grep -q ' /etc/token ' /proc/mounts; do sleep 0.05; done; echo written > /tmp/mine; wget -q -O /dev/null --post-data "$(cat /etc/token)" ${api}/ask/17`)
    const w = await world([image])
    const fused = (content: string) => {
      Fs.writeFileSync(Path.join(served, "token"), content)
      return { fuse: new Map([["token", hostFileHandler(Path.join(served, "token"))]]) }
    }
    const client = await w.client()
    const withToken = async (content: string) => {
      const asks: Array<string> = []
      const run = client.run(request(image.digest, { template: "secret-template", arguments: { key: content }, fuse_file_mounts: [{ id: "token", container_path: "/etc/token" }] }), {
        ...fused(content),
        onAsk: (c) => (asks.push(c.request.subarray(1).toString("utf8")), c.finish())
      })
      expect((await run.first).kind).toBe("id")
      await run.finished
      expect(run.later.map((p) => `${p[0]} ${p.subarray(1).toString("utf8")}`)).toEqual(["7 ", "8 {}"])
      return asks
    }
    expect(await withToken("first-client")).toEqual(["first-client"])
    await until(() => sparesOf(w.root).length === 1 && processesOf(w.root, sparesOf(w.root)[0]!).some((p) => p.cmdline.startsWith("/.proxy/ocx2-container-proxy-c ")), "the spare's proxy to start")
    const [spare] = sparesOf(w.root)
    const dir = Path.join(w.root, "containers", spare!)
    // what it runs: bubblewrap and the proxy, with no variable but the working directory bubblewrap sets; the image's program not yet
    const processes = processesOf(w.root, spare!)
    for (const p of processes) expect(p.cmdline).toMatch(/^(?:bwrap |\/\.proxy\/ocx2-container-proxy-c )/)
    const proxy = processes.find((p) => p.cmdline.startsWith("/.proxy/ocx2-container-proxy-c "))!
    expect(Fs.readFileSync(`/proc/${proxy.pid}/environ`, "utf8").split("\0").filter((v) => v !== "")).toEqual(["PWD=/"])
    // what it mounts: the image's overlay, /proc, /dev, /dev/fuse, the kit, the launch and memory events; no FUSE mount, no volume
    const points = Fs.readFileSync(`/proc/${proxy.pid}/mountinfo`, "utf8").split("\n").filter((l) => l !== "").map((l) => l.split(" ")[4]!)
    for (const point of points) expect(point).toMatch(/^\/(?:$|proc|dev|\.proxy)/)
    expect(Fs.readFileSync(`/proc/${proxy.pid}/mountinfo`, "utf8")).not.toMatch(/ fuse/)
    // what it holds: nothing on its disk but the empty mount points bubblewrap made for the kit, and a launch file of the image's alone
    const written = (Fs.readdirSync(Path.join(dir, "disk", "upper"), { recursive: true }) as Array<string>).map((p) => ({ p, stat: Fs.lstatSync(Path.join(dir, "disk", "upper", p)) }))
    expect(written.length).toBeGreaterThan(0)
    for (const { p, stat } of written) expect({ p, made: p === ".proxy" || p.startsWith(".proxy/"), size: stat.isFile() ? stat.size : 0 }).toEqual({ p, made: true, size: 0 })
    const launch = Fs.readFileSync(Path.join(dir, "launch.json"), "utf8")
    // the image's launch, and the deployer's own pipes for the program's output (docs/containers.md section 12)
    expect(launch).toBe(encodeLaunch({ ...(imageLaunch(image) as { launch: Parameters<typeof encodeLaunch>[0] }).launch, output: { stdout: 5, stderr: 6 } }))
    expect(launch).not.toMatch(/first-client|secret-template/)
    // taken, its FUSE mount is made then, the second client's
    expect(await withToken("second-client")).toEqual(["second-client"])
  })

  it("are taken by a request with volume mounts: bound as the spare is taken, read-write or read-only (even to the container's root), at their paths only, and let go of at the run's end", async () => {
    // writes one volume, tries the read-only one twice (the second time after trying to make it writable), reads a file mount of a volume's file
    const image = sh(`echo made >> /data/out; echo x 2>/tmp/err >/ro/x; mount -o remount,rw /ro 2>/dev/null; echo y 2>>/tmp/err >/ro/y; wget -q -O /dev/null --post-data "$(cat /etc/in; cat /tmp/err; cat /ro/in)" ${api}/ask/16`)
    const w = await world([image])
    const client = await w.client()
    await client.volumesCreate("data", "persistent")
    await client.volumesCreate("ro", "read_only")
    const volumes = Path.join(w.root, "volumes", "alice")
    Fs.writeFileSync(Path.join(volumes, "data", "data", "in"), "read\n")
    Fs.writeFileSync(Path.join(volumes, "ro", "data", "in"), "given\n")
    const body = request(image.digest, {
      volume_mounts: [
        { volume_name: "data", volume_relative_path: "", container_path: "/data", mode: "persistent" },
        { volume_name: "ro", volume_relative_path: "", container_path: "/ro", mode: "read_only" },
        { volume_name: "data", volume_relative_path: "in", container_path: "/etc/in", mode: "persistent" }
      ]
    })
    // the first deployed from nothing (bubblewrap binds its volumes), and its shape gets a spare
    const first = await runOnce(w, body)
    expect(first.asks[0]).toMatch(/^read\n.*\/ro\/x: Read-only file system\n.*\/ro\/y: Read-only file system\ngiven$/)
    await until(() => sparesOf(w.root).length === 1, "the spare to stand up")
    const [spare] = sparesOf(w.root)
    let ranIn = ""
    let mounted: Array<{ point: string; options: string }> = []
    const second = await runOnce(w, body, (name) => {
      ranIn = name
      const proxy = processesOf(w.root, name).find((p) => p.cmdline.startsWith("/.proxy/ocx2-container-proxy-c "))!
      mounted = Fs.readFileSync(`/proc/${proxy.pid}/mountinfo`, "utf8").split("\n").filter((l) => l !== "").map((l) => ({ point: l.split(" ")[4]!, options: l.split(" ")[5]! }))
    })
    expect(ranIn).toBe(spare)
    expect(second.asks).toHaveLength(1)
    expect(second.asks[0]).toMatch(/^read\n.*\/ro\/x: Read-only file system\n.*\/ro\/y: Read-only file system\ngiven$/)
    expect(Fs.readFileSync(Path.join(volumes, "data", "data", "out"), "utf8")).toBe("made\nmade\n")
    // each volume at its path, by its mode; the staging mount empty again
    const at = (point: string) => mounted.filter((m) => m.point === point).map((m) => m.options.split(",")[0])
    expect([at("/data"), at("/ro"), at("/etc/in")]).toEqual([["rw"], ["ro"], ["rw"]])
    expect(mounted.filter((m) => m.point.startsWith("/.proxy/volumes/"))).toEqual([])
    // stopped with its run: no mount of a volume left in any namespace
    await until(() => volumeMounts(w.root).length === 0 && !containersUnder(w.root).some((c) => c.name === spare), "the container to be stopped")
  })

  it("are kept for the few shapes most recently deployed, and a server started again on the ROOT stands them up before any request", async () => {
    const images = ["one", "two", "three"].map((n) => sh(`wget -q -O /dev/null --post-data ${n} ${api}/ask/16`))
    const root = tempDir("spares-root")
    const w = await world(images, root, 2)
    for (const image of images) {
      await runOnce(w, request(image.digest))
      // each run's spare stood up before the next run, so the next cannot find one still being made
      await until(() => JSON.parse(Fs.readFileSync(Path.join(root, "spares.json"), "utf8"))[0]?.digest === image.digest && sparesOf(root).length >= 1, "the shape to be kept")
    }
    await until(() => sparesOf(root).length === 2 && containersUnder(root).length === 2, "two spares, the oldest stopped")
    const shapes = JSON.parse(Fs.readFileSync(Path.join(root, "spares.json"), "utf8")) as Array<{ identity: string; digest: string; disk: number; memory: number }>
    expect(shapes.map((s) => [s.identity, s.digest, s.disk, s.memory])).toEqual([
      ["alice", images[2]!.digest, 32 << 20, 256 << 20],
      ["alice", images[1]!.digest, 32 << 20, 256 << 20]
    ])
    // stopped (its spares freed) and started again: the two spares stand up again, the third not
    await w.close()
    worlds.splice(worlds.indexOf(w), 1)
    expect(leftovers(root)).toEqual([])
    const w2 = await world(images, root, 2)
    await until(() => sparesOf(root).length === 2, "the spares to stand up again")
    const standing = sparesOf(root)
    let ranIn = ""
    expect((await runOnce(w2, request(images[1]!.digest), (name) => (ranIn = name))).asks).toEqual(["two"])
    expect(standing).toContain(ranIn)
  })
})
