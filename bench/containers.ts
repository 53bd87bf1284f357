/**
 * The tool-container server's relay (issue 18): channel throughput and per-frame latency
 * through the server, against a direct WebSocket between the same two ends, in one run.
 *
 *   npm run bench -- containers
 *
 * The two ends live in this process: a client (src/containers/Client.ts) and a container proxy
 * (src/containers/InProcessProxy.ts). The server runs as its own process (this script started again
 * with --server), as in production, with a deployer that hands it the proxy's address.
 * - latency: BENCH_ROUNDS (default 2000) asks, one at a time: the proxy opens a channel with 64
 *   bytes, the client answers 64 bytes and the finish; the time to the answer, halved, is the
 *   one-way latency of a frame; median and p95.
 * - throughput: the client answers one ask with BENCH_FRAMES (default 20000) frames of 16 KiB;
 *   MiB/s at the proxy, from the ask to the finish.
 * The direct case is the same exchange on one WebSocket between the same two kinds of end.
 * Targets: latency through the server at most 1.5x direct, throughput at least 0.7x direct.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { WebSocket, WebSocketServer } from "ws"
import * as MemoryImageSource from "../layers/MemoryImageSource.js"
import { Deployer } from "../services/Deployer.js"
import { connect } from "../src/containers/Client.js"
import { FrameConnection, type Channel, type PeerChannel, type Scope } from "../src/containers/FrameConnection.js"
import { tagged } from "../src/containers/Frames.js"
import { sha256 } from "../src/containers/OciImage.js"
import { makeServerParts } from "../src/containers/Parts.js"
import { mintToken, startContainersServer } from "../src/containers/Server.js"
import { InProcessProxy } from "../src/containers/InProcessProxy.js"

const rounds = Number(process.env.BENCH_ROUNDS ?? 2000)
const frames = Number(process.env.BENCH_FRAMES ?? 20000)
const frameSize = 16 * 1024

if (process.argv[2] === "--server") {
  // the server's process: every deploy is the proxy the bench stands up
  const [root, proxyUrl] = process.argv.slice(3) as [string, string]
  const fixed = Layer.succeed(Deployer, Deployer.of({ deploy: () => Effect.succeed({ proxyUrl, stop: Effect.void }) }))
  const parts = await Effect.runPromise(makeServerParts(root).pipe(Effect.provide(Layer.merge(fixed, MemoryImageSource.layer()))))
  const server = await startContainersServer({ root, parts })
  process.stdout.write(`${server.port}\n`)
} else {
  await main()
}

async function main() {
  const quantile = (values: ReadonlyArray<number>, q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil(q * values.length) - 1)]!
  const small = Buffer.alloc(64, 1)
  const big = Buffer.alloc(frameSize, 2)

  /** the exchanges, from the side that asks: latency rounds, then one long answer */
  const measure = async (ask: (payload: Buffer) => Promise<Channel>) => {
    const took: Array<number> = []
    for (let i = 0; i < rounds + 100; i++) {
      const began = process.hrtime.bigint()
      const channel = await ask(tagged(16, small))
      await channel.responses.take()
      if (i >= 100) took.push(Number(process.hrtime.bigint() - began) / 2e6)
      await channel.responses.take()
    }
    const began = process.hrtime.bigint()
    const channel = await ask(tagged(17, "stream"))
    let bytes = 0
    for (;;) {
      const p = await channel.responses.take()
      if (p === undefined) break
      bytes += p.length
    }
    const seconds = Number(process.hrtime.bigint() - began) / 1e9
    return { median: quantile(took, 0.5), p95: quantile(took, 0.95), mibPerSecond: bytes / 1024 / 1024 / seconds }
  }

  /** the answering side: one small answer, or the long stream */
  const answer = (channel: PeerChannel) => {
    if (channel.request[0] === 16) {
      channel.respond(tagged(0, small))
      return channel.finish()
    }
    for (let i = 0; i < frames; i++) channel.respond(tagged(0, big))
    channel.finish()
  }

  // direct: one WebSocket between an end that asks (as the proxy does) and one that answers
  const direct = await (async () => {
    const wss = new WebSocketServer({ port: 0, host: "127.0.0.1", perMessageDeflate: false })
    await new Promise<void>((resolve) => wss.once("listening", resolve))
    let scope!: Scope
    const opened = new Promise<void>((resolve) =>
      wss.on("connection", (socket) => {
        new FrameConnection(socket, {
          role: "responder",
          onScope: (s) => {
            scope = s
            resolve()
          }
        })
      })
    )
    const socket = new WebSocket(`ws://127.0.0.1:${(wss.address() as { port: number }).port}`, { perMessageDeflate: false })
    await new Promise<void>((resolve) => socket.once("open", () => resolve()))
    const answering = new FrameConnection(socket, { role: "opener" })
    const own = answering.openScope(tagged(1, "{}"))
    own.peerOpened.listen(answer, () => {})
    await opened
    const result = await measure(async (payload) => scope.openChannel(payload))
    answering.close()
    await new Promise<void>((resolve) => wss.close(() => resolve()))
    return result
  })()

  // through the server: the proxy asks on the begin scope, the server relays to the client
  const through = await (async () => {
    const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-bench-containers-"))
    const token = mintToken(root, "bench")
    const proxy = new InProcessProxy({})
    const proxyUrl = await proxy.start()
    const child = spawn(process.execPath, [process.argv[1]!, "--server", root, proxyUrl], { stdio: ["ignore", "pipe", "inherit"] })
    try {
      const port = await new Promise<string>((resolve) => child.stdout!.once("data", (d: Buffer) => resolve(d.toString().trim())))
      const client = await connect(`ws://127.0.0.1:${port}`, token)
      const layer = Buffer.from("layer")
      const config = Buffer.from("{}")
      const manifest = Buffer.from(JSON.stringify({ schemaVersion: 2, config: { mediaType: "c", digest: sha256(config), size: config.length }, layers: [{ mediaType: "l", digest: sha256(layer), size: layer.length }] }))
      const images = new Map([[sha256(manifest), { repository: "bench", manifest, blobs: new Map([[sha256(config), config], [sha256(layer), layer]]) }]])
      const run = client.run({ image: sha256(manifest), template: "bench", memory: 1, disk: 1 }, { images, onAsk: answer })
      const first = await run.first
      if (first.kind !== "id") throw new Error(`the run did not start: ${JSON.stringify(first)}`)
      const result = await measure((payload) => proxy.ask(payload))
      client.close()
      return result
    } finally {
      child.kill()
      await proxy.stop()
      Fs.rmSync(root, { recursive: true, force: true })
    }
  })()

  const latencyRatio = through.median / direct.median
  const throughputRatio = through.mibPerSecond / direct.mibPerSecond
  const show = (n: number) => n.toFixed(3)
  console.log(`latency, one frame one way (${rounds} rounds): direct median ${show(direct.median)} ms p95 ${show(direct.p95)} ms; through the server median ${show(through.median)} ms p95 ${show(through.p95)} ms`)
  console.log(`throughput (${frames} frames of ${frameSize / 1024} KiB): direct ${direct.mibPerSecond.toFixed(1)} MiB/s; through the server ${through.mibPerSecond.toFixed(1)} MiB/s`)
  console.log(`ratios: latency ${latencyRatio.toFixed(2)}x (target at most 1.5x) ${latencyRatio <= 1.5 ? "met" : "NOT met"}; throughput ${throughputRatio.toFixed(2)}x (target at least 0.7x) ${throughputRatio >= 0.7 ? "met" : "NOT met"}`)
  process.exit(0)
}
