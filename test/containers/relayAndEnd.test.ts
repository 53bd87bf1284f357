import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it, vi } from "vitest"
import type { WebSocket } from "ws"
import type { ToolRun } from "../../src/containers/Client.js"
import type { PeerChannel } from "../../src/containers/FrameConnection.js"
import { connectionHighWater } from "../../src/containers/FrameConnection.js"
import { FrameType, headerLength, tagged } from "../../src/containers/Frames.js"
import { Answer, Endpoint, ProxyScope } from "../../src/containers/Wire.js"
import { images, makeImage, request, until, type World, worldPerCase } from "./world.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 300_000 })

/**
 * containers-notes section 2, obligations 49 to 66: the id, the relay in both directions, the
 * ending, and what the server never does.
 */
const open = worldPerCase()
const img = makeImage()
const held = images(img)

const started = async (w: World, more: Record<string, unknown> = {}, onAsk?: (c: PeerChannel) => void, identity = "alice") => {
  const run = (await w.client(identity)).run(request(img.digest, more), { images: held, ...(onAsk !== undefined ? { onAsk } : {}) })
  const first = await run.first
  expect(first).toMatchObject({ kind: "id" })
  return { run, id: (first as { id: string }).id, proxy: w.deploys.at(-1)!.proxy }
}

/** the responses of RUN after its first, once N came */
const later = async (run: ToolRun, n: number) => {
  await until(() => run.later.length >= n, `${n} responses after the id`)
  return run.later
}

describe("tools::run: the id", () => {
  it("2.49: the id is random, unique among the running, and derivable from nothing of the request or the identity", async () => {
    const w = await open()
    const ids = new Set<string>()
    for (let i = 0; i < 20; i++) {
      const { id } = await started(w, {}, undefined, i % 2 === 0 ? "alice" : "bob")
      expect(id).toMatch(/^[A-Za-z0-9_-]{43}$/)
      expect(id).not.toContain("alice")
      ids.add(id)
    }
    // the same request, the same identity: twenty different ids
    expect(ids.size).toBe(20)
    expect(w.parts.running.size).toBe(20)
  })

  it("2.50: the id is sent as exactly one response; from then on the client's containers::fuse_serve finds it", async () => {
    const w = await open()
    const { run, id, proxy } = await started(w)
    await proxy.say(tagged(Answer.active))
    await later(run, 1)
    expect(run.later.filter((p) => p[0] === Answer.id)).toEqual([])
    expect(w.parts.running.find("alice", id)).toMatchObject({ id, identity: "alice" })
    expect(w.parts.running.find("bob", id)).toBeUndefined()
  })

  it("2.51: Active and Inactive are relayed exactly as the proxy sent them, and nothing else", async () => {
    const w = await open()
    const { run, proxy } = await started(w)
    const inactive = tagged(Answer.inactive, `{"token" : "r\\u00f6tated", "n":1e400}`)
    await proxy.say(tagged(Answer.active))
    await proxy.say(tagged(0x09, "a word the server does not relay"))
    await proxy.say(tagged(Answer.begun, `{"secrets":{}}`))
    await proxy.say(inactive)
    await proxy.say(tagged(Answer.active))
    expect(await later(run, 3)).toEqual([tagged(Answer.active), inactive, tagged(Answer.active)])
    run.stop()
    await run.finished
    expect(run.later).toHaveLength(3)
  })
})

