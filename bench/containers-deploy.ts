/**
 * The bubblewrap deployer (issue 19): from the request to the id for a cached image, against bare
 * `bwrap` of the same rootfs running the same entrypoint, and against `podman run` of the same
 * image where podman works on the host, in one run; where the time goes; and what each container
 * costs in memory: the server's growth per container, the relay's and the proxy's resident size.
 *
 *   npm run bench -- containers-deploy        (as root: it mounts and makes cgroups)
 *
 * The image is a busybox rootfs whose entrypoint is `sh -c 'echo ready; exec sleep 1000'`. Each
 * server runs as its own process (this script started again with --server ROOT ROOTFS SPARES), as
 * in production; the client is this process. Two servers: one that stands a spare container up
 * ahead for the next request of the same kind (as `ocx2-containers serve` does), one that does not
 * (every deploy from nothing: disk, overlay, cgroups, sandbox, proxy).
 * - start: BENCH_ROUNDS (default 10) rounds, each timed from the request to the id then stopped:
 *   the server with a spare (once the spare stood up: requests that come faster than a spare is
 *   made find it half made), twice: a request whose memory differs from the one before (the spare
 *   stood with the last memory asked, its limit set as it is taken) and one of the same memory;
 *   and one with a volume mount (read-write, at /data: bound as the spare is taken);
 *   the server without, bare `bwrap` (its own user, pid, ipc, uts and
 *   network namespaces, the rootfs read-only) of the same entrypoint timed from the spawn to its
 *   "ready", and podman where it runs. Rounds alternate; medians. Target: the server at most 3x
 *   bare bwrap. Each step of the deploy is timed too (the deployer's trace), per kind of request.
 * - restart: BENCH_RESTARTS (default 3) times the server with spares is stopped (SIGTERM) and
 *   started again on its ROOT, and its first request timed once the spare of the shape it last
 *   deployed stood up again (how long after it listened is printed too).
 * - memory: BENCH_CONTAINERS (default 4) containers running at once: the server's resident size
 *   grown per container, each relay's and each proxy's (VmRSS and Pss).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { connect, type ContainersClient } from "../src/containers/Client.js"
import { tagged } from "../src/containers/Frames.js"
import { mintToken } from "../src/containers/Server.js"
import { mountsUnder } from "../src/containers/deploy/Mounts.js"
import { busyboxRootfs, makeDeployWorld, obtained, tempDir } from "../test/containers/deploy/deployWorld.js"

const rounds = Number(process.env.BENCH_ROUNDS ?? 10)
const containers = Number(process.env.BENCH_CONTAINERS ?? 4)
const restarts = Number(process.env.BENCH_RESTARTS ?? 3)
const programs = Path.join(process.cwd(), "dist")
const entrypoint = ["/bin/sh", "-c"]
const cmd = ["echo ready; exec sleep 1000"]

const imageOf = (rootfs: string) => obtained({ rootfs, entrypoint, cmd, env: ["PATH=/bin"], workingDir: "/" })


interface BenchServer {
  readonly process: ChildProcess
  readonly root: string
  readonly client: ContainersClient
  /** from the spawn to its URL, ms */
  readonly listenedMs: number
  /** when it printed its URL */
  readonly listenedAt: bigint
  /** the steps traced since the last call */
  readonly steps: () => Array<{ at: bigint; step: string }>
  /** resolves once a spare stood up since the last call, and its proxy listens */
  readonly spareReady: () => Promise<void>
}

const tokens = new Map<string, string>()

