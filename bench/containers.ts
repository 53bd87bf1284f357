/**
 * The tool-container server's relay (issue 18): channel throughput and per-frame latency
 * through the server, against a direct WebSocket between the same two ends, in one run.
 *
 *   npm run bench -- containers
 *
 * Every end is a process of its own, as in production: this process is the container's proxy
 * (src/containers/InProcessProxy.ts, the one the tests use), a client process answers what the
 * proxy asks (this script again with --client), and the server is a third process (--server).
 * Four paths between the same two ends, standing side by side and taking turns, so that the
 * load of this shared machine falls on all alike:
 * - direct: the client dials the proxy and opens the begin scope itself; one WebSocket.
 * - bytes: the same as direct through a Node process that writes each TCP read of one socket to
 *   the other (--bytes), reading nothing of it: what a second hop costs before any relay reads a
 *   byte, the floor under every relay in Node.
 * - floor: the same as direct through a process that only pipes WebSocket messages from one
 *   socket to the other (--pipe, a few lines of `ws`): what a relay built on `ws` costs before
 *   it reads a frame.
 * - server: the client runs a tool through `ocx2-containers` (Client.ts), whose deployer hands
 *   the server this proxy; the proxy's asks are relayed to the client as server channels.
 * - before (only with BENCH_BEFORE=FILE): the same as server through the server of another build
 *   of this bench (bundled as `npm run bench` bundles it, e.g. from main), to measure a change of
 *   the server against what it was in one run.
 * What is measured, at the proxy, in each of BENCH_REPEATS (default 5) repeats:
 * - latency: BENCH_ROUNDS (default 1000) asks on each path, one at a time, the paths in turn: the
 *   proxy opens a channel with 64 bytes, the client answers 64 bytes and the finish; the time to
 *   the answer, halved, is the one-way latency of a frame; median and p95.
 * - throughput: on each path in turn, the client answers one ask with BENCH_FRAMES (default
 *   10000) frames of 16 KiB, writing no faster than its socket drains; MiB/s at the proxy, from
 *   the ask to the finish.
 * - the relays' own CPU time (each relay process's) over all of it, which the machine's
 *   load does not change as it changes the times: what the server's relay costs beyond the floor.
 * Targets: latency through the server at most 1.25x the byte-copying hop's (DECISIONS 12; the 1.5x
 * direct of the first containers issue is withdrawn, and printed only for comparison), throughput
 * at least 0.7x direct.
 * BENCH_PROFILE=DIR writes the server processes' CPU profiles there (node --cpu-prof).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { spawn, type ChildProcess } from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { WebSocket, WebSocketServer } from "ws"
import * as MemoryImageSource from "../layers/MemoryImageSource.js"
import { Deployer } from "../services/Deployer.js"
import { connect } from "../src/containers/Client.js"
import { FrameConnection, highWater, type Channel, type PeerChannel } from "../src/containers/FrameConnection.js"
import { tagged } from "../src/containers/Frames.js"
import { InProcessProxy } from "../src/containers/InProcessProxy.js"
import { sha256 } from "../src/containers/OciImage.js"
import { makeServerParts } from "../src/containers/Parts.js"
import { mintToken, startContainersServer } from "../src/containers/Server.js"
import { ProxyScope } from "../src/containers/Wire.js"

const rounds = Number(process.env.BENCH_ROUNDS ?? 1000)
const frames = Number(process.env.BENCH_FRAMES ?? 10000)
const repeats = Number(process.env.BENCH_REPEATS ?? 5)
const frameSize = 16 * 1024
const warmUp = 200

type Path = "direct" | "bytes" | "floor" | "server" | "before"
/** BENCH_BEFORE=FILE: one more path, through the server of another build of this bench (bundled as `npm run bench` does) */
const before = process.env.BENCH_BEFORE
const paths: ReadonlyArray<Path> = ["direct", "bytes", "floor", "server", ...(before !== undefined ? ["before" as const] : [])]
type Relay = Exclude<Path, "direct">
const relayPaths = paths.filter((p): p is Relay => p !== "direct")

