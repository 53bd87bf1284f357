import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it, vi } from "vitest"
import { tagged } from "../../src/containers/Frames.js"
import { Answer, ProxyScope, ServerChannel } from "../../src/containers/Wire.js"
import { gate, images, makeImage, makeWorld, request, until, type WorldOptions, worldPerCase } from "./world.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 300_000 })

/**
 * containers-notes section 2, obligations 27 to 48: the deploy, the one proxy connection and
 * its begin, registration and the feed, the FUSE mounts, and the channels held until the id.
 */
const open = worldPerCase()
const img = makeImage()
const held = images(img)
const mount = (volume_name: string, container_path: string, mode: string, volume_relative_path = "") => ({ volume_name, volume_relative_path, container_path, mode })

/** a registration answer: a deploy carrying VALUES */
const deploy = (values: string) => () => [tagged(Answer.deploy, values)]

describe("tools::run: the deploy", () => {
  it("2.27: the image is started with memory and disk as limits", async () => {
    const w = await open()
    const run = (await w.client()).run(request(img.digest, { memory: 123_456_789, disk: 987_654_321 }), { images: held })
    expect(await run.first).toMatchObject({ kind: "id" })
    expect(w.deploys[0]!.spec).toMatchObject({ memory: 123_456_789, disk: 987_654_321, image: { digest: img.digest } })
  })

  it("2.28: each volume mount is resolved under the connection's identity and descended by volume_relative_path", async () => {
    const w = await open()
    const alice = await w.client("alice")
    await alice.volumesCreate("v", "persistent")
    await alice.volumesWrite("v", "sub", Buffer.from(""))
    Fs.rmSync(Path.join(w.root, "volumes/alice/v/data/sub"))
    Fs.mkdirSync(Path.join(w.root, "volumes/alice/v/data/sub"))
    // bob's volume of the same name is another volume
    const bob = await w.client("bob")
    await bob.volumesCreate("v", "persistent")
    const run = alice.run(request(img.digest, { volume_mounts: [mount("v", "/data", "persistent", "sub"), mount("v", "/all", "persistent")] }), { images: held })
    expect(await run.first).toMatchObject({ kind: "id" })
    const real = Fs.realpathSync(Path.join(w.root, "volumes/alice/v/data"))
    expect(w.deploys[0]!.spec.mounts).toEqual([
      { hostPath: Path.join(real, "sub"), containerPath: "/data", readOnly: false },
      { hostPath: real, containerPath: "/all", readOnly: false }
    ])
    expect(w.deploys[0]!.spec.identity).toBe("alice")
    // a path the volume does not have, and a symlink out of it, are the run's error
    Fs.symlinkSync("/etc", Path.join(w.root, "volumes/alice/v/data/out"))
    for (const relative of ["nothing", "out"]) {
      const bad = alice.run(request(img.digest, { volume_mounts: [mount("v", "/data", "persistent", relative)] }), { images: held })
      expect(await bad.first, relative).toMatchObject({ kind: "error" })
      await bad.finished
    }
    expect(w.deploys).toHaveLength(1)
  })

  it("2.29, 2.30: the deployer stands the proxy up and makes it reachable; the server dials where it says", async () => {
    const w = await open()
    const run = (await w.client()).run(request(img.digest), { images: held })
    expect(await run.first).toMatchObject({ kind: "id" })
    expect(w.deploys[0]!.proxy.connections).toBe(1)
    expect(w.deploys[0]!.proxy.scopes[0]!.tag).toBe(ProxyScope.begin)
  })

  it("2.31: the deploy is complete when the proxy accepts: a proxy not yet listening is dialled again, with no deadline", async () => {
    const listening = gate()
    const w = await open({ behaviour: () => ({ listenWhen: listening.promise }) })
    const run = (await w.client()).run(request(img.digest), { images: held })
    await until(() => w.deploys.length === 1, "the deploy")
    // dialled and refused: no connection yet, and the run waits
    await (await w.client()).version()
    expect(w.deploys[0]!.proxy.connections).toBe(0)
    listening.open()
    expect(await run.first).toMatchObject({ kind: "id" })
    expect(w.deploys[0]!.proxy.connections).toBe(1)
  })

  it("2.32: the server sets no environment from the request: the deploy carries only limits, image and mounts", async () => {
    const w = await open()
    const run = (await w.client()).run(request(img.digest, { arguments: { env: { PATH: "/evil" } } }), { images: held })
    expect(await run.first).toMatchObject({ kind: "id" })
    expect(Object.keys(w.deploys[0]!.spec).sort()).toEqual(["disk", "identity", "image", "memory", "mounts"])
  })

  it("2.33: a deploy that does not complete is the run's error", async () => {
    const w = await open({ fail: () => "the runtime refused" })
    const run = (await w.client()).run(request(img.digest), { images: held })
    expect(await run.first).toEqual({ kind: "error", message: "the deploy did not complete: the runtime refused" })
    await run.finished
    expect(run.later).toEqual([])
  })
})

