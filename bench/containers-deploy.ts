/**
 * The bubblewrap deployer (issue 19): from the request to the id for a cached image, against bare
 * `bwrap` of the same rootfs running the same entrypoint, in one run; and what each container
 * costs in memory: the server's growth per container, the relay's and the proxy's resident size.
 *
 *   npm run bench -- containers-deploy        (as root: it mounts and makes cgroups)
 *
 * The image is a busybox rootfs whose entrypoint is `sh -c 'echo ready; exec sleep 1000'`. The
 * server runs as its own process (this script started again with --server ROOT RUNDIR), as in
 * production; the client is this process.
 * - start: BENCH_ROUNDS (default 10) runs, one at a time, each timed from the request to the id,
 *   then stopped; the baseline is the same number of `bwrap` (its own user, pid, ipc, uts and
 *   network namespaces, the rootfs read-only) of the same entrypoint, timed from the spawn to its
 *   "ready". Rounds alternate; medians. Target: the server at most 3x bare bwrap.
 * - memory: BENCH_CONTAINERS (default 4) containers running at once: the server's resident size
 *   grown per container, each relay's and each proxy's (VmRSS).
 */
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { connect } from "../src/containers/Client.js"
import { tagged } from "../src/containers/Frames.js"
import { mintToken } from "../src/containers/Server.js"
import { busyboxRootfs, makeDeployWorld, obtained, tempDir } from "../test/containers/deploy/deployWorld.js"

const rounds = Number(process.env.BENCH_ROUNDS ?? 10)
const containers = Number(process.env.BENCH_CONTAINERS ?? 4)
const programs = Path.join(process.cwd(), "dist")
const entrypoint = ["/bin/sh", "-c"]
const cmd = ["echo ready; exec sleep 1000"]

const imageOf = (rootfs: string) => obtained({ rootfs, entrypoint, cmd, env: ["PATH=/bin"], workingDir: "/" })

if (process.argv[2] === "--server") {
  const [root, rootfs] = process.argv.slice(3) as [string, string]
  const w = await makeDeployWorld(root, [imageOf(rootfs)], programs)
  process.stdout.write(`${w.url}\n`)
} else {
  await main()
}

async function main() {
  if (process.getuid?.() !== 0) throw new Error("run it as root: the deployer mounts and makes cgroups")
  const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
  const dir = tempDir("bench-deploy")
  const rootfs = busyboxRootfs(dir)
  const root = Path.join(dir, "root")
  Fs.mkdirSync(root)
  const token = mintToken(root, "bench")
  const server = spawn(process.execPath, [process.argv[1]!, "--server", root, rootfs], { stdio: ["ignore", "pipe", "inherit"] })
  try {
    const url = await new Promise<string>((resolve) => server.stdout!.once("data", (d: Buffer) => resolve(d.toString().trim())))
    const client = await connect(url, token)
    const digest = imageOf(rootfs).digest
    const request = JSON.stringify({ image: digest, template: "t", memory: 256 << 20, disk: 64 << 20 })

    const viaServer = async (): Promise<{ ms: number; stop: () => Promise<void> }> => {
      const began = process.hrtime.bigint()
      const run = client.run(request, {})
      const first = await run.first
      const ms = Number(process.hrtime.bigint() - began) / 1e6
      if (first.kind !== "id") throw new Error(`the run did not start: ${JSON.stringify(first)}`)
      return { ms, stop: async () => (run.scope.openChannel(tagged(0)), await run.finished) }
    }
    const bare = async (): Promise<number> => {
      const began = process.hrtime.bigint()
      const child = spawn("bwrap", [
        "--unshare-user", "--uid", "0", "--gid", "0", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
        "--die-with-parent", "--clearenv", "--ro-bind", rootfs, "/", "--proc", "/proc", "--dev", "/dev", "--setenv", "PATH", "/bin",
        "--", ...entrypoint, ...cmd
      ], { stdio: ["ignore", "pipe", "inherit"] })
      await new Promise<void>((resolve) => child.stdout!.once("data", () => resolve()))
      const ms = Number(process.hrtime.bigint() - began) / 1e6
      child.kill("SIGKILL")
      await new Promise((resolve) => child.once("exit", resolve))
      return ms
    }

    // warm: the proxy kit is built on the first deploy
    await (await viaServer()).stop()
    await bare()
    const served: Array<number> = []
    const bared: Array<number> = []
    for (let i = 0; i < rounds; i++) {
      const s = await viaServer()
      served.push(s.ms)
      await s.stop()
      bared.push(await bare())
    }
    const ms = (v: number) => `${v.toFixed(1)} ms`
    console.log(`request to id, cached image (median of ${rounds}): server ${ms(median(served))}, bare bwrap ${ms(median(bared))}, ratio ${(median(served) / median(bared)).toFixed(2)}x (target at most 3x)`)

    // resident (shared pages counted whole) and proportional (shared pages split among their users:
    // the relays and proxies share one Node binary's pages)
    const sizeOf = (pid: number, file: string, key: string): number => {
      const line = Fs.readFileSync(`/proc/${pid}/${file}`, "utf8").split("\n").find((l) => l.startsWith(key))
      return Number(/(\d+)/.exec(line ?? "0")![1]) * 1024
    }
    const rss = (pid: number) => sizeOf(pid, "status", "VmRSS:")
    const pss = (pid: number) => sizeOf(pid, "smaps_rollup", "Pss:")
    const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`
    const before = rss(server.pid!)
    const running = []
    for (let i = 0; i < containers; i++) running.push(await viaServer())
    const after = rss(server.pid!)
    const relays: Array<number> = []
    const proxies: Array<number> = []
    for (const name of Fs.readdirSync(Path.join(root, "containers"))) {
      const record = JSON.parse(Fs.readFileSync(Path.join(root, "containers", name, "record.json"), "utf8")) as { cgroups: Array<string>; relayPid?: number }
      if (record.relayPid !== undefined) relays.push(record.relayPid)
      const pids = Fs.readFileSync(Path.join(record.cgroups[0]!, "cgroup.procs"), "utf8").split("\n").filter((l) => l !== "").map(Number)
      for (const pid of pids) if (Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").startsWith("/.proxy/lib/")) proxies.push(pid)
    }
    const both = (pids: ReadonlyArray<number>) => `${mib(median(pids.map(rss)))} resident, ${mib(median(pids.map(pss)))} proportional`
    console.log(`memory per container (${containers} running, medians): server +${mib((after - before) / containers)} resident; relay ${both(relays)}; proxy ${both(proxies)}`)
    for (const r of running) await r.stop()
    client.close()
  } finally {
    server.kill("SIGTERM")
    await new Promise((resolve) => server.once("exit", resolve))
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}