// the client's image, which it gives the server through the oci channels
const layerBlob = Buffer.from("layer")
const config = Buffer.from("{}")
const manifest = Buffer.from(JSON.stringify({ schemaVersion: 2, config: { mediaType: "c", digest: sha256(config), size: config.length }, layers: [{ mediaType: "l", digest: sha256(layerBlob), size: layerBlob.length }] }))

const mode = process.argv[2]
if (mode === "--server") await serverProcess(process.argv[3]!, process.argv[4]!)
else if (mode === "--pipe") await pipeProcess(process.argv[3]!)
else if (mode === "--bytes") await bytesProcess(process.argv[3]!)
else if (mode === "--client") await clientProcess(process.argv[3] as Path, process.argv[4]!, process.argv[5])
else await main()

/** the server's process: every deploy is the bench's proxy */
async function serverProcess(root: string, proxyUrl: string) {
  const fixed = Layer.succeed(Deployer, Deployer.of({ deploy: () => Effect.succeed({ proxyUrl, stop: Effect.void }) }))
  const parts = await Effect.runPromise(makeServerParts(root).pipe(Effect.provide(Layer.merge(fixed, MemoryImageSource.layer()))))
  const server = await startContainersServer({ root, parts })
  // an exit of its own, so that node writes the profile
  process.once("SIGINT", () => process.exit(0))
  answerCpu()
  process.stdout.write(`${server.port}\n`)
}

/** the floor: each message from one socket sent on the other as it is, nothing read */
async function pipeProcess(proxyUrl: string) {
  const wss = new WebSocketServer({ port: 0, host: "127.0.0.1", perMessageDeflate: false, maxPayload: 256 * 1024 * 1024 })
  await new Promise<void>((resolve) => wss.once("listening", resolve))
  wss.on("connection", (client) => {
    // toward the proxy with a zero mask, as the server dials it (src/containers/ProxyDial.ts)
    const proxy = new WebSocket(proxyUrl, { perMessageDeflate: false, generateMask: (mask: Buffer) => void mask.fill(0) })
    const early: Array<Buffer> = []
    client.on("message", (m: Buffer) => (proxy.readyState === WebSocket.OPEN ? proxy.send(m) : early.push(m)))
    proxy.on("open", () => {
      for (const m of early.splice(0)) proxy.send(m)
    })
    proxy.on("message", (m: Buffer) => client.send(m))
    client.on("close", () => proxy.close())
    proxy.on("close", () => client.close())
  })
  answerCpu()
  process.stdout.write(`${(wss.address() as { port: number }).port}\n`)
}