describe("tools::run: serving the scope", () => {
  it("2.52: every channel the proxy opens on the begin scope is relayed to the client as a server channel, and back", async () => {
    const w = await open()
    const seen: Array<Buffer> = []
    const { proxy } = await started(w, {}, (c) => {
      seen.push(c.request)
      c.respond(tagged(0, "one"))
      c.respond(tagged(0, "two"))
      c.finish()
    })
    const ask = await proxy.ask(tagged(17, "may I?"))
    expect(await ask.responses.take()).toEqual(tagged(0, "one"))
    expect(await ask.responses.take()).toEqual(tagged(0, "two"))
    expect(await ask.responses.take()).toBeUndefined()
    expect(ask.finished).toBe(true)
    expect(seen).toEqual([tagged(17, "may I?")])
  })

  it("2.53: every ask a mount makes on its scope is relayed to the client the same way", async () => {
    const w = await open()
    const seen: Array<Buffer> = []
    const { proxy } = await started(w, { fuse_directory_mounts: [{ id: "src", container_path: "/src" }] }, (c) => {
      seen.push(c.request)
      c.respond(tagged(0, "contents"))
      c.finish()
    })
    const ask = tagged(32, Buffer.concat([Buffer.from([0, 3]), Buffer.from("src"), Buffer.from("read /a")]))
    const channel = proxy.mountAsk(0, ask)
    expect(await channel.responses.take()).toEqual(tagged(0, "contents"))
    expect(seen).toEqual([ask])
  })

  it("2.54: a client's secrets channel is relayed to the begin scope as one secrets channel, verbatim, and answered as the proxy answers", async () => {
    const w = await open({ behaviour: () => ({ feed: (r) => (r.toString().includes("bad") ? [tagged(Answer.error, "no")] : [tagged(Answer.ok)]) }) })
    const { run, proxy } = await started(w)
    const good = run.secrets(`{ "k" :"v" }`)
    expect(await good.responses.take()).toEqual(tagged(Answer.ok))
    expect(await good.responses.take()).toBeUndefined()
    const bad = run.secrets(`{"bad":1}`)
    expect(await bad.responses.take()).toEqual(tagged(Answer.error, "no"))
    expect(proxy.feeds.map((f) => f.request)).toEqual([tagged(1, `{ "k" :"v" }`), tagged(1, `{"bad":1}`)])
  })

  it("2.55: a client channel request that does not decode gets a bare channel finish", async () => {
    const w = await open()
    const { run, proxy } = await started(w)
    for (const payload of [Buffer.alloc(0), tagged(9, "x"), tagged(0, "a stop with a body"), tagged(1, "not json"), tagged(1, "[1]"), tagged(2, `{"id":"x"}`)]) {
      const channel = run.scope.openChannel(payload)
      expect(await channel.responses.take(), payload.toString()).toBeUndefined()
      expect(channel.finished).toBe(true)
    }
    expect(proxy.feeds).toHaveLength(0)
    expect(proxy.scopes).toHaveLength(1)
  })

  it("2.56: the conduit: bytes relayed verbatim, in order, each once, both ways", async () => {
    const w = await open()
    const answers = Array.from({ length: 200 }, (_, i) => tagged(i % 256, Crypto.randomBytes(i * 37)))
    let asked = 0
    const { proxy } = await started(w, {}, (c) => {
      asked++
      for (const a of answers) c.respond(a)
      c.finish()
    })
    const request = tagged(200, Crypto.randomBytes(100_000))
    const channel = await proxy.ask(request)
    const got: Array<Buffer> = []
    for (;;) {
      const p = await channel.responses.take()
      if (p === undefined) break
      got.push(p)
    }
    expect(got).toEqual(answers)
    expect(asked).toBe(1)
  })

  it("2.57: a channel the client finishes with nothing is relayed to the proxy as a bare finish", async () => {
    const w = await open()
    const { proxy } = await started(w, {}, (c) => c.finish())
    const channel = await proxy.ask(tagged(16, "x"))
    expect(await channel.responses.take()).toBeUndefined()
    expect(channel.finished).toBe(true)
  })
})

