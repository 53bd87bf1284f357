import { describe, expect, it, vi } from "vitest"
import type { PeerChannel } from "../../src/containers/FrameConnection.js"
import { connectionHighWater, highWater } from "../../src/containers/FrameConnection.js"
import { tagged } from "../../src/containers/Frames.js"
import { ServerChannel } from "../../src/containers/Wire.js"
import { images, makeImage, request, until, worldPerCase } from "./world.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 300_000 })

/**
 * Per-scope flow control (issue 43; docs/containers.md section 1, "Flow control"): a run whose
 * proxy does not read holds back its own scope only. The real server, the test deployer's
 * proxies on loopback, one client connection carrying two runs.
 */
const open = worldPerCase()
const img = makeImage()
const held = images(img)
const piece = 64 * 1024

describe("per-scope flow control", () => {
  it("a stalled proxy holds back only its own scope: another run on the same connection relays 8 MiB meanwhile, and the stalled one loses nothing", async () => {
    const w = await open()
    const client = await w.client()

    // run A: its proxy stops reading; the client answers A's ask a piece a turn for as long as
    // A's scope is not held (32 MiB in all, eight times the server's mark)
    const countA = 512
    let sentA = 0
    let channelA: PeerChannel | undefined
    let pumping = false
    const holds: Array<boolean> = []
    const pumpA = async () => {
      if (pumping || channelA === undefined) return
      pumping = true
      const bytes = Buffer.alloc(piece, 7)
      while (sentA < countA && !runA.held && !channelA.isEnded) {
        bytes.writeUInt32BE(sentA, 1)
        channelA.respond(bytes)
        sentA++
        await new Promise((resolve) => setImmediate(resolve))
      }
      if (sentA === countA) channelA.finish()
      pumping = false
    }
    const runA = client.run(request(img.digest), {
      images: held,
      onAsk: (c) => {
        channelA = c
        void pumpA()
      },
      onHold: (isHeld) => {
        holds.push(isHeld)
        if (!isHeld) void pumpA()
      }
    })
    expect(await runA.first).toMatchObject({ kind: "id" })
    const proxyA = w.deploys[0]!.proxy
    proxyA.connection!.socket.pause()
    const askA = await proxyA.ask(tagged(17, "send me a lot"))
    // A's proxy is behind: more than the server's mark waits to be written to it
    const serverRunA = [...w.server.runs][0]!
    await until(() => serverRunA.connections.proxy!.socket.bufferedAmount >= highWater, "run A's proxy behind")

    // run B on the same connection: its proxy reads; 8 MiB from the client reach it whole
    const countB = 128
    const runB = client.run(request(img.digest), {
      images: held,
      onAsk: (c) => {
        const bytes = Buffer.alloc(piece, 9)
        for (let i = 0; i < countB; i++) {
          bytes.writeUInt32BE(i, 1)
          c.respond(bytes)
        }
        c.finish()
      }
    })
    // (before per-scope flow control the server did not read the client's connection from here on:
    // not even B's request reached it)
    let firstB: unknown
    void runB.first.then((f) => (firstB = f))
    await until(() => firstB !== undefined, "run B's id while run A's proxy is stalled")
    expect(firstB).toMatchObject({ kind: "id" })
    const askB = await w.deploys[1]!.proxy.ask(tagged(17, "send me 8 MiB"))
    const gotB: Array<Buffer> = []
    let endB = false
    askB.responses.listen((p) => gotB.push(p), () => (endB = true))
    await until(() => endB, "run B's 8 MiB at its proxy while run A's proxy is stalled")
    expect(askB.finished).toBe(true)
    expect(gotB.map((p) => p.length)).toEqual(Array(countB).fill(piece))
    expect(gotB.map((p) => p.readUInt32BE(1))).toEqual([...Array(countB).keys()])

    // meanwhile A is still stalled, its scope held, and the client's connection read all along
    expect(runA.held).toBe(true)
    expect(serverRunA.describe()).toContain("scope held for its proxy")
    expect(sentA).toBeLessThan(countA)
    expect(serverRunA.connections.client.isHeld).toBe(false)
    expect(serverRunA.connections.proxy!.bufferedAmount).toBeLessThan(connectionHighWater)

    // A's proxy reads again: the server says go on, and every byte of A arrives, in order, once
    proxyA.connection!.socket.resume()
    for (let i = 0; i < countA; i++) {
      const p = await askA.responses.take()
      expect(p?.length).toBe(piece)
      expect(p!.readUInt32BE(1)).toBe(i)
    }
    expect(await askA.responses.take()).toBeUndefined()
    expect(askA.finished).toBe(true)
    expect(holds[0]).toBe(true)
    expect(holds).toContain(false)
    expect(runA.held).toBe(false)
  })

  it("the hold and go-on channels are server channels of their own tags, each answered by the bare finish", async () => {
    const w = await open()
    const seen: Array<number> = []
    let channel: PeerChannel | undefined
    const run = (await w.client()).run(request(img.digest), {
      images: held,
      onServerChannel: (c) => seen.push(c.request[0]!),
      onAsk: (c) => (channel = c)
    })
    expect(await run.first).toMatchObject({ kind: "id" })
    const proxy = w.deploys[0]!.proxy
    proxy.connection!.socket.pause()
    const ask = await proxy.ask(tagged(17, "hold me"))
    await until(() => channel !== undefined, "the ask relayed")
    const bytes = Buffer.alloc(piece, 1)
    while (!run.held) {
      channel!.respond(bytes)
      await new Promise((resolve) => setImmediate(resolve))
    }
    proxy.connection!.socket.resume()
    await until(() => !run.held, "go on")
    channel!.finish()
    for (;;) if ((await ask.responses.take()) === undefined) break
    expect(seen.filter((t) => t === ServerChannel.hold || t === ServerChannel.goOn)).toEqual([ServerChannel.hold, ServerChannel.goOn])
    expect(w.server.runs.size).toBe(1)
  })
})
