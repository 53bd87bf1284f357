import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import type { ToolRun } from "../../src/containers/Client.js"
import type { PeerChannel } from "../../src/containers/FrameConnection.js"
import { tagged } from "../../src/containers/Frames.js"
import type { ProxyBehaviour } from "../../src/containers/InProcessProxy.js"
import type { ContainerRun } from "../../src/containers/ContainerRun.js"
import { Answer, ProxyScope } from "../../src/containers/Wire.js"
import { images, makeImage, makeWorld, request, type World } from "./world.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 300_000 })

/**
 * The orderings of tools::run under randomized delays: every answer of the proxy and of the
 * client waits a random while (0 to 3 ms, or a turn of the event loop), 200 schedules each.
 * What must hold is checked at the moment it matters, on every schedule.
 */
const schedules = 200
const img = makeImage()
const held = images(img)

/** a small seeded generator: a failing schedule is repeated by its seed */
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
const delayer = (next: () => number) => () =>
  new Promise<void>((resolve) => {
    const r = next()
    if (r < 0.3) return resolve()
    if (r < 0.6) return void setImmediate(resolve)
    setTimeout(resolve, Math.floor(r * 4))
  })

/** the behaviour of each deploy, set per schedule */
let behaviour: ProxyBehaviour = {}
let world: World
beforeAll(async () => {
  world = await makeWorld({ behaviour: () => behaviour })
})
afterAll(() => world.close())

/**
 * Every schedule within a generous bound: nothing here is timed, so a schedule that does not
 * finish waits for something that never comes. It fails its test naming the test, the seed,
 * the step it waited in and the state of every run the server still has, instead of stalling
 * the whole suite. A schedule that fails (by its bound or an expectation) stops its run, so
 * nothing of it is left running into the next schedule or test.
 */
