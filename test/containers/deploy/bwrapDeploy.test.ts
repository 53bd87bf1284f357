import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it, vi } from "vitest"
import type { PeerChannel } from "../../../src/containers/FrameConnection.js"
import { tagged } from "../../../src/containers/Frames.js"
import { Answer } from "../../../src/containers/Wire.js"
import { hostDirectoryHandler, hostFileHandler } from "../../../src/containers/fuse/HostHandler.js"
import { hostIdBase } from "../../../src/containers/deploy/UserNamespace.js"
import { until } from "../world.js"
import { containersUnder, deployCases, makeDeployWorld, obtained, tempDir, type DeployWorld } from "./deployWorld.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 300_000, hookTimeout: 120_000 })

/**
 * Real containers: bubblewrap over an overlay of a busybox rootfs, cgroup memory, a loop disk,
 * the proxy injected and reached through the relay, as root. After each test its ROOT has left
 * nothing on the host.
 */
const { base, worlds, rootfs, sh, world: deployed } = deployCases("deploy")

const world = (...images: Array<ReturnType<typeof sh>>) => deployed(images)

const runRequest = (digest: string, more: Record<string, unknown> = {}) =>
  JSON.stringify({ image: digest, template: "tmpl-1", memory: 256 * 1024 * 1024, disk: 32 * 1024 * 1024, arguments: { n: 1 }, ...more })

const api = "http://127.0.0.1:14978"