describe("tools::run: the proxy connection and the begin", () => {
  it("2.34: exactly one WebSocket to the proxy, for the whole run", async () => {
    const w = await open({ behaviour: () => ({ begun: `{"secrets":{"a":"rotating"}}`, mount: () => tagged(Answer.ok) }) })
    const run = (await w.client()).run(request(img.digest, { fuse_file_mounts: [{ id: "f", container_path: "/f" }] }), {
      images: held,
      onAsk: (c) => (c.respond(tagged(0, "answer")), c.finish())
    })
    expect(await run.first).toMatchObject({ kind: "id" })
    const proxy = w.deploys[0]!.proxy
    expect(await (await proxy.ask(tagged(16, "ask"))).responses.take()).toEqual(tagged(0, "answer"))
    run.secrets(`{"a":"1"}`)
    await until(() => proxy.feeds.length === 1)
    expect(proxy.connections).toBe(1)
  })

  it("2.35: the begin scope comes first, carrying the arguments and the template verbatim and no secret", async () => {
    const w = await open()
    const text = `{"image":"${img.digest}","template":"t\\u00e9 \\"x\\"","memory":1,"disk":1,"arguments":  [ 1.0000000000000000001, {"b" :2,"b":3}, "\\ud83d\\ude00" ] }`
    const run = (await w.client()).run(text, { images: held, registration: deploy(`{"s":"secret-value"}`) })
    expect(await run.first).toMatchObject({ kind: "id" })
    const proxy = w.deploys[0]!.proxy
    expect(proxy.scopes[0]).toEqual({ tag: ProxyScope.begin, body: `{"template":"t\\u00e9 \\"x\\"","arguments":[ 1.0000000000000000001, {"b" :2,"b":3}, "\\ud83d\\ude00" ]}` })
    expect(proxy.scopes[0]!.body).not.toContain("secret-value")
  })

  it("2.36: a proxy that does not accept the connection, or answers the begin with an error, is the run's error; the container is stopped", async () => {
    const w = await open({ behaviour: (spec) => (spec.memory === 1 ? { refuseHandshake: true } : { begun: tagged(Answer.error, "no such template") }) })
    const client = await w.client()
    const refused = client.run(request(img.digest, { memory: 1 }), { images: held })
    expect(await refused.first).toMatchObject({ kind: "error", message: expect.stringContaining("did not accept") })
    await refused.finished
    const failed = client.run(request(img.digest, { memory: 2 }), { images: held })
    expect(await failed.first).toMatchObject({ kind: "error", message: expect.stringContaining("no such template") })
    await failed.finished
    expect(w.deploys.map((d) => d.stops)).toEqual([1, 1])
  })

  it("2.38: a begin the proxy finishes right behind its Begun (a program that ended at once) is still registered, mounted and given its id; the end follows it", async () => {
    const w = await open({ behaviour: () => ({ begun: `{"secrets":{"k":"static"}}`, endAfterBegun: true }) })
    const registered: Array<string> = []
    const run = (await w.client()).run(request(img.digest, { fuse_file_mounts: [{ id: "f", container_path: "/f" }] }), {
      images: held,
      registration: (id, declaration) => {
        registered.push(`${id} ${declaration}`)
        // a deploy whose feed the ended begin cannot take: nothing is left to feed
        return [tagged(Answer.deploy, `{"k":"v"}`)]
      }
    })
    const first = await run.first
    expect(first).toMatchObject({ kind: "id" })
    await run.finished
    expect(registered).toEqual([`${(first as { id: string }).id} {"k":"static"}`])
    expect(run.later).toEqual([])
    expect(w.deploys[0]!.proxy.mounts).toHaveLength(1)
    expect(w.deploys[0]!.stops).toBe(1)
    expect(w.parts.running.size).toBe(0)
  })

  it("2.37: a Begun that declares dependencies is the run's error: a tool container declares none", async () => {
    const w = await open({ behaviour: () => ({ begun: `{"secrets":{},"dependencies":["db"]}` }) })
    const run = (await w.client()).run(request(img.digest), { images: held })
    expect(await run.first).toMatchObject({ kind: "error", message: expect.stringContaining("dependencies") })
    await run.finished
    expect(w.deploys[0]!.stops).toBe(1)
  })
})

