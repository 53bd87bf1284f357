/**
 * Many tool containers at once on one server (issue 43): BENCH_MANY (default 200) containers of a
 * busybox image running together under one `ocx2-containers` server with the bubblewrap deployer,
 * each answering relayed asks. Prints the server's memory, what the containers added beside it,
 * the p95 of an ask's round trip, and the load average.
 *
 *   npm run bench -- containers-many        (as root: it mounts and makes cgroups)
 *
 * Each container's program asks the client once as it starts (POST /ask/16 to its proxy, relayed
 * to the client, answered) and then sleeps: so each is running its program, its ask answered.
 * Once all are running, a relayed ask is timed at the client from its request to its finish: a
 * secrets channel on the run's scope, which the server relays to the container's proxy as one
 * secrets channel, and the proxy's answer (Fed) relayed back. BENCH_ASK_ROUNDS (default 5) rounds
 * of one ask to each container, first one at a time (each container in turn), then all at once. BENCH_STARTING (default 8) requests are in flight at once
 * while they start (a quicker start is the other bench's, containers-deploy).
 */
import { spawn, type ChildProcess } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { connect, type ContainersClient } from "../src/containers/Client.js"
import { tagged } from "../src/containers/Frames.js"
import { mintToken } from "../src/containers/Server.js"
import { busyboxRootfs, makeDeployWorld, obtained, tempDir } from "../test/containers/deploy/deployWorld.js"

const many = Number(process.env.BENCH_MANY ?? 200)
const askRounds = Number(process.env.BENCH_ASK_ROUNDS ?? 5)
const starting = Number(process.env.BENCH_STARTING ?? 8)
const programs = Path.join(process.cwd(), "dist")
const api = "http://127.0.0.1:14978"
const imageOf = (rootfs: string) =>
  obtained({ rootfs, entrypoint: ["/bin/sh", "-c"], cmd: [`wget -q -O /dev/null --post-data up ${api}/ask/16; exec sleep 100000`], env: ["PATH=/bin"], workingDir: "/" })

