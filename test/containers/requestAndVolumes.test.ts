import { describe, expect, it, vi } from "vitest"
import type { PeerChannel } from "../../src/containers/FrameConnection.js"
import { tagged } from "../../src/containers/Frames.js"
import { Answer, Endpoint, ServerChannel } from "../../src/containers/Wire.js"
import { gate, images, makeImage, makeWorld, request, until, type World, worldPerCase } from "./world.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 300_000 })

/**
 * containers-notes section 2, obligations 1 to 26: the request, the refusals, the volume
 * decisions and holds, and obtaining the image. The real WebSocket server and client, the
 * in-process proxy behind the test deployer.
 */
const open = worldPerCase()

const img = makeImage()
const held = images(img)

/** a raw request on a scope: every response and whether a finish ended it */
const raw = async (w: World, payload: Buffer) => {
  const client = await w.client()
  const scope = client.connection.openScope(payload)
  const responses: Array<Buffer> = []
  for (;;) {
    const p = await scope.responses.take()
    if (p === undefined) break
    responses.push(p)
  }
  return { responses, finished: scope.isEnded && !client.connection.isClosed }
}

const volumes = async (w: World, identity: string, list: ReadonlyArray<[string, string]>) => {
  const client = await w.client(identity)
  for (const [name, mode] of list) await client.volumesCreate(name, mode)
  return client
}

const mount = (volume_name: string, container_path: string, mode: string, volume_relative_path = "") => ({
  volume_name,
  volume_relative_path,
  container_path,
  mode
})

const refused = async (w: World, more: Record<string, unknown>, identity = "alice") => {
  const client = await w.client(identity)
  const before = w.parts.holds.snapshot()
  const deployed = w.deploys.length
  const channels: Array<number> = []
  const run = client.run(request(img.digest, more), { images: held, onServerChannel: (c) => channels.push(c.request[0]!) })
  const first = await run.first
  await run.finished
  expect(run.later).toEqual([])
  expect(channels).toEqual([])
  expect(w.deploys).toHaveLength(deployed)
  expect(w.parts.holds.snapshot()).toBe(before)
  return first
}

