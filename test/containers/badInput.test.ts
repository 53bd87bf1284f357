import fc from "fast-check"
import { WebSocket } from "ws"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import { ContainersClient, ToolRun } from "../../src/containers/Client.js"
import { FrameConnection } from "../../src/containers/FrameConnection.js"
import { encodeFrame, FrameType, tagged } from "../../src/containers/Frames.js"
import { Answer } from "../../src/containers/Wire.js"
import { images, makeImage, makeWorld, request, until, type World } from "./world.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 300_000 })

/**
 * Bad input, 10,000 cases: generated tools::run requests (with a model of how each must be
 * answered), the same mutated byte by byte, frame sequences mutated at the frame layer, and runs
 * of a real client one of whose frames (Auth, the request, an early channel, the stop) is
 * mutated on the wire. Each is answered as the seed says (a bare finish, one refusal, the error,
 * or an id and then the run), the server never crashes, and no hold, running container or
 * second id is left.
 */
const img = makeImage()
const held = images(img)
const refusedImage = makeImage("tests/refused", Buffer.from("refused")).digest

let world: World
let client: ContainersClient
beforeAll(async () => {
  // read_only volumes are not mounted here, so refusal 4 is reachable
  world = await makeWorld({ capabilities: { read_only: { mount: false } }, refuseImages: [refusedImage] })
  client = await world.client()
  await client.volumesCreate("p", "persistent")
  await client.volumesCreate("e", "ephemeral")
  await client.volumesCreate("r", "read_only")
  const bob = await world.client("bob")
  await bob.volumesCreate("b", "persistent")
})
afterAll(() => world.close())

const modes: Record<string, string> = { p: "persistent", e: "ephemeral", r: "read_only" }

/** a generated request: its JSON and what it must be answered with, from a model of its own */
interface Generated {
  readonly json: string
  readonly expected: "bare" | "error" | `refusal ${number}` | "id"
}

const path = fc.oneof(
  { weight: 20, arbitrary: fc.constantFrom("/a", "/b", "/a/b", "/c/d", "/x", "/y/z", "/etc/token", "/m", "/n", "/o/p", "/q") },
  { weight: 1, arbitrary: fc.constantFrom("/", "/a//b", "/a/", "/.", "/a/..", "/./b") },
  { weight: 1, arbitrary: fc.constantFrom("relative", "") }
)

const volumeMount = fc.record({
  volume_name: fc.oneof({ weight: 12, arbitrary: fc.constantFrom("p", "e", "p", "e", "r") }, { weight: 1, arbitrary: fc.constantFrom("b", "none") }),
  volume_relative_path: fc.oneof({ weight: 12, arbitrary: fc.constant("") }, { weight: 1, arbitrary: fc.constantFrom("../x", "sub/..") }),
  container_path: path,
  mode: fc.oneof({ weight: 12, arbitrary: fc.constantFrom("persistent", "persistent", "ephemeral", "read_only") }, { weight: 1, arbitrary: fc.constant("bogus") })
})
const fuseMount = fc.record({ id: fc.oneof({ weight: 12, arbitrary: fc.constantFrom("i", "j", "k", "l") }, { weight: 1, arbitrary: fc.constant("") }), container_path: path })