const scheduleBoundMs = Number(process.env.OCX2_SCHEDULE_BOUND_MS ?? 60_000)
interface Schedule {
  /** where the schedule is: named when it does not finish */
  readonly at: (step: string) => void
  /** the schedule's run, stopped if the schedule fails */
  readonly owns: (run: ToolRun) => void
}
const schedule = async (test: string, seed: number, body: (s: Schedule) => Promise<void>): Promise<void> => {
  let step = "starting"
  let run: ToolRun | undefined
  let timer: ReturnType<typeof setTimeout> | undefined
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${test}: seed ${seed} did not finish within ${scheduleBoundMs} ms, waiting for ${step}; ${stateOfWorld()}`)),
      scheduleBoundMs
    )
  })
  try {
    await Promise.race([body({ at: (s) => (step = s), owns: (r) => (run = r) }), bound])
  } catch (e) {
    run?.stop()
    throw e
  } finally {
    clearTimeout(timer)
  }
}
const stateOfWorld = (): string => {
  const runs = [...world.server.runs].map((r) => r.describe())
  const last = world.deploys.at(-1)
  const proxy = last === undefined ? "no deploy" : `the last deploy: stops ${last.stops}, ${last.proxy.describe()}`
  return `runs: [${runs.join("; ")}]; ${proxy}`
}

describe("orderings under randomized schedules", () => {
  it(`mounts beside registration, and a failure acted on only when both ended (${schedules} schedules)`, async () => {
    const client = await world.client()
    for (let seed = 1; seed <= schedules; seed++) {
      await schedule("mounts beside registration", seed, async ({ at, owns }) => {
        const next = random(seed)
        const delay = delayer(next)
        const outcome = (["ok", "registration fails", "mount fails", "feed fails"] as const)[Math.floor(next() * 4)]!
        const files = Math.floor(next() * 3)
        const directories = Math.floor(next() * 3) + (outcome === "mount fails" ? 1 : 0)
        const failingMount = outcome === "mount fails" ? `d${directories - 1}` : undefined
        let mountsAnswered = 0
        let feedsAnswered = 0
        behaviour = {
          begun: `{"secrets":{"s":"rotating"}}`,
          delay,
          mount: async (r) => {
            await delay()
            mountsAnswered++
            return r.id === failingMount ? tagged(Answer.error, "no") : tagged(Answer.ok)
          },
          feed: async () => {
            await delay()
            feedsAnswered++
            return outcome === "feed fails" ? [tagged(Answer.error, "bad")] : [tagged(Answer.ok)]
          }
        }
        let registrationAnswered = false
        // this schedule's deploy: the next one made
        const deployed = world.deploys.length
        const run = client.run(
          request(img.digest, {
            fuse_file_mounts: Array.from({ length: files }, (_, i) => ({ id: `f${i}`, container_path: `/f${i}` })),
            fuse_directory_mounts: Array.from({ length: directories }, (_, i) => ({ id: `d${i}`, container_path: `/d${i}` }))
          }),
          {
            images: held,
            registration: () => {
              registrationAnswered = true
              return outcome === "registration fails" ? [tagged(Answer.error, "no")] : [tagged(Answer.deploy, `{"s":"v"}`)]
            }
          }
        )
        owns(run)
        at("the first response")
        const first = await run.first
        // at the first response: both branches have ended, whatever failed
        const proxy = world.deploys[deployed]!.proxy
        expect(registrationAnswered, `seed ${seed}`).toBe(true)
        expect(mountsAnswered, `seed ${seed}`).toBe(files + directories)
        expect(feedsAnswered, `seed ${seed}`).toBe(outcome === "registration fails" ? 0 : 1)
        expect(proxy.mostMountsAtOnce, `seed ${seed}`).toBeLessThanOrEqual(1)
        expect(first.kind, `seed ${seed}`).toBe(outcome === "ok" ? "id" : "error")
        if (outcome === "ok") run.stop()
        at("the run's finish")
        await run.finished
        expect(world.deploys[deployed]!.stops, `seed ${seed}`).toBe(1)
      })
    }
    expect(world.parts.holds.isEmpty).toBe(true)
    expect(world.parts.running.size).toBe(0)
  }, 600_000)

  it(`the client's early channels held and served after the id in their order (${schedules} schedules)`, async () => {
    const client = await world.client()
    for (let seed = 1; seed <= schedules; seed++) {
      await schedule("early channels", seed, async ({ at, owns }) => {
        const next = random(1000 + seed)
        const delay = delayer(next)
        // the id as the client saw it (it opens its channels before that), and as the server sent it:
        // the server's run is running from just before the id goes out, and only then serves a
        // channel. What reaches the proxy is judged by the server's side: the proxy may read the
        // server's next frame before the client reads the id (two sockets, no order between them)
        let idSent = false
        const runsBefore = new Set<ContainerRun>(world.server.runs)
        const serverSentId = () => [...world.server.runs].some((r) => !runsBefore.has(r) && r.state === "running")
        const feedsBeforeId: Array<string> = []
        const deployed = world.deploys.length
        behaviour = {
          begun: `{"secrets":{"s":"rotating"}}`,
          delay,
          feed: async (r) => {
            if (!serverSentId()) feedsBeforeId.push(r.toString("utf8", 1))
            await delay()
            return [tagged(Answer.ok)]
          }
        }
        const run = client.run(request(img.digest, { fuse_file_mounts: [{ id: "f", container_path: "/f" }] }), {
          images: held,
          registration: () => [tagged(Answer.deploy, `{"s":"first"}`)]
        })
        owns(run)
        void run.first.then(() => (idSent = true))
        // channels opened at random moments before the id
        const opened: Array<{ kind: "secrets" | "mount"; n: number; channel: ReturnType<typeof run.secrets> }> = []
        const count = 1 + Math.floor(next() * 5)
        for (let n = 0; n < count; n++) {
          at("a delay before a channel")
          await delay()
          if (idSent) break
          const kind = next() < 0.5 ? "secrets" : "mount"
          opened.push({ kind, n, channel: kind === "secrets" ? run.secrets(`{"s":"${n}"}`) : run.fuseMount(`m${n}`, `/m${n}`, "directory") })
        }
        at("the id")
        expect(await run.first, `seed ${seed}`).toMatchObject({ kind: "id" })
        at("the answers of the held channels")
        for (const o of opened) expect(await o.channel.responses.take(), `seed ${seed}`).toEqual(tagged(Answer.ok))
        const proxy = world.deploys[deployed]!.proxy
        // before the id only the registration's feed reached the proxy
        expect(feedsBeforeId.filter((f) => f !== `{"s":"first"}`), `seed ${seed}`).toEqual([])
        // after it, every held channel in the order it was opened
        const served = [
          ...proxy.feeds.slice(1).map((f) => `secrets ${(JSON.parse(f.request.toString("utf8", 1)) as { s: string }).s}`),
          ...proxy.scopes.filter((s) => s.tag === ProxyScope.mount).slice(1).map((s) => `mount ${(JSON.parse(s.body) as { id: string }).id.slice(1)}`)
        ]
        expect(served.filter((s) => s.startsWith("secrets")), `seed ${seed}`).toEqual(opened.filter((o) => o.kind === "secrets").map((o) => `secrets ${o.n}`))
        expect(served.filter((s) => s.startsWith("mount")), `seed ${seed}`).toEqual(opened.filter((o) => o.kind === "mount").map((o) => `mount ${o.n}`))
        run.stop()
        at("the run's finish")
        await run.finished
      })
    }
  }, 600_000)

  it(`exactly one id, and the proxy's words relayed in order, whatever happens around them (${schedules} schedules)`, async () => {
    const client = await world.client()
    for (let seed = 1; seed <= schedules; seed++) {
      await schedule("exactly one id", seed, async ({ at, owns }) => {
        const next = random(5000 + seed)
        const delay = delayer(next)
        behaviour = { begun: `{"secrets":{}}`, delay }
        const answered: Array<Buffer> = []
        // this schedule's deploy: the next one made (not the last one found, which may be another's)
        const deployed = world.deploys.length
        const run = client.run(request(img.digest), {
          images: held,
          onAsk: (c: PeerChannel) => void delay().then(() => (answered.push(c.request), c.respond(tagged(0, c.request)), c.finish()))
        })
        owns(run)
        at("Begun sent")
        await (async () => {
          while (world.deploys[deployed]?.proxy.begunSent !== true) {
            await new Promise((r) => setImmediate(r))
          }
        })()
        const proxy = world.deploys[deployed]!.proxy
        // the proxy speaks and asks at random, before and after the id
        const words: Array<Buffer> = []
        const asks: Array<Promise<Buffer | undefined>> = []
        const steps = 3 + Math.floor(next() * 8)
        for (let i = 0; i < steps; i++) {
          at(`step ${i}`)
          await delay()
          const r = next()
          if (r < 0.4) {
            const word = r < 0.2 ? tagged(Answer.active) : tagged(Answer.inactive, `{"n":${i}}`)
            words.push(word)
            at(`saying ${i}`)
            await proxy.say(word)
          } else if (r < 0.5) {
            await proxy.say(tagged(Answer.id, "a second id"))
          } else {
            asks.push(proxy.ask(tagged(16, `ask ${i}`)).then((c) => c.responses.take()))
          }
        }
        at("the id")
        expect(await run.first, `seed ${seed}`).toMatchObject({ kind: "id" })
        at("the answers of the asks")
        const relayed = await Promise.all(asks)
        expect(relayed.length, `seed ${seed}`).toBe(asks.length)
        for (const r of relayed) expect(r?.[0], `seed ${seed}`).toBe(0)
        at("the words relayed")
        await new Promise<void>((resolve) => {
          const check = () => (run.later.length >= words.length ? resolve() : setImmediate(check))
          check()
        })
        run.stop()
        at("the run's finish")
        await run.finished
        expect(run.later, `seed ${seed}`).toEqual(words)
        expect(answered.length, `seed ${seed}`).toBe(asks.length)
      })
    }
  }, 600_000)
})