describe("tools::run: the request and its refusals", () => {
  it("2.1: a scope opened with the tag byte 1 and the request as JSON runs the container", async () => {
    const w = await open()
    const run = (await w.client()).run(request(img.digest), { images: held })
    expect(await run.first).toMatchObject({ kind: "id" })
    expect(w.deploys).toHaveLength(1)
    expect((await raw(w, tagged(2, JSON.stringify(request(img.digest))))).responses).toEqual([])
  })

  it("2.2: a payload that does not decode is answered by a bare finish", async () => {
    const w = await open()
    const bad = [
      tagged(1, "not json"),
      tagged(1, "[]"),
      tagged(1, Buffer.from([0xff, 0xfe])),
      tagged(1),
      Buffer.alloc(0),
      tagged(1, JSON.stringify({ ...request(img.digest), secrets: { a: "b" } })),
      tagged(1, JSON.stringify({ ...request(img.digest), image: "sha256:abc" })),
      tagged(1, JSON.stringify({ ...request(img.digest), memory: 0 })),
      tagged(1, JSON.stringify({ ...request(img.digest), disk: 1.5 })),
      tagged(1, JSON.stringify({ template: "t", memory: 1, disk: 1 })),
      tagged(1, JSON.stringify(request(img.digest, { volume_mounts: [{ volume_name: "v", container_path: "relative", mode: "persistent" }] }))),
      tagged(1, JSON.stringify(request(img.digest, { volume_mounts: [mount("v", "/v", "persistent", "../up")] }))),
      tagged(1, JSON.stringify(request(img.digest, { fuse_file_mounts: [{ id: "", container_path: "/f" }] })))
    ]
    for (const payload of bad) {
      const answer = await raw(w, payload)
      expect(answer, payload.toString("utf8")).toEqual({ responses: [], finished: true })
    }
    expect(w.deploys).toHaveLength(0)
    expect(w.parts.holds.isEmpty).toBe(true)
  })

  it("2.3: a refused request gets exactly one response, the error, and the finish", async () => {
    const w = await open()
    const answer = await raw(w, tagged(1, JSON.stringify(request(img.digest, { volume_mounts: [mount("missing", "/m", "persistent")] }))))
    expect(answer.finished).toBe(true)
    expect(answer.responses).toHaveLength(1)
    expect(answer.responses[0]![0]).toBe(Answer.error)
  })


  it("2.4: a volume not in the client's volumes::list is refused (another identity's volume too)", async () => {
    const w = await open()
    await volumes(w, "bob", [["bobs", "persistent"]])
    expect(await refused(w, { volume_mounts: [mount("bobs", "/b", "persistent")] })).toMatchObject({ kind: "error", message: expect.stringContaining("volumes::list") })
    expect(await refused(w, { volume_mounts: [mount("nothing", "/b", "persistent")] })).toMatchObject({ kind: "error" })
  })

  it("2.5: a mount at the root of the container is refused", async () => {
    const w = await open()
    await volumes(w, "alice", [["v", "persistent"]])
    expect(await refused(w, { volume_mounts: [mount("v", "/", "persistent")] })).toMatchObject({ kind: "error", message: expect.stringContaining("root") })
    expect(await refused(w, { fuse_directory_mounts: [{ id: "d", container_path: "/" }] })).toMatchObject({ kind: "error", message: expect.stringContaining("root") })
  })

  it("2.6: two mounts at one path are refused, whatever their kinds", async () => {
    const w = await open()
    await volumes(w, "alice", [["v", "persistent"]])
    expect(await refused(w, { volume_mounts: [mount("v", "/a", "persistent"), mount("v", "/a", "persistent", "x")] })).toMatchObject({ kind: "error", message: expect.stringContaining("two mounts") })
    expect(await refused(w, { volume_mounts: [mount("v", "/a", "persistent")], fuse_file_mounts: [{ id: "f", container_path: "/a" }] })).toMatchObject({ kind: "error", message: expect.stringContaining("two mounts") })
  })

  it("2.7: a mount inside another mount is refused", async () => {
    const w = await open()
    await volumes(w, "alice", [["v", "persistent"]])
    expect(await refused(w, { volume_mounts: [mount("v", "/a/b", "persistent"), mount("v", "/a", "persistent", "x")] })).toMatchObject({ kind: "error", message: expect.stringContaining("inside") })
    expect(await refused(w, { fuse_file_mounts: [{ id: "f", container_path: "/d/f" }], fuse_directory_mounts: [{ id: "d", container_path: "/d" }] })).toMatchObject({ kind: "error", message: expect.stringContaining("inside") })
    // a sibling whose name starts like the other is not inside it
    const run = (await w.client()).run(request(img.digest, { fuse_directory_mounts: [{ id: "a", container_path: "/ab" }, { id: "b", container_path: "/a" }] }), { images: held })
    expect(await run.first).toMatchObject({ kind: "id" })
  })

  it("2.8: a mount path with a component that is empty, . or .. is refused", async () => {
    const w = await open()
    for (const path of ["/a//b", "/a/", "/a/./b", "/a/../b", "/.", "/.."]) {
      expect(await refused(w, { fuse_directory_mounts: [{ id: "d", container_path: path }] }), path).toMatchObject({ kind: "error", message: expect.stringContaining("component") })
    }
  })

  it("2.9: two FUSE mounts with one id are refused (file and directory lists together)", async () => {
    const w = await open()
    expect(await refused(w, { fuse_file_mounts: [{ id: "x", container_path: "/f" }], fuse_directory_mounts: [{ id: "x", container_path: "/d" }] })).toMatchObject({ kind: "error", message: expect.stringContaining("id") })
  })

  it("2.10: an image the server will not supply is refused before anything is held", async () => {
    const w = await open({ refuseImages: [img.digest] })
    await volumes(w, "alice", [["v", "persistent"]])
    expect(await refused(w, { volume_mounts: [mount("v", "/v", "persistent")] })).toMatchObject({ kind: "error", message: expect.stringContaining("will not supply") })
  })
})