/** a server on ROOT (dir/warm or dir/cold), made on the first start, the same ROOT when started again */
const startServer = async (dir: string, rootfs: string, spares: boolean): Promise<BenchServer> => {
  const root = Path.join(dir, spares ? "warm" : "cold")
  if (!tokens.has(root)) {
    Fs.mkdirSync(root)
    tokens.set(root, mintToken(root, "bench"))
  }
  const token = tokens.get(root)!
  const spawned = process.hrtime.bigint()
  const server = spawn(process.execPath, [process.argv[1]!, "--server", root, rootfs, spares ? "spares" : "none"], { stdio: ["ignore", "pipe", "inherit"] })
  let traced: Array<{ at: bigint; step: string }> = []
  let ready = 0
  let readyWaiters: Array<() => void> = []
  const url = await new Promise<string>((resolve, reject) => {
    let out = ""
    server.once("exit", (code) => reject(new Error(`the bench's server ended (${code})`)))
    server.stdout!.on("data", (d: Buffer) => {
      out += d.toString()
      const lines = out.split("\n")
      out = lines.pop()!
      for (const line of lines) {
        const t = /^trace (\d+) (.*)$/.exec(line)
        if (t !== null && t[2] === "spare ready") {
          ready++
          for (const f of readyWaiters.splice(0)) f()
        } else if (t !== null) traced.push({ at: BigInt(t[1]!), step: t[2]! })
        else if (line.startsWith("url ")) resolve(line.slice(4))
      }
    })
  })
  const listenedAt = process.hrtime.bigint()
  const client = await connect(url, token)
  return {
    process: server,
    root,
    client,
    listenedMs: Number(listenedAt - spawned) / 1e6,
    listenedAt,
    steps: () => traced.splice(0),
    spareReady: async () => {
      if (ready > 0) ready = 0
      else await new Promise<void>((resolve) => readyWaiters.push(() => ((ready = 0), resolve())))
      // the deployer's "spare ready" is its relay listening; the proxy inside starts a moment later
      for (const began = Date.now(); !spareListens(root); await new Promise((resolve) => setTimeout(resolve, 2))) {
        if (Date.now() - began > 60_000) throw new Error("no spare's proxy listened within a minute")
      }
    }
  }
}

/** the processes of each container under ROOT, with whether it is a spare (those whose cgroups are made) */
function containerProcesses(root: string): Array<{ readonly spare: boolean; readonly relayPid: number | undefined; readonly pids: ReadonlyArray<number> }> {
  const top = Path.join(root, "containers")
  const found = []
  for (const name of Fs.existsSync(top) ? Fs.readdirSync(top) : []) {
    try {
      const record = JSON.parse(Fs.readFileSync(Path.join(top, name, "record.json"), "utf8")) as { cgroups: Array<string>; relayPid?: number; spare?: boolean }
      if (record.cgroups[0] === undefined) continue
      const pids = Fs.readFileSync(Path.join(record.cgroups[0], "cgroup.procs"), "utf8").split("\n").filter((l) => l !== "").map(Number)
      found.push({ spare: record.spare === true, relayPid: record.relayPid, pids })
    } catch {
      // being made or removed
    }
  }
  return found
}

/** the container's proxy (the C proxy the kit carries; its FUSE side, Node, is started by it only for a FUSE mount) */
function isProxy(pid: number): boolean {
  try {
    return Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").startsWith("/.proxy/")
  } catch {
    return false
  }
}

/** bubblewrap's own processes (the sandbox's outer one and its init), added for the container as the proxy is */
function isBwrap(pid: number): boolean {
  try {
    return Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").startsWith("bwrap\0")
  } catch {
    return false
  }
}

/** a spare under ROOT whose proxy listens on 14979: its network namespace's TCP table, read from the host, has it */
function spareListens(root: string): boolean {
  return containerProcesses(root).some((c) => c.spare && c.pids.some((pid) => {
    try {
      // the proxy's own (bubblewrap's outer process is in the host's network namespace)
      if (!isProxy(pid)) return false
      // listening (state 0A) on port 14979 (3A83), on IPv4 or IPv6 (the proxy listens on every address)
      const table = ["tcp", "tcp6"].map((f) => { try { return Fs.readFileSync(`/proc/${pid}/net/${f}`, "utf8") } catch { return "" } }).join("\n")
      return table.split("\n").some((l) => / [0-9A-F]+:3A83 0+:0000 0A /.test(l))
    } catch {
      return false
    }
  }))
}

async function stopServer(s: BenchServer): Promise<void> {
  s.client.close()
  s.process.kill("SIGTERM")
  if (s.process.exitCode === null && s.process.signalCode === null) await new Promise((resolve) => s.process.once("exit", resolve))
}