const generated: fc.Arbitrary<Generated> = fc
  .record({
    image: fc.oneof({ weight: 12, arbitrary: fc.constant(img.digest) }, { weight: 1, arbitrary: fc.constantFrom(refusedImage, "sha256:00", 7) }),
    template: fc.oneof({ weight: 12, arbitrary: fc.string() }, { weight: 1, arbitrary: fc.constant(3) }),
    memory: fc.oneof({ weight: 12, arbitrary: fc.integer({ min: 1, max: 1 << 30 }) }, { weight: 1, arbitrary: fc.constantFrom(0, -1, 1.5, "1") }),
    disk: fc.oneof({ weight: 12, arbitrary: fc.integer({ min: 1, max: 1 << 30 }) }, { weight: 1, arbitrary: fc.constantFrom(0, 2 ** 60) }),
    volume_mounts: fc.array(volumeMount, { maxLength: 2 }),
    fuse_file_mounts: fc.array(fuseMount, { maxLength: 1 }),
    fuse_directory_mounts: fc.array(fuseMount, { maxLength: 2 }),
    arguments: fc.jsonValue({ maxDepth: 2 }),
    extra: fc.oneof({ weight: 15, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom("secrets", "env", "image2") }),
    omit: fc.oneof({ weight: 15, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom("image", "template", "memory", "disk", "arguments", "volume_mounts") })
  })
  .map((r) => {
    const body: Record<string, unknown> = { ...r }
    delete body.extra
    delete body.omit
    if (r.extra !== null) body[r.extra] = "x"
    if (r.omit !== null) delete body[r.omit]
    return { json: JSON.stringify(body), expected: model(body) }
  })

/** how the seed and docs/containers.md answer a request, computed apart from the server's code */
const model = (b: Record<string, unknown>): Generated["expected"] => {
  const known = ["image", "template", "memory", "disk", "volume_mounts", "fuse_file_mounts", "fuse_directory_mounts", "arguments"]
  if (Object.keys(b).some((k) => !known.includes(k))) return "bare"
  const size = (v: unknown) => typeof v === "number" && Number.isSafeInteger(v) && v >= 1
  if (typeof b.image !== "string" || b.image.length !== 71 || typeof b.template !== "string" || !size(b.memory) || !size(b.disk)) return "bare"
  const vms = (b.volume_mounts ?? []) as Array<{ volume_name: string; volume_relative_path: string; container_path: string; mode: string }>
  const fms = [...((b.fuse_file_mounts ?? []) as Array<{ id: string; container_path: string }>), ...((b.fuse_directory_mounts ?? []) as Array<{ id: string; container_path: string }>)]
  const okRelative = (p: string) => p === "" || p.split("/").every((c) => c !== "" && c !== "." && c !== "..")
  if (vms.some((m) => !m.container_path.startsWith("/") || !okRelative(m.volume_relative_path) || !["persistent", "ephemeral", "read_only"].includes(m.mode))) return "bare"
  if (fms.some((m) => m.id === "" || !m.container_path.startsWith("/"))) return "bare"
  if (vms.some((m) => !(m.volume_name in modes))) return "error"
  const paths = [...vms, ...fms].map((m) => m.container_path)
  if (paths.includes("/")) return "error"
  if (new Set(paths).size !== paths.length) return "error"
  if (paths.some((p) => p.slice(1).split("/").some((c) => c === "" || c === "." || c === ".."))) return "error"
  if (paths.some((p) => paths.some((q) => p !== q && p.startsWith(q + "/")))) return "error"
  if (new Set(fms.map((m) => m.id)).size !== fms.length) return "error"
  if (b.image === refusedImage) return "error"
  const seen: Array<string> = []
  for (const m of vms) {
    if (seen.includes(m.volume_name)) continue
    seen.push(m.volume_name)
    const mode = modes[m.volume_name]!
    if (vms.some((n) => n.volume_name === m.volume_name && n.mode !== mode)) return "refusal 5"
    if (mode === "read_only") return "refusal 4"
  }
  return "id"
}

/** sends PAYLOAD as a tools::run and checks the answer's shape; an id is stopped */
const answerOf = async (payload: Buffer): Promise<string> => {
  const run = new ToolRun(client.connection.openScope(payload), { images: held })
  const first = await run.first
  if (first.kind === "id") {
    run.stop()
    await run.finished
    expect(run.later.filter((p) => p[0] === Answer.id)).toEqual([])
    return "id"
  }
  await run.finished
  expect(run.later).toEqual([])
  if (first.kind === "refusal") return `refusal ${first.byte}`
  expect(first.kind).not.toBe("other")
  return first.kind
}