describe("tools::run: the volume decisions and holds", () => {
  it("2.11: each distinct volume in first-named order, the first rule deciding: 5, 4, 1, 2, 3", async () => {
    const w = await open({ capabilities: { read_only: { mount: false }, ephemeral: { mount_many: false } } })
    await volumes(w, "alice", [["p", "persistent"], ["r", "read_only"], ["e", "ephemeral"]])
    // 5: the name and the mode the volume is in
    expect(await refused(w, { volume_mounts: [mount("p", "/p", "ephemeral")] })).toEqual({ kind: "refusal", byte: 5, name: "p", mode: "persistent" })
    // first named decides: r (not mounted) before p (wrong mode)
    expect(await refused(w, { volume_mounts: [mount("r", "/r", "read_only"), mount("p", "/p", "ephemeral")] })).toEqual({ kind: "refusal", byte: 4, name: "r" })
    // within one volume the mode rule comes before the others
    expect(await refused(w, { volume_mounts: [mount("r", "/r", "persistent")] })).toEqual({ kind: "refusal", byte: 5, name: "r", mode: "read_only" })
    // 1: busy
    const client = await w.client()
    const writing = gate()
    const write = client.volumesWrite("p", "f", Buffer.from("x"), writing.promise)
    await until(() => w.parts.holds.describe("alice", "p").busy === 1, "the write in flight")
    expect(await refused(w, { volume_mounts: [mount("p", "/p", "persistent"), mount("e", "/e", "ephemeral")] })).toEqual({ kind: "refusal", byte: 1, name: "p" })
    writing.open()
    await write
    // 2: held by a running container, and ephemeral does not mount many here
    const first = client.run(request(img.digest, { volume_mounts: [mount("e", "/e", "ephemeral")] }), { images: held })
    expect(await first.first).toMatchObject({ kind: "id" })
    const second = client.run(request(img.digest, { volume_mounts: [mount("p", "/p", "persistent"), mount("e", "/e", "ephemeral")] }), { images: held })
    expect(await second.first).toEqual({ kind: "refusal", byte: 2, name: "e" })
    await second.finished
    expect(w.parts.holds.describe("alice", "p").runs).toBe(0)
  })

  it("2.11e, 2.16: a volume a FUSE serve holds, where its mode does not mount beside one, is refused with 3", async () => {
    const w = await open()
    await volumes(w, "alice", [["p", "persistent"], ["r", "read_only"]])
    const release = w.parts.holds.holdForFuseServe("alice", "p", "persistent")!
    expect(await refused(w, { volume_mounts: [mount("p", "/p", "persistent")] })).toEqual({ kind: "refusal", byte: 3, name: "p" })
    // read_only mounts beside a FUSE serve
    const r = w.parts.holds.holdForFuseServe("alice", "r", "read_only")!
    const run = (await w.client()).run(request(img.digest, { volume_mounts: [mount("r", "/r", "read_only")] }), { images: held })
    expect(await run.first).toMatchObject({ kind: "id" })
    // and a persistent volume a running container holds is never FUSE-served beside it; one FUSE serve at a time
    release()
    r()
    const p = (await w.client()).run(request(img.digest, { volume_mounts: [mount("p", "/p", "persistent")] }), { images: held })
    expect(await p.first).toMatchObject({ kind: "id" })
    expect(w.parts.holds.holdForFuseServe("alice", "p", "persistent")).toBeUndefined()
    p.stop()
    await p.finished
    const one = w.parts.holds.holdForFuseServe("alice", "p", "persistent")!
    expect(w.parts.holds.holdForFuseServe("alice", "p", "persistent")).toBeUndefined()
    one()
  })

  it("2.12: a volume refusal gives back every hold; nothing is fetched or deployed", async () => {
    const w = await open({ capabilities: { persistent: { mount_many: false } } })
    await volumes(w, "alice", [["a", "ephemeral"], ["p", "persistent"]])
    const client = await w.client()
    const holder = client.run(request(img.digest, { volume_mounts: [mount("p", "/p", "persistent")] }), { images: held })
    expect(await holder.first).toMatchObject({ kind: "id" })
    const channels: Array<number> = []
    const run = client.run(request(img.digest, { volume_mounts: [mount("a", "/a", "ephemeral"), mount("p", "/p", "persistent")] }), {
      images: held,
      onServerChannel: (c) => channels.push(c.request[0]!)
    })
    expect(await run.first).toEqual({ kind: "refusal", byte: 2, name: "p" })
    await run.finished
    expect(channels).toEqual([])
    expect(w.deploys).toHaveLength(1)
    expect(w.parts.holds.describe("alice", "a")).toEqual({ runs: 0, fuseServes: 0, busy: 0 })
    expect(w.parts.holds.describe("alice", "p").runs).toBe(1)
  })

  it("2.13: one volume named more than once, at different paths, is not refused", async () => {
    const w = await open()
    const client = await volumes(w, "alice", [["v", "persistent"]])
    await client.volumesWrite("v", "x", Buffer.from(""))
    const run = client.run(request(img.digest, { volume_mounts: [mount("v", "/one", "persistent"), mount("v", "/two", "persistent", "x")] }), { images: held })
    expect(await run.first).toMatchObject({ kind: "id" })
    expect(w.deploys[0]!.spec.mounts.map((m) => m.containerPath)).toEqual(["/one", "/two"])
    expect(w.parts.holds.describe("alice", "v").runs).toBe(1)
  })

  it("2.14: ephemeral and read_only volumes mount in many containers of the client at once", async () => {
    const w = await open()
    const client = await volumes(w, "alice", [["e", "ephemeral"], ["r", "read_only"]])
    const runs = [1, 2, 3].map(() => client.run(request(img.digest, { volume_mounts: [mount("e", "/e", "ephemeral"), mount("r", "/r", "read_only")] }), { images: held }))
    for (const run of runs) expect(await run.first).toMatchObject({ kind: "id" })
    expect(w.parts.holds.describe("alice", "e").runs).toBe(3)
    expect(w.deploys[0]!.spec.mounts.map((m) => m.readOnly)).toEqual([false, true])
  })

  it("2.15: a persistent volume mounts in many containers at several paths, as far as mount_many allows", async () => {
    const w = await open()
    const client = await volumes(w, "alice", [["p", "persistent"]])
    const runs = [1, 2].map(() => client.run(request(img.digest, { volume_mounts: [mount("p", "/a", "persistent"), mount("p", "/b", "persistent")] }), { images: held }))
    for (const run of runs) expect(await run.first).toMatchObject({ kind: "id" })
    const narrow = await makeWorld({ capabilities: { persistent: { mount_many: false } } })
    try {
      const c = await volumes(narrow, "alice", [["p", "persistent"]])
      const one = c.run(request(img.digest, { volume_mounts: [mount("p", "/a", "persistent"), mount("p", "/b", "persistent")] }), { images: held })
      expect(await one.first).toMatchObject({ kind: "id" })
      expect(await c.run(request(img.digest, { volume_mounts: [mount("p", "/a", "persistent")] }), { images: held }).first).toEqual({ kind: "refusal", byte: 2, name: "p" })
      expect((await c.version()).capabilities).toMatchObject({ persistent: { mount: true, mount_many: false, mount_and_fuse_serve: false } })
    } finally {
      await narrow.close()
    }
  })

  it("2.17: every volume a request names is held, shared, from acceptance until the run ends", async () => {
    const w = await open()
    const client = await volumes(w, "alice", [["p", "persistent"], ["e", "ephemeral"]])
    const obtaining = gate()
    const run = client.run(request(img.digest, { volume_mounts: [mount("p", "/p", "persistent"), mount("e", "/e", "ephemeral")] }), {
      images: held,
      onServerChannel: (c) => {
        if (c.request[0] === ServerChannel.ociHas) obtaining.open()
      }
    })
    await obtaining.promise
    // accepted and fetching: already held
    expect(w.parts.holds.describe("alice", "p").runs).toBe(1)
    expect(await run.first).toMatchObject({ kind: "id" })
    const other = client.run(request(img.digest, { volume_mounts: [mount("p", "/p", "persistent")] }), { images: held })
    expect(await other.first).toMatchObject({ kind: "id" })
    expect(w.parts.holds.describe("alice", "p").runs).toBe(2)
    run.stop()
    await run.finished
    expect(w.parts.holds.describe("alice", "p").runs).toBe(1)
    expect(w.parts.holds.describe("alice", "e").runs).toBe(0)
  })

  it("2.18: while a run holds a volume, stat, read, write, filetree, edit and delete of it are refused", async () => {
    const w = await open()
    const client = await volumes(w, "alice", [["p", "persistent"]])
    await client.volumesWrite("p", "f", Buffer.from("hello"))
    const run = client.run(request(img.digest, { volume_mounts: [mount("p", "/p", "persistent")] }), { images: held })
    expect(await run.first).toMatchObject({ kind: "id" })
    const ops: Array<[number, object]> = [
      [Endpoint.volumesStat, { volume: "p", path: "f" }],
      [Endpoint.volumesRead, { volume: "p", path: "f" }],
      [Endpoint.volumesWrite, { volume: "p", path: "g" }],
      [Endpoint.volumesFiletree, { volume: "p" }],
      [Endpoint.volumesEdit, { volume: "p", path: "f", old: "hello", new: "bye" }],
      [Endpoint.volumesDelete, { volume: "p" }]
    ]
    for (const [tag, body] of ops) {
      const answer = await client.operation(tag, body)
      expect(answer.responses.map((r) => r.toString("utf8", 1)), String(tag)).toEqual([expect.stringContaining("held by a running container")])
      expect(answer.responses[0]![0]).toBe(Answer.error)
    }
    run.stop()
    await run.finished
    for (const [tag, body] of ops.slice(0, 2)) expect((await client.operation(tag, body)).responses[0]![0]).toBe(Answer.ok)
    expect((await client.volumesRead("p", "f")).toString()).toBe("hello")
  })

  it("2.19: a run naming a volume under one of the six operations is refused with 1 while it is in flight", async () => {
    const w = await open()
    const client = await volumes(w, "alice", [["p", "persistent"]])
    const writing = gate()
    const write = client.volumesWrite("p", "f", Buffer.from("x"), writing.promise)
    await until(() => w.parts.holds.describe("alice", "p").busy === 1, "the write in flight")
    expect(await client.run(request(img.digest, { volume_mounts: [mount("p", "/p", "persistent")] }), { images: held }).first).toEqual({ kind: "refusal", byte: 1, name: "p" })
    writing.open()
    await write
    expect(await client.run(request(img.digest, { volume_mounts: [mount("p", "/p", "persistent")] }), { images: held }).first).toMatchObject({ kind: "id" })
  })

  it("2.20: every hold is given back when the run ends: stop, proxy gone, client gone, the run's error", async () => {
    const w = await open({ fail: (spec) => (spec.memory === 7 ? "no room" : undefined) })
    await volumes(w, "alice", [["p", "persistent"]])
    const named = { volume_mounts: [mount("p", "/p", "persistent")] }
    const heldNow = () => w.parts.holds.describe("alice", "p").runs
    // stop
    let client = await w.client()
    let run = client.run(request(img.digest, named), { images: held })
    expect(await run.first).toMatchObject({ kind: "id" })
    expect(heldNow()).toBe(1)
    run.stop()
    await run.finished
    expect(heldNow()).toBe(0)
    // the proxy's connection ends
    run = client.run(request(img.digest, named), { images: held })
    expect(await run.first).toMatchObject({ kind: "id" })
    w.deploys.at(-1)!.proxy.drop()
    await run.finished
    expect(heldNow()).toBe(0)
    // the client's connection ends
    run = client.run(request(img.digest, named), { images: held })
    expect(await run.first).toMatchObject({ kind: "id" })
    client.close()
    await until(() => heldNow() === 0 && w.deploys.at(-1)!.stops === 1, "the hold given back")
    // the run's error
    client = await w.client()
    run = client.run(request(img.digest, { ...named, memory: 7 }), { images: held })
    expect(await run.first).toEqual({ kind: "error", message: "the deploy did not complete: no room" })
    expect(heldNow()).toBe(0)
    expect(w.parts.holds.isEmpty).toBe(true)
  })
})