async function main() {
  if (process.getuid?.() !== 0) throw new Error("run it as root: the deployer mounts and makes cgroups")
  const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
  const dir = tempDir("bench-deploy")
  const rootfs = busyboxRootfs(dir)
  const servers: Array<BenchServer> = []
  try {
    let warm = await startServer(dir, rootfs, true)
    servers.push(warm)
    const cold = await startServer(dir, rootfs, false)
    servers.push(cold)
    const digest = imageOf(rootfs).digest
    const volumeMounts = [{ volume_name: "data", volume_relative_path: "", container_path: "/data", mode: "persistent" }]
    const request = (memory: number, volumes: boolean) =>
      JSON.stringify({ image: digest, template: "t", memory, disk: 64 << 20, ...(volumes ? { volume_mounts: volumeMounts } : {}) })
    await warm.client.volumesCreate("data", "persistent")

    const viaServer = async (server: BenchServer, memory = 256 << 20, volumes = false): Promise<{ ms: number; steps: Map<string, number>; stop: () => Promise<void> }> => {
      server.steps()
      const began = process.hrtime.bigint()
      const run = server.client.run(request(memory, volumes), {})
      const first = await run.first
      const ms = Number(process.hrtime.bigint() - began) / 1e6
      if (first.kind !== "id") throw new Error(`the run did not start: ${JSON.stringify(first)}`)
      const steps = new Map(server.steps().map((t) => [t.step, Number(t.at - began) / 1e6]))
      return { ms, steps, stop: async () => (run.scope.openChannel(tagged(0)), await run.finished) }
    }
    const timedUntilReady = async (program: string, args: ReadonlyArray<string>): Promise<number> => {
      const began = process.hrtime.bigint()
      const child = spawn(program, args, { stdio: ["ignore", "pipe", "pipe"] })
      let err = ""
      child.stderr!.on("data", (d: Buffer) => (err += d.toString()))
      const started = await new Promise<boolean>((resolve) => {
        child.stdout!.once("data", () => resolve(true))
        child.once("exit", () => resolve(false))
      })
      const ms = Number(process.hrtime.bigint() - began) / 1e6
      child.kill("SIGKILL")
      if (child.exitCode === null && child.signalCode === null) await new Promise((resolve) => child.once("exit", resolve))
      if (!started) throw new Error(`${program} did not start: ${err.trim()}`)
      return ms
    }
    const bare = () => timedUntilReady("bwrap", [
      "--unshare-user", "--uid", "0", "--gid", "0", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
      "--die-with-parent", "--clearenv", "--ro-bind", rootfs, "/", "--proc", "/proc", "--dev", "/dev", "--setenv", "PATH", "/bin",
      "--", ...entrypoint, ...cmd
    ])
    const podman = podmanOf(dir, rootfs)

    // warm: the proxy kit is built on the first deploy, the first spare stood up after it
    await (await viaServer(warm)).stop()
    await (await viaServer(cold)).stop()
    await bare()
    if (typeof podman !== "string") await podman.run().catch(() => undefined)
    const times = {
      warm: [] as Array<number>, changed: [] as Array<number>, volume: [] as Array<number>, restarted: [] as Array<number>,
      cold: [] as Array<number>, bare: [] as Array<number>, podman: [] as Array<number>
    }
    // each kind of request's deployer steps, each step's times from the request
    const stepTimes = new Map<keyof typeof times, Map<string, Array<number>>>()
    const note = (kind: keyof typeof times, steps: Map<string, number>) => {
      const of = stepTimes.get(kind) ?? new Map<string, Array<number>>()
      stepTimes.set(kind, of)
      for (const [step, at] of steps) of.set(step, [...(of.get(step) ?? []), at])
    }
    let spareMs: Array<number> = []
    let memory = 256 << 20
    for (let i = 0; i < rounds; i++) {
      // the spare stands with the memory asked last: this round's asks the other
      memory = i % 2 === 0 ? 128 << 20 : 256 << 20
      await warm.spareReady()
      const changed = await viaServer(warm, memory)
      times.changed.push(changed.ms)
      await changed.stop()
      const waited = process.hrtime.bigint()
      await warm.spareReady()
      spareMs.push(Number(process.hrtime.bigint() - waited) / 1e6)
      const w = await viaServer(warm, memory)
      times.warm.push(w.ms)
      note("warm", w.steps)
      await w.stop()
      await warm.spareReady()
      const v = await viaServer(warm, memory, true)
      if (!v.steps.has("spare taken")) throw new Error(`the request with a volume mount did not take the spare: ${[...v.steps.keys()].join(", ")}`)
      times.volume.push(v.ms)
      note("volume", v.steps)
      await v.stop()
      const c = await viaServer(cold)
      times.cold.push(c.ms)
      note("cold", c.steps)
      await c.stop()
      times.bare.push(await bare())
      if (typeof podman !== "string") times.podman.push(await podman.run())
    }
    // the server stopped and started again on its ROOT: its first request, once the spare it stands up again stood
    const listened: Array<number> = []
    const spareAfterListening: Array<number> = []
    for (let i = 0; i < restarts; i++) {
      await stopServer(warm)
      servers.splice(servers.indexOf(warm), 1)
      warm = await startServer(dir, rootfs, true)
      servers.push(warm)
      listened.push(warm.listenedMs)
      await warm.spareReady()
      spareAfterListening.push(Number(process.hrtime.bigint() - warm.listenedAt) / 1e6)
      const first = await viaServer(warm, memory)
      times.restarted.push(first.ms)
      note("restarted", first.steps)
      await first.stop()
    }
    const ms = (v: number) => `${v.toFixed(1)} ms`
    const b = median(times.bare)
    const ratio = (v: ReadonlyArray<number>) => `${ms(median(v))} (${(median(v) / b).toFixed(2)}x)`
    console.log(`load average at the end: ${Os.loadavg().map((l) => l.toFixed(2)).join(" ")}`)
    console.log(`request to id, cached image, medians of ${rounds} (x: against bare bwrap; targets: from nothing at most 4x, a spare ready at most 1.5x):`)
    console.log(`  bare bwrap             ${ms(b)}`)
    console.log(`  server, spare ready               ${ratio(times.warm)}`)
    console.log(`  server, spare ready, memory changed  ${ratio(times.changed)}`)
    console.log(`  server, spare ready, a volume mount  ${ratio(times.volume)}`)
    console.log(`  server, first request after a restart  ${restarts === 0 ? "not measured" : ratio(times.restarted)} (medians of ${restarts}: the server listened ${ms(median(listened))} after it was started, the spare it stood up again was ready ${ms(median(spareAfterListening))} after that)`)
    console.log(`  server, from nothing              ${ratio(times.cold)}`)
    console.log(`  podman run                        ${typeof podman === "string" ? `not measured: ${podman}` : ratio(times.podman)}`)
    console.log(`  (the next spare stood up, after the run before it stopped, within ${ms(median(spareMs))} at the median)`)
    // where the time goes: each step's median time from the request, and since the step before
    const kinds = { cold: "from nothing", warm: "spare ready", volume: "spare ready, a volume mount", restarted: "first request after a restart" } as const
    for (const [kind, what] of Object.entries(kinds) as Array<[keyof typeof kinds, string]>) {
      const order = [...(stepTimes.get(kind) ?? new Map<string, Array<number>>()).entries()].map(([step, at]) => ({ step, at: median(at) })).sort((x, y) => x.at - y.at)
      if (times[kind].length === 0) continue
      order.push({ step: "id received", at: median(times[kind]) })
      let previous = 0
      console.log(`where the time goes, ${what} (the server's and the deployer's steps):`)
      for (const { step, at } of order) {
        console.log(`  ${step.padEnd(24)} ${ms(at).padStart(9)} from the request, ${ms(at - previous).padStart(9)} since the step before`)
        previous = at
      }
    }

    // resident (shared pages counted whole) and proportional (shared pages split among their users:
    // the proxies share one Node binary's pages)
    const sizeOf = (pid: number, file: string, key: string): number => {
      const line = Fs.readFileSync(`/proc/${pid}/${file}`, "utf8").split("\n").find((l) => l.startsWith(key))
      return Number(/(\d+)/.exec(line ?? "0")![1]) * 1024
    }
    const rss = (pid: number) => sizeOf(pid, "status", "VmRSS:")
    const pss = (pid: number) => sizeOf(pid, "smaps_rollup", "Pss:")
    const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`
    await warm.spareReady()
    const before = rss(warm.process.pid!)
    const running = []
    for (let i = 0; i < containers; i++) running.push(await viaServer(warm))
    const after = rss(warm.process.pid!)
    await warm.spareReady()
    const relays: Array<number> = []
    const proxies: Array<number> = []
    const spareProxies: Array<number> = []
    const bwraps: Array<number> = []
    // every process the server added for a running container, beyond its program: its relay,
    // bubblewrap's two and the proxy (with its FUSE side, had the run asked for a FUSE mount)
    const added: Array<{ readonly rss: number; readonly pss: number }> = []
    for (const c of containerProcesses(warm.root)) {
      if (c.relayPid !== undefined && !c.spare) relays.push(c.relayPid)
      for (const pid of c.pids) if (isProxy(pid)) (c.spare ? spareProxies : proxies).push(pid)
      if (c.spare) continue
      const own = [...(c.relayPid !== undefined ? [c.relayPid] : []), ...c.pids.filter((pid) => isProxy(pid) || isBwrap(pid))]
      bwraps.push(...c.pids.filter(isBwrap))
      added.push({ rss: own.reduce((sum, pid) => sum + rss(pid), 0), pss: own.reduce((sum, pid) => sum + pss(pid), 0) })
    }
    const both = (pids: ReadonlyArray<number>) => pids.length === 0 ? "none" : `${mib(median(pids.map(rss)))} resident, ${mib(median(pids.map(pss)))} proportional`
    console.log(`memory per container (${containers} running, medians): server +${mib((after - before) / containers)} resident; relay ${both(relays)}; proxy ${both(proxies)}; each bubblewrap process ${both(bwraps)}`)
    console.log(`an idle container's own cost beyond its program (relay, bubblewrap's two processes, proxy; smaps_rollup, medians; target at most 4 MiB proportional): ${added.length === 0 ? "none" : `${mib(median(added.map((a) => a.pss)))} proportional, ${mib(median(added.map((a) => a.rss)))} resident`}`)
    console.log(`memory per spare (${spareProxies.length} standing, each a proxy that has not started its program, and a relay): proxy ${both(spareProxies)}`)
    for (const r of running) await r.stop()
  } finally {
    for (const s of servers) await stopServer(s)
    // podman's storage may keep a mount of its own under it
    for (const m of mountsUnder(dir)) spawnSync("umount", ["-l", m])
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}

/**
 * `podman run` of the same rootfs and entrypoint (its own namespaces, no network), timed from the
 * spawn to its "ready", then removed (not timed); or why it cannot be measured on this host. Its
 * storage and configuration are the bench's own: runc (crun refuses a host whose cgroups are
 * hybrid, v1 beside a v2 mount) and no default ulimits (setting them needs CAP_SYS_RESOURCE, which
 * a host that is itself a container may lack).
 */
function podmanOf(dir: string, rootfs: string): { readonly run: () => Promise<number> } | string {
  const found = spawnSync("podman", ["--version"], { encoding: "utf8" })
  if (found.error !== undefined || found.status !== 0) return "podman is not installed (Debian: apt-get install podman runc)"
  const storage = Path.join(dir, "podman")
  Fs.mkdirSync(storage)
  // podman writes into a --rootfs (/etc/mtab, /run): a copy of its own
  const ownRootfs = Path.join(storage, "rootfs")
  Fs.cpSync(rootfs, ownRootfs, { recursive: true, verbatimSymlinks: true })
  Fs.writeFileSync(Path.join(storage, "containers.conf"), "[containers]\ndefault_ulimits = []\n")
  const env = { ...process.env, CONTAINERS_CONF: Path.join(storage, "containers.conf") }
  const common = ["--root", Path.join(storage, "root"), "--runroot", Path.join(storage, "run"), "--cgroup-manager", "cgroupfs", "--events-backend", "none", "--runtime", "runc"]
  const runArgs = (name: string, command: ReadonlyArray<string>) => [...common, "run", "--name", name, "--network", "none", "--rootfs", ownRootfs, ...entrypoint, ...command]
  const tried = spawnSync("podman", [...runArgs("ocx2-bench-try", ["echo ready"]), ], { encoding: "utf8", env })
  spawnSync("podman", [...common, "rm", "-f", "ocx2-bench-try"], { env })
  if (tried.status !== 0) return `podman does not run here: ${(tried.stderr || tried.stdout).trim().split("\n").slice(-1)[0]}`
  let n = 0
  return {
    run: async () => {
      const name = `ocx2-bench-${n++}`
      const began = process.hrtime.bigint()
      const child = spawn("podman", runArgs(name, cmd), { stdio: ["ignore", "pipe", "pipe"], env })
      let err = ""
      child.stderr!.on("data", (d: Buffer) => (err += d.toString()))
      const ms = await new Promise<number>((resolve, reject) => {
        child.stdout!.once("data", () => resolve(Number(process.hrtime.bigint() - began) / 1e6))
        child.once("exit", (code) => reject(new Error(`podman run ended (${code}) before it was ready: ${err.trim()}`)))
      })
      await new Promise((resolve) => spawn("podman", [...common, "rm", "-f", "-t", "0", name], { stdio: "ignore", env }).once("exit", resolve))
      if (child.exitCode === null && child.signalCode === null) await new Promise((resolve) => child.once("exit", resolve))
      return ms
    }
  }
}

// the dispatch last: every function above is defined by then
if (process.argv[2] === "--server") {
  const [root, rootfs, spares] = process.argv.slice(3) as [string, string, string]
  // each step of each deploy, on the clock every process of the host shares (CLOCK_MONOTONIC)
  const trace = (step: string) => process.stdout.write(`trace ${process.hrtime.bigint()} ${step}\n`)
  const w = await makeDeployWorld(root, [imageOf(rootfs)], programs, { trace, spares: spares === "spares" ? 3 : 0 })
  process.stdout.write(`url ${w.url}\n`)
  process.once("SIGTERM", () => void w.close().then(() => process.exit(0)))
} else {
  await main()
}