/** below the floor: the TCP bytes of one socket written to the other as they come, no WebSocket read at all */
async function bytesProcess(proxyUrl: string) {
  const target = new URL(proxyUrl)
  const server = Net.createServer({ noDelay: true }, (client) => {
    const proxy = Net.connect({ host: target.hostname, port: Number(target.port), noDelay: true })
    client.on("data", (d) => proxy.write(d))
    proxy.on("data", (d) => client.write(d))
    client.on("close", () => proxy.destroy())
    proxy.on("close", () => client.destroy())
    client.on("error", () => {})
    proxy.on("error", () => {})
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  answerCpu()
  process.stdout.write(`${(server.address() as Net.AddressInfo).port}\n`)
}

/** a relay's process: each line on its standard input asks for the CPU time it has taken, in ms */
function answerCpu() {
  process.stdin.on("data", (d: Buffer) => {
    for (const _ of d.toString().matchAll(/\n/g)) {
      const u = process.cpuUsage()
      process.stdout.write(`${(u.user + u.system) / 1000}\n`)
    }
  })
}

/** the client's process: answers each ask (one small answer, or the long stream) and prints "ready" */
async function clientProcess(path: Path, url: string, token: string | undefined) {
  const small = tagged(0, Buffer.alloc(64, 1))
  const big = tagged(0, Buffer.alloc(frameSize, 2))
  const answer = (channel: PeerChannel) => {
    if (channel.request[0] === 16) {
      channel.respond(small)
      return channel.finish()
    }
    // as a client that does not make its own process the buffer: no more than its socket drains
    void (async () => {
      const connection = channel.scope.connection
      for (let i = 0; i < frames; i++) {
        channel.respond(big)
        if (connection.socket.bufferedAmount >= highWater) await connection.whenDrained()
      }
      channel.finish()
    })()
  }
  if (path === "server") {
    const client = await connect(url, token!)
    const images = new Map([[sha256(manifest), { repository: "bench", manifest, blobs: new Map([[sha256(config), config], [sha256(layerBlob), layerBlob]]) }]])
    const run = client.run({ image: sha256(manifest), template: "bench", memory: 1, disk: 1 }, { images, onAsk: answer })
    const first = await run.first
    if (first.kind !== "id") throw new Error(`the run did not start: ${JSON.stringify(first)}`)
  } else {
    // the client is the proxy's peer itself: it opens the begin scope as the server would
    const socket = new WebSocket(url, { perMessageDeflate: false, maxPayload: 256 * 1024 * 1024 })
    await new Promise<void>((resolve, reject) => {
      socket.once("open", () => resolve())
      socket.once("error", reject)
    })
    const connection = new FrameConnection(socket, { role: "opener" })
    const begin = connection.openScope(tagged(ProxyScope.begin, `{"template":"bench","arguments":null}`))
    if ((await begin.responses.take()) === undefined) throw new Error("the proxy did not begin")
    begin.peerOpened.listen(answer, () => {})
  }
  process.stdout.write("ready\n")
  process.stdin.resume()
  process.stdin.on("end", () => process.exit(0))
}

interface Figures {
  readonly median: number
  readonly p95: number
  readonly mibPerSecond: number
}

async function main() {
  const bench = process.argv[1]!
  const quantile = (values: ReadonlyArray<number>, q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil(q * values.length) - 1)]!
  const small = tagged(16, Buffer.alloc(64, 1))
  const children: Array<ChildProcess> = []
  /** the processes that relay (server, pipe), asked for their CPU time */
  const relays = new Map<Relay, { child: ChildProcess; line: () => Promise<string> }>()
  /** a process of this script; resolves with its first line */
  const start = (args: ReadonlyArray<string>, relay?: Relay, script = bench) => {
    const profile = (relay === "server" || relay === "before") && process.env.BENCH_PROFILE !== undefined
    const flags = profile ? ["--cpu-prof", "--cpu-prof-dir", process.env.BENCH_PROFILE!] : []
    const child = spawn(process.execPath, [...flags, script, ...args], { stdio: ["pipe", "pipe", "inherit"] })
    children.push(child)
    let out = ""
    let waiting: ((line: string) => void) | undefined
    const line = () => new Promise<string>((resolve) => {
      waiting = resolve
      child.stdout!.emit("more")
    })
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString()
      child.stdout!.emit("more")
    })
    child.stdout!.on("more", () => {
      const at = out.indexOf("\n")
      if (at < 0 || waiting === undefined) return
      const w = waiting
      waiting = undefined
      const first = out.slice(0, at)
      out = out.slice(at + 1)
      w(first)
    })
    if (relay !== undefined) relays.set(relay, { child, line })
    return new Promise<string>((resolve, reject) => {
      void line().then(resolve)
      child.once("exit", (code) => reject(new Error(`${args[0]} exited with ${code} before it was ready`)))
    })
  }
  /** the CPU time (user and system) the relay's process has taken, in ms */
  const cpuOf = async (relay: Relay): Promise<number> => {
    const r = relays.get(relay)!
    r.child.stdin!.write("cpu\n")
    return Number(await r.line())
  }
  const stopAll = async () => {
    // a client ends when its standard input does; the others are signalled (the server writes its profile on SIGINT)
    await Promise.all(children.splice(0).map((c) => new Promise<void>((resolve) => {
      if (c.exitCode !== null) return resolve()
      c.once("exit", () => resolve())
      c.stdin!.end()
      c.kill("SIGINT")
    })))
  }

  /** one latency round: an ask, its answer and its finish; the time to the answer, halved */
  const round = async (proxy: InProcessProxy): Promise<number> => {
    const began = process.hrtime.bigint()
    const channel = await proxy.ask(small)
    await channel.responses.take()
    const took = Number(process.hrtime.bigint() - began) / 2e6
    await channel.responses.take()
    return took
  }
  /** one long answer: MiB/s at the proxy */
  const stream = async (proxy: InProcessProxy): Promise<number> => {
    const began = process.hrtime.bigint()
    const channel: Channel = await proxy.ask(tagged(17, "stream"))
    let bytes = 0
    await new Promise<void>((resolve) => channel.responses.listen((p) => void (bytes += p.length), resolve))
    if (!channel.finished || bytes !== frames * (frameSize + 1)) throw new Error(`the stream ended after ${bytes} bytes`)
    return bytes / 1024 / 1024 / (Number(process.hrtime.bigint() - began) / 1e9)
  }

  /** the path's proxy, with its client ready to answer it */
  const setUp = async (path: Path, root: string): Promise<InProcessProxy> => {
    const proxy = new InProcessProxy({})
    const proxyUrl = await proxy.start()
    if (path === "direct") await start(["--client", "direct", proxyUrl])
    else if (path === "floor") await start(["--client", "floor", `ws://127.0.0.1:${await start(["--pipe", proxyUrl], "floor")}`])
    else if (path === "bytes") await start(["--client", "bytes", `ws://127.0.0.1:${await start(["--bytes", proxyUrl], "bytes")}`])
    else {
      const token = mintToken(root, "bench")
      const port = await start(["--server", root, proxyUrl], path, path === "before" ? before : bench)
      await start(["--client", "server", `ws://127.0.0.1:${port}`, token])
    }
    return proxy
  }

  const show = (n: number) => n.toFixed(3)
  const results = new Map<Path, Array<Figures>>(paths.map((p) => [p, []]))
  const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-bench-containers-"))
  const proxies = new Map<Path, InProcessProxy>()
  try {
    for (const path of paths) proxies.set(path, await setUp(path, root))
    console.log(`the ${paths.length} paths (${paths.join(", ")}) stand side by side and take turns (the machine's load falls on all alike): ` +
      `each repeat ${rounds} latency rounds each (one frame one way: half the round trip), then ${frames} frames of ${frameSize / 1024} KiB each; ${repeats} repeats`)
    for (let i = 0; i < warmUp; i++) for (const path of paths) await round(proxies.get(path)!)
    const cpuBefore = new Map<Relay, number>()
    for (const relay of relayPaths) cpuBefore.set(relay, await cpuOf(relay))
    for (let r = 1; r <= repeats; r++) {
      const took = new Map<Path, Array<number>>(paths.map((p) => [p, []]))
      // each round starts from another path, so that none is always the one behind (or ahead of) another
      for (let i = 0; i < rounds; i++) {
        for (let k = 0; k < paths.length; k++) {
          const path = paths[(i + k) % paths.length]!
          took.get(path)!.push(await round(proxies.get(path)!))
        }
      }
      for (const path of paths) {
        const t = took.get(path)!
        const f = { median: quantile(t, 0.5), p95: quantile(t, 0.95), mibPerSecond: await stream(proxies.get(path)!) }
        results.get(path)!.push(f)
        console.log(`  repeat ${r} ${path.padEnd(6)} latency median ${show(f.median)} ms p95 ${show(f.p95)} ms; throughput ${f.mibPerSecond.toFixed(1)} MiB/s`)
      }
      const d = results.get("direct")![r - 1]!
      console.log(`  repeat ${r} ratios to direct: ` + relayPaths.map((path) => {
        const f = results.get(path)![r - 1]!
        return `${path} latency ${(f.median / d.median).toFixed(2)}x throughput ${(f.mibPerSecond / d.mibPerSecond).toFixed(2)}x`
      }).join("; "))
    }
    const cpu = new Map<Relay, number>()
    for (const relay of relayPaths) cpu.set(relay, (await cpuOf(relay)) - cpuBefore.get(relay)!)
    const relayed = (repeats * frames * (frameSize + 10)) / 1024 / 1024
    const floorCpu = cpu.get("floor")!
    console.log(`the relays' own CPU time (user and system) for the same ${repeats * rounds} rounds and ${relayed.toFixed(0)} MiB, whatever the machine's load: ` +
      relayPaths.map((relay) => `${relay} ${cpu.get(relay)!.toFixed(0)} ms (${(cpu.get(relay)! / floorCpu).toFixed(2)}x the floor's, ${(cpu.get(relay)! / relayed).toFixed(2)} ms per MiB)`).join(", "))
  } finally {
    await stopAll()
    for (const proxy of proxies.values()) await proxy.stop()
    Fs.rmSync(root, { recursive: true, force: true })
  }

  const mid = (xs: ReadonlyArray<number>) => quantile(xs, 0.5)
  const spread = (xs: ReadonlyArray<number>, digits: number) => `${mid(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)} to ${Math.max(...xs).toFixed(digits)})`
  console.log("medians over the repeats (lowest to highest):")
  for (const path of paths) {
    const fs = results.get(path)!
    console.log(`  ${path.padEnd(6)} latency median ${spread(fs.map((f) => f.median), 3)} ms, p95 ${spread(fs.map((f) => f.p95), 3)} ms; throughput ${spread(fs.map((f) => f.mibPerSecond), 1)} MiB/s`)
  }
  const ratios = (a: Path, b: Path, pick: (f: Figures) => number) => results.get(a)!.map((f, i) => pick(f) / pick(results.get(b)![i]!))
  const latency = ratios("server", "direct", (f) => f.median)
  const throughput = ratios("server", "direct", (f) => f.mibPerSecond)
  console.log(`ratios, each repeat's paths against each other:`)
  for (const path of relayPaths.filter((p) => p !== "server")) {
    console.log(`  ${`${path}/direct`.padEnd(13)} latency ${spread(ratios(path, "direct", (f) => f.median), 2)}x, throughput ${spread(ratios(path, "direct", (f) => f.mibPerSecond), 2)}x`)
  }
  console.log(`  server/floor  latency ${spread(ratios("server", "floor", (f) => f.median), 2)}x, throughput ${spread(ratios("server", "floor", (f) => f.mibPerSecond), 2)}x`)
  if (before !== undefined) console.log(`  server/before latency ${spread(ratios("server", "before", (f) => f.median), 2)}x, throughput ${spread(ratios("server", "before", (f) => f.mibPerSecond), 2)}x`)
  // the target of issue 43 (DECISIONS 12): a relay makes two hops where a direct socket makes one, so the server is judged against a second hop that only copies bytes
  const againstBytes = ratios("server", "bytes", (f) => f.median)
  console.log(`  server/bytes  latency ${spread(againstBytes, 2)}x (target at most 1.25x) ${mid(againstBytes) <= 1.25 ? "met" : "NOT met"}, throughput ${spread(ratios("server", "bytes", (f) => f.mibPerSecond), 2)}x`)
  if (before !== undefined) console.log(`  before/bytes  latency ${spread(ratios("before", "bytes", (f) => f.median), 2)}x`)
  console.log(`  server/direct latency ${spread(latency, 2)}x (target at most 1.5x) ${mid(latency) <= 1.5 ? "met" : "NOT met"}; throughput ${spread(throughput, 2)}x (target at least 0.7x) ${mid(throughput) >= 0.7 ? "met" : "NOT met"}`)
  process.exit(0)
}