describe("tools::run: registration and the feed", () => {
  it("2.38: the id is minted and the container entered among the running before registration", async () => {
    const w = await open({ behaviour: () => ({ begun: `{"secrets":{"k":"rotating"}}` }) })
    let runningAtRegistration: boolean | undefined
    const client = await w.client()
    const run = client.run(request(img.digest), {
      images: held,
      registration: (id) => {
        runningAtRegistration = w.parts.running.find("alice", id) !== undefined && w.parts.running.find("bob", id) === undefined
        return [tagged(Answer.registered)]
      }
    })
    const first = await run.first
    expect(runningAtRegistration).toBe(true)
    expect(first).toMatchObject({ kind: "id" })
  })

  it("2.39: a declaration that is not empty: exactly one registration channel with the id and the declaration verbatim", async () => {
    const declaration = `{ "token" : "rotating",\n "key":"static" }`
    const w = await open({ behaviour: () => ({ begun: `{"secrets":${declaration}}` }) })
    const registrations: Array<string> = []
    const run = (await w.client()).run(request(img.digest), {
      images: held,
      onServerChannel: (c) => {
        if (c.request[0] === ServerChannel.registration) registrations.push(c.request.subarray(1).toString("utf8"))
      }
    })
    const first = await run.first
    expect(first).toMatchObject({ kind: "id" })
    expect(registrations).toEqual([`{"id":${JSON.stringify((first as { id: string }).id)},"secrets":${declaration}}`])
  })

  it("2.40: a deploy in the answer is fed on exactly one secrets channel of the begin scope, verbatim; Fed lets the run go on", async () => {
    const fed = gate()
    const w = await open({ behaviour: () => ({ begun: `{"secrets":{"k":"static"}}`, feed: async () => (await fed.promise, [tagged(Answer.ok)]) }) })
    const values = `{"k" : "v\\u0041"}`
    const run = (await w.client()).run(request(img.digest), { images: held, registration: deploy(values) })
    const proxy = () => w.deploys[0]!.proxy
    await until(() => w.deploys.length === 1 && proxy().feeds.length === 1, "the feed")
    expect(proxy().feeds[0]!.request).toEqual(tagged(1, values))
    fed.open()
    expect(await run.first).toMatchObject({ kind: "id" })
    expect(proxy().feeds).toHaveLength(1)
  })

  it("2.41: an error or a bare finish on registration or the feed, or a client gone, is the run's error; the container is stopped", async () => {
    const cases: Array<[string, WorldOptions, (id: string, d: string) => ReadonlyArray<Uint8Array>]> = [
      ["registration error", {}, () => [tagged(Answer.error, "who are you")]],
      ["registration bare", {}, () => []],
      ["feed error", { behaviour: () => ({ begun: `{"secrets":{"k":"static"}}`, feed: () => [tagged(Answer.error, "bad value")] }) }, deploy(`{"k":"v"}`)],
      ["feed bare", { behaviour: () => ({ begun: `{"secrets":{"k":"static"}}`, feed: () => [] }) }, deploy(`{"k":"v"}`)]
    ]
    for (const [name, options, registration] of cases) {
      const w = await makeWorld({ behaviour: () => ({ begun: `{"secrets":{"k":"static"}}` }), ...options })
      try {
        const run = (await w.client()).run(request(img.digest), { images: held, registration })
        expect(await run.first, name).toMatchObject({ kind: "error" })
        await run.finished
        expect(w.deploys[0]!.stops, name).toBe(1)
        expect(w.parts.running.size).toBe(0)
      } finally {
        await w.close()
      }
    }
    // the client gone during registration
    const w = await open({ behaviour: () => ({ begun: `{"secrets":{"k":"static"}}` }) })
    const client = await w.client()
    const asked = gate()
    client.run(request(img.digest), { images: held, registration: () => (asked.open(), client.close(), []) })
    await asked.promise
    await until(() => w.deploys[0]!.stops === 1 && w.parts.running.size === 0 && w.parts.holds.isEmpty, "the container stopped")
  })

  it("2.42: an empty declaration: no registration channel, nothing fed", async () => {
    const w = await open({ behaviour: () => ({ begun: `{"secrets":{}}` }) })
    const channels: Array<number> = []
    const run = (await w.client()).run(request(img.digest), { images: held, onServerChannel: (c) => channels.push(c.request[0]!) })
    expect(await run.first).toMatchObject({ kind: "id" })
    expect(channels).not.toContain(ServerChannel.registration)
    expect(w.deploys[0]!.proxy.feeds).toHaveLength(0)
  })
})

