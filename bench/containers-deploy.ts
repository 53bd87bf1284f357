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
 *   made find it half made), the server without, bare `bwrap` (its own user, pid, ipc, uts and
 *   network namespaces, the rootfs read-only) of the same entrypoint timed from the spawn to its
 *   "ready", and podman where it runs. Rounds alternate; medians. Target: the server at most 3x
 *   bare bwrap. Each step of the deploy is timed too (the deployer's trace).
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
import { busyboxRootfs, makeDeployWorld, obtained, tempDir } from "../test/containers/deploy/deployWorld.js"

const rounds = Number(process.env.BENCH_ROUNDS ?? 10)
const containers = Number(process.env.BENCH_CONTAINERS ?? 4)
const programs = Path.join(process.cwd(), "dist")
const entrypoint = ["/bin/sh", "-c"]
const cmd = ["echo ready; exec sleep 1000"]

const imageOf = (rootfs: string) => obtained({ rootfs, entrypoint, cmd, env: ["PATH=/bin"], workingDir: "/" })


interface BenchServer {
  readonly process: ChildProcess
  readonly root: string
  readonly client: ContainersClient
  /** the steps traced since the last call */
  readonly steps: () => Array<{ at: bigint; step: string }>
  /** resolves once a spare stood up since the last call */
  readonly spareReady: () => Promise<void>
}

const startServer = async (dir: string, rootfs: string, spares: boolean): Promise<BenchServer> => {
  const root = Path.join(dir, spares ? "warm" : "cold")
  Fs.mkdirSync(root)
  const token = mintToken(root, "bench")
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
  const client = await connect(url, token)
  return {
    process: server,
    root,
    client,
    steps: () => traced.splice(0),
    spareReady: () => {
      if (ready > 0) {
        ready = 0
        return Promise.resolve()
      }
      return new Promise<void>((resolve) => readyWaiters.push(() => ((ready = 0), resolve())))
    }
  }
}

async function main() {
  if (process.getuid?.() !== 0) throw new Error("run it as root: the deployer mounts and makes cgroups")
  const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
  const dir = tempDir("bench-deploy")
  const rootfs = busyboxRootfs(dir)
  const servers: Array<BenchServer> = []
  try {
    const warm = await startServer(dir, rootfs, true)
    servers.push(warm)
    const cold = await startServer(dir, rootfs, false)
    servers.push(cold)
    const digest = imageOf(rootfs).digest
    const request = JSON.stringify({ image: digest, template: "t", memory: 256 << 20, disk: 64 << 20 })

    const viaServer = async (server: BenchServer): Promise<{ ms: number; steps: Map<string, number>; stop: () => Promise<void> }> => {
      server.steps()
      const began = process.hrtime.bigint()
      const run = server.client.run(request, {})
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
    const times = { warm: [] as Array<number>, cold: [] as Array<number>, bare: [] as Array<number>, podman: [] as Array<number> }
    const stepTimes = new Map<string, Array<number>>()
    let spareMs: Array<number> = []
    for (let i = 0; i < rounds; i++) {
      const waited = process.hrtime.bigint()
      await warm.spareReady()
      spareMs.push(Number(process.hrtime.bigint() - waited) / 1e6)
      const w = await viaServer(warm)
      times.warm.push(w.ms)
      await w.stop()
      const c = await viaServer(cold)
      times.cold.push(c.ms)
      for (const [step, at] of c.steps) stepTimes.set(step, [...(stepTimes.get(step) ?? []), at])
      await c.stop()
      times.bare.push(await bare())
      if (typeof podman !== "string") times.podman.push(await podman.run())
    }
    const ms = (v: number) => `${v.toFixed(1)} ms`
    const b = median(times.bare)
    const ratio = (v: ReadonlyArray<number>) => `${ms(median(v))} (${(median(v) / b).toFixed(2)}x)`
    console.log(`load average at the end: ${Os.loadavg().map((l) => l.toFixed(2)).join(" ")}`)
    console.log(`request to id, cached image, medians of ${rounds} (x: against bare bwrap; target at most 3x):`)
    console.log(`  bare bwrap             ${ms(b)}`)
    console.log(`  server, spare ready    ${ratio(times.warm)}`)
    console.log(`  server, from nothing   ${ratio(times.cold)}`)
    console.log(`  podman run             ${typeof podman === "string" ? `not measured: ${podman}` : ratio(times.podman)}`)
    console.log(`  (the next spare stood up, after the run before it stopped, within ${ms(median(spareMs))} at the median)`)
    // where the time goes, from nothing: each step's median time from the request, and since the step before
    const order = [...stepTimes.entries()].map(([step, at]) => ({ step, at: median(at) })).sort((x, y) => x.at - y.at)
    order.push({ step: "id received", at: median(times.cold) })
    let previous = 0
    console.log("where the time goes, from nothing (the deployer's steps):")
    for (const { step, at } of order) {
      console.log(`  ${step.padEnd(18)} ${ms(at).padStart(9)} from the request, ${ms(at - previous).padStart(9)} since the step before`)
      previous = at
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
    const relays: Array<number> = []
    const proxies: Array<number> = []
    let spares = 0
    for (const name of Fs.readdirSync(Path.join(warm.root, "containers"))) {
      const record = JSON.parse(Fs.readFileSync(Path.join(warm.root, "containers", name, "record.json"), "utf8")) as { cgroups: Array<string>; relayPid?: number; spare?: boolean }
      if (record.spare === true) {
        spares++
        continue
      }
      if (record.relayPid !== undefined) relays.push(record.relayPid)
      const pids = Fs.readFileSync(Path.join(record.cgroups[0]!, "cgroup.procs"), "utf8").split("\n").filter((l) => l !== "").map(Number)
      for (const pid of pids) if (Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").startsWith("/.proxy/lib/")) proxies.push(pid)
    }
    const both = (pids: ReadonlyArray<number>) => `${mib(median(pids.map(rss)))} resident, ${mib(median(pids.map(pss)))} proportional`
    console.log(`memory per container (${containers} running, medians): server +${mib((after - before) / containers)} resident; relay ${both(relays)}; proxy ${both(proxies)}; and ${spares} spare container(s) held ready, each one more proxy and relay`)
    for (const r of running) await r.stop()
  } finally {
    for (const s of servers) {
      s.client.close()
      s.process.kill("SIGTERM")
      if (s.process.exitCode === null) await new Promise((resolve) => s.process.once("exit", resolve))
    }
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