describe("tools::run: obtaining the image", () => {
  const watch = (into: Array<string>) => (c: PeerChannel) => into.push(`${c.request[0]}:${c.request.subarray(1).toString("utf8")}`)

  it("2.21: an image the identity obtained is held for it, and for no other identity", async () => {
    const w = await open()
    const seen: Array<string> = []
    const alice = await w.client("alice")
    expect(await alice.run(request(img.digest), { images: held, onServerChannel: watch(seen) }).first).toMatchObject({ kind: "id" })
    const fetched = seen.length
    expect(fetched).toBe(4) // has, manifest, config, layer
    expect(await alice.run(request(img.digest), { images: held, onServerChannel: watch(seen) }).first).toMatchObject({ kind: "id" })
    expect(seen.length).toBe(fetched)
    // bob does not get alice's image: the server asks bob's client, which does not hold it
    const bob = await w.client("bob")
    expect(await bob.run(request(img.digest), { onServerChannel: watch(seen) }).first).toMatchObject({ kind: "error", message: expect.stringContaining("no source") })
    expect(seen.at(-1)).toBe(`${ServerChannel.ociHas}:{"digest":"${img.digest}"}`)
  })

  it("2.22, 2.23: oci-has, then oci-manifest and oci-blob under the repository path the client answered", async () => {
    const w = await open()
    const seen: Array<string> = []
    const run = (await w.client()).run(request(img.digest), { images: held, onServerChannel: watch(seen) })
    expect(await run.first).toMatchObject({ kind: "id" })
    const [config, layer] = [...img.image.blobs.keys()]
    expect(seen).toEqual([
      `${ServerChannel.ociHas}:{"digest":"${img.digest}"}`,
      `${ServerChannel.ociManifest}:{"repository":"tests/tool","digest":"${img.digest}"}`,
      `${ServerChannel.ociBlob}:{"repository":"tests/tool","digest":"${config}"}`,
      `${ServerChannel.ociBlob}:{"repository":"tests/tool","digest":"${layer}"}`
    ])
    expect(w.deploys[0]!.spec.image.digest).toBe(img.digest)
  })

  it("2.24: bytes that are not those the digest names are the run's error (manifest, config, layer)", async () => {
    const w = await open()
    const client = await w.client()
    const tamper = (which: "manifest" | "config" | "layer" | "longer") => {
      const blobs = new Map(img.image.blobs)
      const [config, layer] = [...blobs.keys()]
      if (which === "config") blobs.set(config!, Buffer.from("another config"))
      if (which === "layer") blobs.set(layer!, Buffer.from("a layeR"))
      if (which === "longer") blobs.set(layer!, Buffer.from("a layer!"))
      const manifest = which === "manifest" ? Buffer.concat([img.image.manifest, Buffer.from(" ")]) : img.image.manifest
      return new Map([[img.digest, { ...img.image, manifest, blobs }]])
    }
    for (const which of ["manifest", "config", "layer", "longer"] as const) {
      const run = client.run(request(img.digest), { images: tamper(which) })
      expect(await run.first, which).toMatchObject({ kind: "error" })
      await run.finished
    }
    expect(w.deploys).toHaveLength(0)
  })

  it("2.25: an image obtained from nowhere is the run's error", async () => {
    const w = await open()
    const run = (await w.client()).run(request(img.digest), {})
    expect(await run.first).toMatchObject({ kind: "error", message: expect.stringContaining("no source") })
    expect(w.deploys).toHaveLength(0)
  })

  it("2.26: how the client streams is its own: a blob in many small responses is the same blob", async () => {
    const big = makeImage("tests/big", Buffer.alloc(700_000, 7))
    const w = await open()
    const run = (await w.client()).run(request(big.digest), { images: images(big) })
    expect(await run.first).toMatchObject({ kind: "id" })
    const layer = w.deploys[0]!.spec.image.layers[0]!
    expect(layer.size).toBe(700_000)
  })
})