const mutate = (bytes: Buffer, cuts: ReadonlyArray<[number, number, number]>): Buffer => {
  const out = Buffer.from(bytes)
  let result = out
  for (const [kind, at, value] of cuts) {
    const i = result.length === 0 ? 0 : at % result.length
    if (kind === 0) result[i] = value
    else if (kind === 1) result = result.subarray(0, i)
    else result = Buffer.concat([result.subarray(0, i), Buffer.from([value]), result.subarray(i)])
  }
  return result
}
const cuts = fc.array(fc.tuple(fc.integer({ min: 0, max: 2 }), fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 3 })

const checkNothingLeft = async () => {
  await until(() => world.server.runs.size === 0, "every run ended")
  expect(world.parts.holds.isEmpty).toBe(true)
  expect(world.parts.running.size).toBe(0)
  expect((await client.version()).version).toMatch(/ocx2-containers/)
}

describe("bad input (fast-check)", () => {
  it("3,500 generated requests, each answered as the model says", async () => {
    const kinds = new Map<string, number>()
    await fc.assert(
      fc.asyncProperty(generated, async (g) => {
        expect(await answerOf(tagged(1, g.json)), g.json).toBe(g.expected)
        kinds.set(g.expected, (kinds.get(g.expected) ?? 0) + 1)
      }),
      { numRuns: 3500 }
    )
    // every kind of answer was reached, each more than ten times
    for (const kind of ["bare", "error", "refusal 4", "refusal 5", "id"]) expect(kinds.get(kind) ?? 0, kind).toBeGreaterThan(10)
    await checkNothingLeft()
  }, 600_000)

  it("3,500 mutated requests: a bare finish, one refusal, the error, or an id, and nothing left behind", async () => {
    await fc.assert(
      fc.asyncProperty(generated, cuts, async (g, c) => {
        const answer = await answerOf(mutate(tagged(1, g.json), c))
        expect(["bare", "error", "refusal 1", "refusal 2", "refusal 3", "refusal 4", "refusal 5", "id"]).toContain(answer)
      }),
      { numRuns: 3500 }
    )
    await checkNothingLeft()
  }, 600_000)

  it("2,500 mutated frame sequences: the server closes with 1002 or answers, and never crashes or leaks", async () => {
    const token = world.token("alice")
    const good = [
      encodeFrame(FrameType.Auth, 0, 0, Buffer.from(token)),
      encodeFrame(FrameType.Request, 1, 0, tagged(1, JSON.stringify({ image: img.digest, template: "t", memory: 1, disk: 1, fuse_file_mounts: [{ id: "f", container_path: "/f" }] }))),
      encodeFrame(FrameType.ChannelRequest, 1, 1, tagged(1, `{"a":"b"}`)),
      encodeFrame(FrameType.ChannelRequest, 1, 2, tagged(2, `{"id":"g","container_path":"/g","kind":"file"}`)),
      encodeFrame(FrameType.Request, 2, 0, tagged(3, "{}")),
      encodeFrame(FrameType.ChannelResponse, 1, 1, tagged(0, "tests/tool")),
      encodeFrame(FrameType.ChannelRequest, 1, 3, tagged(0))
    ]
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: good.length - 1 }), cuts, fc.boolean(), async (which, c, textual) => {
        const socket = new WebSocket(world.url, { perMessageDeflate: false })
        await new Promise<void>((resolve, reject) => (socket.once("open", () => resolve()), socket.once("error", reject)))
        let closeCode: number | undefined
        const closed = new Promise<void>((resolve) => socket.once("close", (code) => ((closeCode = code), resolve())))
        // what the server sends for the run's scope: never a second id, nothing after its finish
        let ids = 0
        let finished = false
        let afterFinish = 0
        socket.on("message", (m: Buffer) => {
          if (m.length < 9 || m.readUInt32BE(1) !== 1 || m[0] === FrameType.ChannelRequest) return
          if ((m[0] === FrameType.Response || m[0] === FrameType.ResponseFinish) && finished) afterFinish++
          if (m[0] === FrameType.Response && m[9] === Answer.id) ids++
          if (m[0] === FrameType.ResponseFinish) finished = true
        })
        const frames = good.map((f, i) => (i === which ? mutate(f, c) : f))
        for (const f of frames) socket.send(f, { binary: !(textual && f === frames[which]) })
        // the server answers the whole sequence or closes: a version request shows which
        socket.send(encodeFrame(FrameType.Request, 1000, 0, tagged(14, "{}")))
        await Promise.race([closed, new Promise<void>((resolve) => socket.on("message", (m: Buffer) => m[0] === FrameType.ResponseFinish && m.readUInt32BE(1) === 1000 && resolve()))])
        if (closeCode !== undefined) expect([1002, 1003, 1007, 4401, 1006, 1005]).toContain(closeCode)
        expect(ids, "ids sent on the run's scope").toBeLessThanOrEqual(1)
        expect(afterFinish, "responses after the run's finish").toBe(0)
        socket.terminate()
        await closed
      }),
      { numRuns: 2500 }
    )
    await checkNothingLeft()
  }, 600_000)

  it("500 runs of a real client, one of its frames mutated on the way: closed, answered or run, never a second id, nothing left", async () => {
    const token = world.token("alice")
    const body = JSON.stringify(request(img.digest, { fuse_file_mounts: [{ id: "f", container_path: "/f" }] }))
    const outcomes = new Map<string, number>()
    await fc.assert(
      fc.asyncProperty(fc.constantFrom("auth", "request", "secrets", "fuse-mount", "stop"), cuts, async (which, c) => {
        const socket = new WebSocket(world.url, { perMessageDeflate: false })
        await new Promise<void>((resolve, reject) => (socket.once("open", () => resolve()), socket.once("error", reject)))
        const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()))
        // the client's frames as FrameConnection sends them; the chosen one is mutated on the wire
        const send = socket.send.bind(socket) as (data: Buffer, options: object) => void
        let mutateNext = false
        ;(socket as unknown as { send: typeof send }).send = (data, options) => {
          send(mutateNext ? mutate(data, c) : data, options)
          mutateNext = false
        }
        const connection = new FrameConnection(socket, { role: "opener" })
        mutateNext = which === "auth"
        connection.sendAuth(Buffer.from(token))
        mutateNext = which === "request"
        const run = new ToolRun(connection.openScope(tagged(1, body)), { images: held })
        // channels opened before the id: held, then served after it
        mutateNext = which === "secrets"
        run.secrets(`{"a":"b"}`)
        mutateNext = which === "fuse-mount"
        run.fuseMount("g", "/g", "file")
        const first = await run.first
        outcomes.set(`${which} ${first.kind}`, (outcomes.get(`${which} ${first.kind}`) ?? 0) + 1)
        if (first.kind === "id") {
          mutateNext = which === "stop"
          run.stop()
          // a stop mutated into something else leaves the run going: the server has read what came
          // before a version request once it answers it, and the client's end then ends the run
          await Promise.race([closed, new ContainersClient(connection).call(14, "{}")])
        }
        expect(first.kind).not.toBe("other")
        expect(run.later.filter((p) => p[0] === Answer.id), "a second id").toEqual([])
        if (first.kind !== "id") expect(run.later, "nothing after the first answer of a run that did not start").toEqual([])
        socket.terminate()
        await closed
      }),
      { numRuns: 500 }
    )
    // every kind of frame was mutated into runs that still started, and into ones that did not
    for (const which of ["auth", "request", "secrets", "fuse-mount", "stop"]) {
      expect([...outcomes].filter(([k]) => k.startsWith(which)).reduce((n, [, v]) => n + v, 0), which).toBeGreaterThan(20)
    }
    expect([...outcomes].filter(([k]) => k.endsWith(" id")).reduce((n, [, v]) => n + v, 0)).toBeGreaterThan(100)
    await checkNothingLeft()
  }, 600_000)
})