describe("tools::run: the FUSE mounts", () => {
  it("2.43: one mount scope per mount, file mounts first, in the request's order, each answered before the next", async () => {
    const w = await open({ behaviour: () => ({ delay: () => new Promise((r) => setTimeout(r, Math.random() * 5)) }) })
    const run = (await w.client()).run(
      request(img.digest, {
        fuse_directory_mounts: [{ id: "d1", container_path: "/d1" }, { id: "d2", container_path: "/d2" }],
        fuse_file_mounts: [{ id: "f1", container_path: "/etc/f1" }, { id: "f2", container_path: "/f2" }]
      }),
      { images: held }
    )
    expect(await run.first).toMatchObject({ kind: "id" })
    const proxy = w.deploys[0]!.proxy
    expect(proxy.scopes.slice(1)).toEqual([
      { tag: ProxyScope.mount, body: `{"id":"f1","path":"/etc/f1","kind":"file"}` },
      { tag: ProxyScope.mount, body: `{"id":"f2","path":"/f2","kind":"file"}` },
      { tag: ProxyScope.mount, body: `{"id":"d1","path":"/d1","kind":"directory"}` },
      { tag: ProxyScope.mount, body: `{"id":"d2","path":"/d2","kind":"directory"}` }
    ])
    expect(proxy.mostMountsAtOnce).toBe(1)
  })

  it("2.44: a mount the proxy does not make is the run's error; the container is stopped; no later mount is asked", async () => {
    const w = await open({ behaviour: () => ({ mount: (r) => (r.id === "f1" ? tagged(Answer.error, "no fuse") : tagged(Answer.ok)) }) })
    const run = (await w.client()).run(request(img.digest, { fuse_file_mounts: [{ id: "f1", container_path: "/f1" }, { id: "f2", container_path: "/f2" }] }), { images: held })
    expect(await run.first).toMatchObject({ kind: "error", message: expect.stringContaining("no fuse") })
    await run.finished
    expect(w.deploys[0]!.proxy.scopes.map((s) => s.tag)).toEqual([ProxyScope.begin, ProxyScope.mount])
    expect(w.deploys[0]!.stops).toBe(1)
  })

  it("2.45: no response before the last mount is complete", async () => {
    const last = gate()
    const reached = gate()
    const w = await open({ behaviour: () => ({ mount: async (r) => (r.id === "d" ? (reached.open(), await last.promise) : undefined, tagged(Answer.ok)) }) })
    const run = (await w.client()).run(request(img.digest, { fuse_file_mounts: [{ id: "f", container_path: "/f" }], fuse_directory_mounts: [{ id: "d", container_path: "/d" }] }), { images: held })
    let answered = false
    void run.first.then(() => (answered = true))
    await reached.promise
    // the registration (empty here) is long done; the id waits for the mount
    await (await w.client()).version()
    expect(answered).toBe(false)
    last.open()
    expect(await run.first).toMatchObject({ kind: "id" })
  })

  it("2.46: mounts and registration go on beside each other; a failure is acted on only when both have ended", async () => {
    const mountGate = gate()
    const mountAsked = gate()
    const w = await open({
      behaviour: () => ({ begun: `{"secrets":{"k":"static"}}`, mount: async () => (mountAsked.open(), await mountGate.promise, tagged(Answer.ok)) })
    })
    let registrationWhileMounting = false
    const run = (await w.client()).run(request(img.digest, { fuse_file_mounts: [{ id: "f", container_path: "/f" }] }), {
      images: held,
      // the registration is asked while the mount waits, and fails at once
      registration: () => {
        registrationWhileMounting = true
        return [tagged(Answer.error, "refused")]
      }
    })
    await mountAsked.promise
    await until(() => registrationWhileMounting, "the registration beside the mount")
    let answered = false
    void run.first.then(() => (answered = true))
    await (await w.client()).version()
    expect(answered).toBe(false)
    expect(w.deploys[0]!.stops).toBe(0)
    mountGate.open()
    expect(await run.first).toMatchObject({ kind: "error", message: expect.stringContaining("refused") })
    await run.finished
    expect(w.deploys[0]!.stops).toBe(1)
  })

  it("2.47: a FUSE mount asked after the id on the fuse-mount channel is made, and is a mount of the container from then on", async () => {
    const w = await open()
    const run = (await w.client()).run(request(img.digest, { fuse_directory_mounts: [{ id: "d", container_path: "/d" }] }), { images: held })
    expect(await run.first).toMatchObject({ kind: "id" })
    const made = run.fuseMount("late", "/late", "file")
    expect(await made.responses.take()).toEqual(tagged(Answer.ok))
    expect(await made.responses.take()).toBeUndefined()
    expect(made.finished).toBe(true)
    const proxy = w.deploys[0]!.proxy
    expect(proxy.scopes.at(-1)).toEqual({ tag: ProxyScope.mount, body: `{"id":"late","path":"/late","kind":"file"}` })
    // a second mount at its path, inside it, or with its id, is refused on the channel
    for (const [id, path] of [["other", "/late"], ["other", "/late/x"], ["late", "/x"], ["x", "/d/inner"]] as const) {
      const refused = run.fuseMount(id, path, "directory")
      expect((await refused.responses.take())![0]).toBe(Answer.error)
    }
    expect(proxy.mounts.map((m) => m.request.id)).toEqual(["d", "late"])
  })
})