const sizeOf = (pid: number, file: string, key: string): number => {
  try {
    const line = Fs.readFileSync(`/proc/${pid}/${file}`, "utf8").split("\n").find((l) => l.startsWith(key))
    return Number(/(\d+)/.exec(line ?? "0")![1]) * 1024
  } catch {
    return 0
  }
}
const rss = (pid: number) => sizeOf(pid, "status", "VmRSS:")
const pss = (pid: number) => sizeOf(pid, "smaps_rollup", "Pss:")
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`
const load = () => Os.loadavg().map((l) => l.toFixed(2)).join(" ")
const cmdline = (pid: number) => {
  try {
    return Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8")
  } catch {
    return ""
  }
}

/** every process the server added for its containers beyond their programs: relays, bubblewrap's, proxies */
const addedProcesses = (root: string): Array<number> => {
  const top = Path.join(root, "containers")
  const found: Array<number> = []
  for (const name of Fs.existsSync(top) ? Fs.readdirSync(top) : []) {
    try {
      const record = JSON.parse(Fs.readFileSync(Path.join(top, name, "record.json"), "utf8")) as { cgroups: Array<string>; relayPid?: number }
      if (record.relayPid !== undefined) found.push(record.relayPid)
      const pids = Fs.readFileSync(Path.join(record.cgroups[0]!, "cgroup.procs"), "utf8").split("\n").filter((l) => l !== "").map(Number)
      for (const pid of pids) if (cmdline(pid).startsWith("/.proxy/") || cmdline(pid).startsWith("bwrap\0")) found.push(pid)
    } catch {
      // being made or removed
    }
  }
  return found
}

async function main() {
  if (process.getuid?.() !== 0) throw new Error("run it as root: the deployer mounts and makes cgroups")
  const dir = tempDir("bench-many")
  const rootfs = busyboxRootfs(dir)
  const root = Path.join(dir, "root")
  Fs.mkdirSync(root)
  const token = mintToken(root, "bench")
  const server: ChildProcess = spawn(process.execPath, [process.argv[1]!, "--server", root, rootfs], { stdio: ["ignore", "pipe", "inherit"] })
  const clients: Array<ContainersClient> = []
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let out = ""
      server.once("exit", (code) => reject(new Error(`the bench's server ended (${code})`)))
      server.stdout!.on("data", (d: Buffer) => {
        out += d.toString()
        const m = /^url (\S+)$/m.exec(out)
        if (m !== null) resolve(m[1]!)
      })
    })
    const serverBefore = rss(server.pid!)
    // a few connections, as several clients would have: each carries its share of the runs
    for (let i = 0; i < 4; i++) clients.push(await connect(url, token))
    const request = JSON.stringify({ image: imageOf(rootfs).digest, template: "t", memory: 64 << 20, disk: 32 << 20 })
    let programAsks = 0
    const runs: Array<ReturnType<ContainersClient["run"]>> = []
    const began = Date.now()
    let next = 0
    const startOne = async (): Promise<void> => {
      for (;;) {
        const i = next++
        if (i >= many) return
        const run = clients[i % clients.length]!.run(request, {
          onAsk: (channel) => {
            programAsks++
            channel.respond(tagged(0, "ok"))
            channel.finish()
          }
        })
        const first = await run.first
        if (first.kind !== "id") throw new Error(`container ${i + 1} of ${many} did not start: ${JSON.stringify(first)}`)
        runs.push(run)
      }
    }
    await Promise.all(Array.from({ length: starting }, startOne))
    const startedIn = Date.now() - began
    // every program's first ask relayed and answered: each is running its program
    for (const waited = Date.now(); programAsks < many; await new Promise((resolve) => setTimeout(resolve, 50))) {
      if (Date.now() - waited > 600_000) throw new Error(`only ${programAsks} of ${many} programs' asks came within 10 minutes`)
    }
    console.log(`${many} containers running at once on one server (started ${starting} at a time in ${(startedIn / 1000).toFixed(1)} s; each program's ask relayed and answered); load average ${load()}`)

    // one relayed ask: a secrets channel, relayed to the container's proxy, its Fed relayed back
    const ask = async (run: (typeof runs)[number]): Promise<number> => {
      const sent = process.hrtime.bigint()
      const channel = run.scope.openChannel(tagged(1, "{}"))
      const answer = await channel.responses.take()
      while ((await channel.responses.take()) !== undefined) {
        // only the finish follows Fed
      }
      if (answer === undefined || answer[0] !== 0) throw new Error(`a relayed ask was not answered Fed: ${answer?.toString("utf8")}`)
      return Number(process.hrtime.bigint() - sent) / 1e6
    }
    const quantiles = (times: ReadonlyArray<number>) => {
      const sorted = [...times].sort((a, b) => a - b)
      const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
      return `median ${at(0.5).toFixed(1)} ms, p95 ${at(0.95).toFixed(1)} ms, max ${sorted.at(-1)!.toFixed(1)} ms`
    }
    // one at a time, each container in turn: an ask's own round trip beside 199 idle containers
    const alone: Array<number> = []
    for (let round = 0; round < askRounds; round++) for (const run of runs) alone.push(await ask(run))
    console.log(`a relayed ask's round trip (client -> server -> the container's proxy -> back), one at a time, each of the ${many} in turn, ${alone.length} asks: ${quantiles(alone)}; load average ${load()}`)
    // every container asked at once: the round trip of each of 200 asks in flight together
    const together: Array<number> = []
    for (let round = 0; round < askRounds; round++) together.push(...(await Promise.all(runs.map(ask))))
    console.log(`the same, all ${many} asked at once, ${askRounds} rounds, ${together.length} asks: ${quantiles(together)}; load average ${load()}`)
    const serverNow = rss(server.pid!)
    const added = addedProcesses(root)
    const addedPss = added.reduce((sum, pid) => sum + pss(pid), 0)
    const addedRss = added.reduce((sum, pid) => sum + rss(pid), 0)
    console.log(
      `the server's memory: ${mib(serverNow)} resident (${mib(serverBefore)} before the containers, +${mib((serverNow - serverBefore) / many)} each), ` +
        `${mib(pss(server.pid!))} proportional; the processes it added for them (relays, bubblewrap's, proxies; ${added.length}): ` +
        `${mib(addedPss)} proportional in all (${mib(addedPss / many)} each), ${mib(addedRss)} resident counted per process`
    )
    const free = Fs.readFileSync("/proc/meminfo", "utf8").split("\n").filter((l) => /^(MemTotal|MemAvailable):/.test(l)).join(", ").replace(/\s+/g, " ")
    console.log(`the machine: ${Os.cpus().length} cores, ${free}; load average ${load()}`)
    for (const run of runs) run.scope.openChannel(tagged(0))
    await Promise.all(runs.map((run) => run.finished))
  } finally {
    for (const c of clients) c.close()
    server.kill("SIGTERM")
    if (server.exitCode === null && server.signalCode === null) await new Promise((resolve) => server.once("exit", resolve))
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}

if (process.argv[2] === "--server") {
  const [root, rootfs] = process.argv.slice(3) as [string, string]
  const w = await makeDeployWorld(root, [imageOf(rootfs)], programs, { spares: 0, pidsMax: 64 })
  process.stdout.write(`url ${w.url}\n`)
  process.once("SIGTERM", () => void w.close().then(() => process.exit(0)))
} else {
  await main()
}