describe("tools::run: the end", () => {
  it("2.58: the client's stop, the proxy's end, the client's end: the container stopped, every channel ended, the finish", async () => {
    const w = await open()
    // stop, with a relayed ask still unanswered
    let a = await started(w, {}, () => {})
    const pending = await a.proxy.ask(tagged(16, "never answered"))
    a.run.stop()
    await a.run.finished
    expect(w.deploys.at(-1)!.stops).toBe(1)
    expect(await pending.responses.take()).toBeUndefined()
    // the proxy's end (its connection, and its finishing the begin scope)
    a = await started(w)
    a.proxy.drop()
    await a.run.finished
    expect(w.deploys.at(-1)!.stops).toBe(1)
    a = await started(w)
    await a.proxy.endBegin()
    await a.run.finished
    expect(w.deploys.at(-1)!.stops).toBe(1)
    // the client's end
    const client = await w.client()
    const run = client.run(request(img.digest), { images: held })
    expect(await run.first).toMatchObject({ kind: "id" })
    client.close()
    await until(() => w.deploys.at(-1)!.stops === 1 && w.server.runs.size === 0, "every run ended")
    expect(w.parts.running.size).toBe(0)
  })

  it("2.59: after the id the one error is the proxy's, relayed; the server sends none of its own", async () => {
    const w = await open()
    let a = await started(w)
    const proxyError = tagged(Answer.error, "could not collect the rotating secrets")
    await a.proxy.say(proxyError)
    await a.run.finished
    expect(a.run.later).toEqual([proxyError])
    expect(w.deploys.at(-1)!.stops).toBe(1)
    // the proxy's connection dropping after the id: no error, only the finish
    a = await started(w)
    a.proxy.drop()
    await a.run.finished
    expect(a.run.later).toEqual([])
  })

  it("2.60: the finish that ends a running container carries nothing", async () => {
    const w = await open()
    const client = await w.client()
    const finishes: Array<Buffer> = []
    // the client's connection is ws's
    const socket = client.connection.socket as WebSocket
    socket.on("message", (data: Buffer) => {
      if (data[0] === FrameType.ResponseFinish) finishes.push(data)
    })
    const run = client.run(request(img.digest), { images: held })
    expect(await run.first).toMatchObject({ kind: "id" })
    run.stop()
    await run.finished
    expect(finishes).toHaveLength(1)
    expect(finishes[0]!.length).toBe(headerLength)
  })
})