describe("tools::run: channels the client opened before the id", () => {
  it("2.48: held, then served after the id in the order opened; none read before the mounts and the feed are done", async () => {
    const fed = gate()
    const w = await open({
      behaviour: () => ({ begun: `{"secrets":{"k":"rotating"}}`, feed: async (r) => (r.toString().includes("first") ? await fed.promise : undefined, [tagged(Answer.ok)]) })
    })
    const run = (await w.client()).run(request(img.digest), { images: held, registration: deploy(`{"k":"first"}`) })
    await until(() => w.deploys.length === 1 && w.deploys[0]!.proxy.feeds.length === 1, "the first feed")
    // opened before the id: two secrets channels and a fuse-mount
    const a = run.secrets(`{"k":"second"}`)
    const m = run.fuseMount("late", "/late", "directory")
    const b = run.secrets(`{"k":"third"}`)
    await (await w.client()).version()
    const proxy = w.deploys[0]!.proxy
    expect(proxy.feeds).toHaveLength(1)
    expect(proxy.scopes).toHaveLength(1)
    fed.open()
    expect(await run.first).toMatchObject({ kind: "id" })
    expect(await a.responses.take()).toEqual(tagged(Answer.ok))
    expect(await m.responses.take()).toEqual(tagged(Answer.ok))
    expect(await b.responses.take()).toEqual(tagged(Answer.ok))
    expect(proxy.feeds.map((f) => f.request.toString("utf8", 1))).toEqual([`{"k":"first"}`, `{"k":"second"}`, `{"k":"third"}`])
    // a stop opened before the id ends the run only after it
    const w2 = await makeWorld({ behaviour: () => ({ begun: `{"secrets":{"k":"rotating"}}`, feed: async () => (await fed.promise, [tagged(Answer.ok)]) }) })
    try {
      const run2 = (await w2.client()).run(request(img.digest), { images: held, registration: () => [tagged(Answer.deploy, "{}")] })
      run2.stop()
      expect(await run2.first).toMatchObject({ kind: "id" })
      await run2.finished
      expect(w2.deploys[0]!.stops).toBe(1)
    } finally {
      await w2.close()
    }
  })
})