describe("the bubblewrap deployer", () => {
  it("runs the image's program beside the proxy: begun with its declaration, secrets fed, asks relayed, Active and Inactive", async () => {
    const image = sh(
      [
        `wget -q -O /tmp/begin ${api}/begin`,
        `wget -q -O /tmp/secrets ${api}/secrets`,
        `wget -q -O /dev/null --post-data '{"token":"rotated"}' ${api}/rotating`,
        `wget -q -O /tmp/answer --post-data "$(cat /tmp/begin /tmp/secrets) env=$(env | sort | tr '\\n' ' ')pwd=$(pwd)" ${api}/ask/16`,
        `wget -q -O /dev/null --post-data "$(tail -c +5 /tmp/answer)" ${api}/ask/17`
      ].join(" && "),
      { labels: { "org.ocx2.secrets": `{"api":"read"}` }, env: ["PATH=/bin", "GREETING=hello"], workingDir: "/etc" }
    )
    const w = await world(image)
    const client = await w.client()
    const asks: Array<string> = []
    const run = client.run(runRequest(image.digest), {
      registration: (_id, declaration) => {
        expect(declaration).toBe(`{"api":"read"}`)
        return [tagged(Answer.deploy, `{"api":"s3cret"}`)]
      },
      onAsk: (channel: PeerChannel) => {
        asks.push(`${channel.request[0]} ${channel.request.subarray(1).toString("utf8")}`)
        channel.respond(Buffer.from("answered"))
        channel.finish()
      }
    })
    const first = await run.first
    expect(first.kind, JSON.stringify(first)).toBe("id")
    await run.finished
    expect(asks).toHaveLength(2)
    expect(asks[0]).toBe(`16 {"template":"tmpl-1","arguments":{"n":1}}{"api":"s3cret"} env=GREETING=hello PATH=/bin PWD=/etc SHLVL=1 pwd=/etc`)
    expect(asks[1]).toBe("17 answered")
    const later = run.later.map((p) => `${p[0]} ${p.subarray(1).toString("utf8")}`)
    expect(later).toEqual([`7 `, `8 {"token":"rotated"}`, `7 `, `8 {"token":"rotated"}`])
  })

  /** a world running IMAGE once, its asks answered with nothing; what the program asked, and how the run went */
  const once = async (image: ReturnType<typeof sh>, more: Record<string, unknown> = {}, w?: DeployWorld) => {
    const at = w ?? (await world(image))
    const client = await at.client()
    const asks: Array<string> = []
    const run = client.run(runRequest(image.digest, more), {
      onAsk: (channel) => {
        asks.push(channel.request.subarray(1).toString("utf8"))
        channel.finish()
      }
    })
    const first = await run.first
    await run.finished
    return { first, asks, later: run.later.map((p) => `${p[0]} ${p.subarray(1).toString("utf8")}`) }
  }

  it("enforces memory: a hog is killed by the kernel and the run ends with the proxy's error", async () => {
    const { first, later } = await once(sh("tail /dev/zero"), { memory: 128 * 1024 * 1024 })
    expect(first.kind).toBe("id")
    expect(later).toEqual(["6 the program was killed by SIGKILL, out of memory: it passed the container's memory limit"])
  })

  it("enforces disk: a filler gets ENOSPC, and the image's rootfs is untouched", async () => {
    const { first, asks, later } = await once(
      sh(`dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>/tmp/err; wget -q -O /dev/null --post-data "$(cat /tmp/err) size=$(ls -l /tmp/fill | awk '{print $5}')" ${api}/ask/16`),
      { disk: 16 * 1024 * 1024 }
    )
    expect(first.kind).toBe("id")
    expect(later).toEqual(["7 ", "8 {}"])
    expect(asks).toHaveLength(1)
    expect(asks[0]).toContain("No space left on device")
    const size = Number(/size=(\d+)/.exec(asks[0]!)![1])
    expect(size).toBeGreaterThan(8 * 1024 * 1024)
    expect(size).toBeLessThan(16 * 1024 * 1024)
    expect(Fs.readdirSync(Path.join(rootfs(), "tmp"))).toEqual([])
  })

  it("makes the FUSE mounts inside the container: a file and a directory, each read and write answered by the client; the file mount cannot be removed", async () => {
    const served = tempDir("fuse-served")
    Fs.writeFileSync(Path.join(served, "token"), "t0ken\n")
    Fs.mkdirSync(Path.join(served, "src"))
    Fs.writeFileSync(Path.join(served, "src", "main.c"), "int main;\n")
    // the program waits for its mounts (they are made beside the registration, after it started)
    const image = sh([
      "until grep -q ' /src ' /proc/mounts && grep -q ' /etc/token ' /proc/mounts; do sleep 0.05; done",
      "echo made here > /src/new.txt",
      "{ rm /etc/token 2>/tmp/rm; mv /etc/token /tmp/moved 2>>/tmp/rm; true; }",
      `wget -q -O /dev/null --post-data "token=$(cat /etc/token) main=$(cat /src/main.c) list=$(ls /src | tr '\\n' ,) rm=$(grep -c busy /tmp/rm)" ${api}/ask/17`
    ].join(" && "))
    const w = await world(image)
    const client = await w.client()
    const asks: Array<string> = []
    const run = client.run(runRequest(image.digest, {
      fuse_file_mounts: [{ id: "token", container_path: "/etc/token" }],
      fuse_directory_mounts: [{ id: "src", container_path: "/src" }]
    }), {
      fuse: new Map([["token", hostFileHandler(Path.join(served, "token"))], ["src", hostDirectoryHandler(Path.join(served, "src"))]]),
      onAsk: (channel: PeerChannel) => {
        asks.push(channel.request.subarray(1).toString("utf8"))
        channel.finish()
      }
    })
    const first = await run.first
    expect(first.kind, JSON.stringify(first)).toBe("id")
    await run.finished
    expect(asks).toEqual(["token=t0ken main=int main; list=main.c,new.txt, rm=2"])
    // the container's write reached the client's directory
    expect(Fs.readFileSync(Path.join(served, "src", "new.txt"), "utf8")).toBe("made here\n")
    expect(Fs.readFileSync(Path.join(served, "token"), "utf8")).toBe("t0ken\n")
    Fs.rmSync(served, { recursive: true, force: true })
  })

  it("isolates: no host process, file or network, and no other container's port 14979", async () => {
    Fs.writeFileSync(Path.join(base, "host-only"), "")
    const holder = sh(`wget -q -O /dev/null --post-data up ${api}/ask/16; sleep 1000`)
    const looker = sh(
      "{ " + [
        `echo "pids=$(ls /proc | grep -c '^[0-9]')"`,
        // this test's own process, as the host numbers it
        `test -d /proc/${process.pid} && echo host=seen || echo host=unseen`,
        `test -e ${base}/host-only && echo file=seen || echo file=unseen`,
        `echo "devices=$(tail -n +3 /proc/net/dev | awk -F: '{print $1}' | tr -d ' ' | tr '\\n' ,)"`,
        `wget -q -O /dev/null http://127.0.0.1:SERVERPORT/ 2>/dev/null && echo server=reached || echo server=unreached`,
        `nc 127.0.0.1 14979 </dev/null >/dev/null 2>&1 && echo proxy=reached || echo proxy=unreached`
      ].join("; ") + `; } > /tmp/seen; wget -q -O /dev/null --post-data "$(cat /tmp/seen)" ${api}/ask/16`
    )
    const w = await world(holder, looker)
    const port = w.server.port
    const held = await w.client()
    let up!: () => void
    const isUp = new Promise<void>((resolve) => (up = resolve))
    const holding = held.run(runRequest(holder.digest), { onAsk: (c) => (c.finish(), up()) })
    expect((await holding.first).kind).toBe("id")
    await isUp
    const lookerImage = obtained({ ...looker, cmd: [looker.cmd[0]!.replace("SERVERPORT", String(port))] })
    const w2 = await makeDeployWorld(w.root + "-2", [lookerImage])
    worlds.push(w2)
    const { asks } = await once(lookerImage, {}, w2)
    expect(asks).toHaveLength(1)
    const seen = Object.fromEntries(asks[0]!.split("\n").map((l) => l.split("=") as [string, string]))
    expect(Number(seen.pids)).toBeLessThan(8)
    expect(seen).toMatchObject({ host: "unseen", file: "unseen", devices: "lo,", server: "unreached", proxy: "unreached" })
    await holding.stop()
    await holding.finished
  })

  it("runs the program as the image's User (a uid:gid, a name, a name:group), nobody on the host; a User the image does not have is the run's error", async () => {
    const script = `wget -q -O /dev/null --post-data "$(id -u):$(id -g) $( (echo x > /etc/x) 2>/dev/null && echo wrote || echo denied)" ${api}/ask/16; sleep 1000`
    const as = (user: string) => sh(script, { user })
    const images = { numeric: as("1000:1000"), named: as("app"), grouped: as("app:staff"), unknown: as("nobody-here") }
    const w = await world(...Object.values(images))
    const client = await w.client()
    const seen: Record<string, string> = {}
    for (const [name, image] of Object.entries(images).filter(([n]) => n !== "unknown")) {
      let asked!: (text: string) => void
      const ask = new Promise<string>((resolve) => (asked = resolve))
      const run = client.run(runRequest(image.digest), { onAsk: (c) => (asked(c.request.subarray(1).toString("utf8")), c.finish()) })
      expect((await run.first).kind).toBe("id")
      seen[name] = await ask
      // on the host, the program's process is an id no host user has; the proxy beside it is root
      const running = containersUnder(w.root).filter((c) => !c.spare)
      expect(running).toHaveLength(1)
      const record = JSON.parse(Fs.readFileSync(Path.join(w.root, "containers", running[0]!.name, "record.json"), "utf8")) as { cgroups: Array<string> }
      const uids = Fs.readFileSync(Path.join(record.cgroups[0]!, "cgroup.procs"), "utf8").split("\n").filter((l) => l !== "")
        .map((pid) => Number(/^Uid:\s+(\d+)/m.exec(Fs.readFileSync(`/proc/${pid}/status`, "utf8"))![1]))
      expect(new Set(uids)).toEqual(new Set([0, hostIdBase + Number(seen[name]!.split(":")[0])]))
      await run.stop()
      await run.finished
    }
    expect(seen).toEqual({ numeric: "1000:1000 denied", named: "1234:2345 denied", grouped: "1234:3456 denied" })
    const { first } = await once(images.unknown, {}, w)
    expect(first).toEqual({ kind: "error", message: `the deploy did not complete: the image's User "nobody-here" names a user its /etc/passwd does not have` })
  })

  it("binds the volumes: a persistent one read-write, a read_only one read-only", async () => {
    const image = sh(`echo made > /data/out; echo x 2>/tmp/err >/ro/x; wget -q -O /dev/null --post-data "$(cat /tmp/err; cat /ro/in)" ${api}/ask/16`)
    const w = await world(image)
    const client = await w.client()
    await client.volumesCreate("data", "persistent")
    await client.volumesCreate("ro", "read_only")
    Fs.writeFileSync(Path.join(w.root, "volumes", "alice", "ro", "data", "in"), "given\n")
    const { first, asks } = await once(image, {
      volume_mounts: [
        { volume_name: "data", volume_relative_path: "", container_path: "/data", mode: "persistent" },
        { volume_name: "ro", volume_relative_path: "", container_path: "/ro", mode: "read_only" }
      ]
    }, w)
    expect(first.kind).toBe("id")
    expect(asks).toHaveLength(1)
    expect(asks[0]).toMatch(/Read-only file system\ngiven$/)
    expect(Fs.readFileSync(Path.join(w.root, "volumes", "alice", "data", "data", "out"), "utf8")).toBe("made\n")
  })

  it("a program that cannot be started gets its id, then its error ends the run", async () => {
    const { first, later } = await once(obtained({ rootfs: rootfs(), entrypoint: ["/bin/no-such-program"], cmd: [], env: [], workingDir: "/" }))
    // the program starts once the server's connection is accepted, and its end may come before
    // the server read Begun: the container is registered all the same, and its end follows the id
    expect(first.kind).toBe("id")
    expect(later).toEqual(["6 the program /bin/no-such-program could not be started: spawn /bin/no-such-program ENOENT"])
  })

  it("takes the program's ask with a chunked body and Expect: 100-continue (as curl sends a larger one), answering 100 Continue first", async () => {
    const request = "POST /ask/16 HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nExpect: 100-continue\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n5\\r\\nhello\\r\\n6\\r\\n world\\r\\n0\\r\\n\\r\\n"
    // nc's input stays open until the answer's 200 has come (at most 20 s): nc ending at its input's
    // end closed the connection with the 100 Continue unread, a reset that could lose the ask itself
    const image = sh(
      `( printf '${request}'; i=0; while [ $i -lt 400 ] && ! grep -q 'HTTP/1.1 200' /tmp/out 2>/dev/null; do sleep 0.05; i=$((i+1)); done ) | ` +
        `nc 127.0.0.1 14978 > /tmp/out; wget -q -O /dev/null --post-data "$(head -c 25 /tmp/out | tr -d '\\r\\n')" ${api}/ask/17`
    )
    const w = await world(image)
    const client = await w.client()
    const asks: Array<string> = []
    const run = client.run(runRequest(image.digest), {
      onAsk: (channel: PeerChannel) => {
        asks.push(`${channel.request[0]} ${channel.request.subarray(1).toString("utf8")}`)
        channel.respond(Buffer.from("ok"))
        channel.finish()
      }
    })
    expect((await run.first).kind).toBe("id")
    await run.finished
    expect(asks).toEqual(["16 hello world", "17 HTTP/1.1 100 Continue"])
  })

  it("an idle container adds under 4 MiB proportional beyond its program: its relay, bubblewrap's processes and the proxy, no Node", async () => {
    const image = sh(`wget -q -O /dev/null --post-data up ${api}/ask/16; exec sleep 1000`)
    const w = await world(image)
    const client = await w.client()
    let asked!: () => void
    const up = new Promise<void>((resolve) => (asked = resolve))
    const run = client.run(runRequest(image.digest), { onAsk: (c) => (c.finish(), asked()) })
    expect((await run.first).kind).toBe("id")
    await up
    const [container] = containersUnder(w.root).filter((c) => !c.spare)
    const record = JSON.parse(Fs.readFileSync(Path.join(w.root, "containers", container!.name, "record.json"), "utf8")) as { cgroups: Array<string> }
    const procs = () => Fs.readFileSync(Path.join(record.cgroups[0]!, "cgroup.procs"), "utf8").split("\n").filter((l) => l !== "").map(Number)
    const cmdline = (pid: number) => {
      try {
        return Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ").trim()
      } catch {
        return ""
      }
    }
    // idle: its wget ended, its shell became the sleep
    await until(() => procs().every((pid) => !/^(?:\/bin\/sh|wget) /.test(cmdline(pid))), "the program to be only its sleep")
    const pids = procs()
    // the program is the image's (sleep, once its ask was answered); every other process the server added
    const added = [container!.relayPid!, ...pids.filter((pid) => !cmdline(pid).startsWith("sleep"))]
    expect(added.map(cmdline).filter((c) => !/^(?:bwrap |\/\.proxy\/ocx2-container-proxy-c |.*ocx2-container-relay )/.test(c))).toEqual([])
    const pss = (pid: number) => Number(/^Pss:\s+(\d+) kB$/m.exec(Fs.readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"))![1]) * 1024
    const total = added.reduce((sum, pid) => sum + pss(pid), 0)
    expect(total).toBeLessThan(4 * 1024 * 1024)
    run.scope.openChannel(tagged(0))
    await run.finished
  })

  it("a container whose proxy never listens (its memory too small for the sandbox and its proxy) is the run's error", async () => {
    // the C proxy runs in 1 MiB (Node's did not in 4): 256 KiB is too small for bubblewrap itself
    const { first } = await once(sh("sleep 1000"), { memory: 256 * 1024 })
    // the container is killed for its memory before its sandbox told its pid, or after its relay
    // joined its network namespace (the relay then turns the server's dial away), or before (the
    // relay finds no namespace to join)
    expect(first).toMatchObject({ kind: "error" })
    expect((first as { readonly message: string }).message).toMatch(
      /^(?:the proxy did not accept the connection \(HTTP 503\)|the deploy did not complete: the sandbox did not start: killed by SIGKILL, out of memory|the deploy did not complete: the relay to the container's proxy did not start: ocx2-container-relay: cannot join the network namespace \/proc\/\d+\/ns\/net: No such file or directory)$/
    )
  })
})