describe("tools::run: what the server never does", () => {
  it("2.61: a FUSE ask is never refused or altered by the server: whatever it asks reaches the client as it was", async () => {
    const w = await open()
    const seen: Array<Buffer> = []
    const { proxy } = await started(w, { fuse_directory_mounts: [{ id: "m", container_path: "/m" }] }, (c) => {
      seen.push(c.request)
      c.respond(tagged(Answer.error, "EPERM"))
      c.finish()
    })
    const asks = ["unlink /m/../../etc/passwd", "write /m/x", "rename /m/a /m/b", ""].map((op) => tagged(32, Buffer.concat([Buffer.from([0, 1]), Buffer.from("m"), Buffer.from(op)])))
    for (const ask of asks) expect(await proxy.mountAsk(0, ask).responses.take()).toEqual(tagged(Answer.error, "EPERM"))
    expect(seen).toEqual(asks)
  })

  it("2.62: nothing is timed out: a proxy that never answers the begin is waited for while other runs come and go", async () => {
    const w = await open({ behaviour: (spec) => (spec.memory === 1 ? { beginWhen: new Promise<void>(() => {}) } : {}) })
    const client = await w.client()
    const waiting = client.run(request(img.digest, { memory: 1 }), { images: held })
    await until(() => w.deploys.length === 1 && w.deploys[0]!.proxy.scopes.length === 1, "the begin")
    for (let i = 0; i < 5; i++) {
      const other = await started(w)
      other.run.stop()
      await other.run.finished
    }
    const run = [...w.server.runs][0]!
    expect(run.state).toBe("beginning")
    let answered = false
    void waiting.first.then(() => (answered = true))
    await (await w.client()).version()
    expect(answered).toBe(false)
    // a client's end is what ends it
    client.close()
    await until(() => w.deploys[0]!.stops === 1, "the container stopped")
  })

  it("2.63: the server never writes to a volume or a mount on its own account", async () => {
    const w = await open()
    const client = await w.client()
    await client.volumesCreate("p", "persistent")
    await client.volumesWrite("p", "f", Buffer.from("mine"))
    const data = Path.join(w.root, "volumes/alice/p/data")
    const before = Fs.readdirSync(data, { recursive: true }).sort()
    const mtime = Fs.statSync(Path.join(data, "f")).mtimeMs
    const { run } = await started(w, { volume_mounts: [{ volume_name: "p", container_path: "/p", mode: "persistent" }], fuse_file_mounts: [{ id: "t", container_path: "/t" }] })
    run.stop()
    await run.finished
    expect(Fs.readdirSync(data, { recursive: true }).sort()).toEqual(before)
    expect(Fs.statSync(Path.join(data, "f")).mtimeMs).toBe(mtime)
  })

  it("2.64: never a second id, whatever the proxy says", async () => {
    const w = await open()
    const { run, proxy } = await started(w)
    await proxy.say(tagged(Answer.begun, `{"secrets":{}}`))
    await proxy.say(tagged(Answer.id, "another id"))
    await proxy.say(tagged(Answer.active))
    await later(run, 1)
    run.stop()
    await run.finished
    expect(run.later).toEqual([tagged(Answer.active)])
  })

  it("2.65: never a second proxy connection, never a tree scope", async () => {
    const w = await open()
    const { run, proxy } = await started(w, { fuse_file_mounts: [{ id: "f", container_path: "/f" }] }, (c) => c.finish())
    run.fuseMount("g", "/g", "directory")
    run.secrets(`{"a":"b"}`)
    await (await proxy.ask(tagged(16, ""))).responses.take()
    await until(() => proxy.scopes.length === 3 && proxy.feeds.length === 1)
    run.stop()
    await run.finished
    expect(proxy.connections).toBe(1)
    // no tree scope: none was asked for (containers::fuse_serve below)
    expect(proxy.scopes.map((s) => s.tag)).toEqual([ProxyScope.begin, ProxyScope.mount, ProxyScope.mount])
  })

  it("2.66: the means of deployment are free: a proxy reached through a Unix socket serves the same run", async () => {
    const dir = Fs.mkdtempSync("/tmp/ocx2-proxy-")
    try {
      const w = await open({ behaviour: () => ({ unixSocket: Path.join(dir, "proxy.sock"), begun: `{"secrets":{"k":"rotating"}}` }) })
      const { run, proxy } = await started(w)
      expect(w.deploys[0]!.proxy.connections).toBe(1)
      await proxy.say(tagged(Answer.active))
      expect(await later(run, 1)).toEqual([tagged(Answer.active)])
      run.stop()
      await run.finished
      expect((await (await w.client()).call(Endpoint.version, "{}")).responses[0]![0]).toBe(Answer.ok)
    } finally {
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})



describe("containers::fuse_serve naming a running container", () => {
  const fuseServe = async (w: World, id: string, identity = "alice") => {
    const client = await w.client(identity)
    const scope = client.connection.openScope(tagged(Endpoint.containersFuseServe, JSON.stringify({ id })))
    return { scope, first: await scope.responses.take() }
  }

  it("2.38, 2.50: found from the id on, by its client only; one tree scope, its asks relayed verbatim; the stop ends it", async () => {
    const w = await open()
    const { run, id, proxy } = await started(w)
    expect((await fuseServe(w, id, "bob")).first).toEqual(tagged(Answer.error, `you run no container ${JSON.stringify(id)}`))
    expect((await fuseServe(w, "no-such-id")).first![0]).toBe(Answer.error)
    const served = await fuseServe(w, id)
    expect(served.first).toEqual(tagged(Answer.ok))
    expect(proxy.scopes.map((s) => s.tag)).toEqual([ProxyScope.begin, ProxyScope.tree])
    const ask = tagged(32, "stat /")
    const channel = served.scope.openChannel(ask)
    expect(await channel.responses.take()).toEqual(tagged(Answer.ok, ask))
    served.scope.openChannel(tagged(0))
    expect(await served.scope.responses.take()).toBeUndefined()
    await until(() => proxy.trees[0]!.isEnded, "the tree scope ended")
    expect(proxy.treeAsks).toEqual([ask, tagged(0)])
    // the run goes on
    await proxy.say(tagged(Answer.active))
    expect(await later(run, 1)).toEqual([tagged(Answer.active)])
  })

  it("2.45, 2.65: asked with the id the registration carried, before the last mount is complete, the tree waits for it", async () => {
    let release!: () => void
    const lastMount = new Promise<void>((resolve) => (release = resolve))
    const w = await open({ behaviour: () => ({ begun: `{"secrets":{"k":"rotating"}}`, mount: async () => (await lastMount, tagged(Answer.ok)) }) })
    let served: Promise<{ scope: unknown; first: Buffer | undefined }> | undefined
    const run = (await w.client()).run(request(img.digest, { fuse_directory_mounts: [{ id: "d", container_path: "/d" }] }), {
      images: held,
      registration: (id) => {
        served = fuseServe(w, id)
        return [tagged(Answer.registered)]
      }
    })
    await until(() => served !== undefined && w.deploys[0]!.proxy.scopes.length === 2, "the registration and the mount")
    await (await w.client()).version()
    expect(w.deploys[0]!.proxy.scopes.map((s) => s.tag)).toEqual([ProxyScope.begin, ProxyScope.mount])
    release()
    expect((await served!).first).toEqual(tagged(Answer.ok))
    expect(await run.first).toMatchObject({ kind: "id" })
    expect(w.deploys[0]!.proxy.scopes.map((s) => s.tag)).toEqual([ProxyScope.begin, ProxyScope.mount, ProxyScope.tree])
    // the run's end ends the tree's scope
    run.stop()
    await run.finished
  })
})

describe("the relay's flow control", () => {
  it("a proxy that does not read holds back a client that does not hold its scope: the server is not the buffer; every byte arrives, in order, once", async () => {
    const w = await open()
    const frame = Buffer.alloc(64 * 1024, 5)
    const count = 1024 // 64 MiB, four times the connection's bound
    let clientSocket: { bufferedAmount: number } | undefined
    const { proxy } = await started(w, {}, (c) => {
      clientSocket = c.scope.connection.socket
      for (let i = 0; i < count; i++) {
        frame.writeUInt32BE(i, 1)
        c.respond(frame)
      }
      c.finish()
    })
    proxy.connection!.socket.pause()
    const ask = await proxy.ask(tagged(16, "send me a lot"))
    // this client sends all at once, asked to hold the scope or not: past the connection's bound the
    // server stops reading it while the proxy is behind, what it sent waits on its side, and what
    // the server holds for the proxy stays near that bound
    const run = [...w.server.runs][0]!
    await until(() => run.connections.client.isHeld, "the client held back")
    expect(run.connections.proxy!.socket.bufferedAmount).toBeLessThan(connectionHighWater + 2 * 1024 * 1024)
    expect(clientSocket!.bufferedAmount).toBeGreaterThan(16 * 1024 * 1024)
    proxy.connection!.socket.resume()
    for (let i = 0; i < count; i++) {
      const p = await ask.responses.take()
      expect(p?.length).toBe(frame.length)
      expect(p!.readUInt32BE(1)).toBe(i)
    }
    expect(await ask.responses.take()).toBeUndefined()
    expect(ask.finished).toBe(true)
    await until(() => clientSocket!.bufferedAmount === 0, "the client drained")
  })
})
