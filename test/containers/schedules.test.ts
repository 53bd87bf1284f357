import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import type { PeerChannel } from "../../src/containers/FrameConnection.js"
import { tagged } from "../../src/containers/Frames.js"
import type { ProxyBehaviour } from "../../src/containers/InProcessProxy.js"
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

describe("orderings under randomized schedules", () => {
  it(`mounts beside registration, and a failure acted on only when both ended (${schedules} schedules)`, async () => {
    const client = await world.client()
    for (let seed = 1; seed <= schedules; seed++) {
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
      const first = await run.first
      // at the first response: both branches have ended, whatever failed
      const proxy = world.deploys.at(-1)!.proxy
      expect(registrationAnswered, `seed ${seed}`).toBe(true)
      expect(mountsAnswered, `seed ${seed}`).toBe(files + directories)
      expect(feedsAnswered, `seed ${seed}`).toBe(outcome === "registration fails" ? 0 : 1)
      expect(proxy.mostMountsAtOnce, `seed ${seed}`).toBeLessThanOrEqual(1)
      expect(first.kind, `seed ${seed}`).toBe(outcome === "ok" ? "id" : "error")
      if (outcome === "ok") run.stop()
      await run.finished
      expect(world.deploys.at(-1)!.stops, `seed ${seed}`).toBe(1)
    }
    expect(world.parts.holds.isEmpty).toBe(true)
    expect(world.parts.running.size).toBe(0)
  }, 600_000)

  it(`the client's early channels held and served after the id in their order (${schedules} schedules)`, async () => {
    const client = await world.client()
    for (let seed = 1; seed <= schedules; seed++) {
      const next = random(1000 + seed)
      const delay = delayer(next)
      let idSent = false
      const feedsBeforeId: Array<string> = []
      behaviour = {
        begun: `{"secrets":{"s":"rotating"}}`,
        delay,
        feed: async (r) => {
          if (!idSent) feedsBeforeId.push(r.toString("utf8", 1))
          await delay()
          return [tagged(Answer.ok)]
        }
      }
      const run = client.run(request(img.digest, { fuse_file_mounts: [{ id: "f", container_path: "/f" }] }), {
        images: held,
        registration: () => [tagged(Answer.deploy, `{"s":"first"}`)]
      })
      void run.first.then(() => (idSent = true))
      // channels opened at random moments before the id
      const opened: Array<{ kind: "secrets" | "mount"; n: number; channel: ReturnType<typeof run.secrets> }> = []
      const count = 1 + Math.floor(next() * 5)
      for (let n = 0; n < count; n++) {
        await delay()
        if (idSent) break
        const kind = next() < 0.5 ? "secrets" : "mount"
        opened.push({ kind, n, channel: kind === "secrets" ? run.secrets(`{"s":"${n}"}`) : run.fuseMount(`m${n}`, `/m${n}`, "directory") })
      }
      expect(await run.first, `seed ${seed}`).toMatchObject({ kind: "id" })
      for (const o of opened) expect(await o.channel.responses.take(), `seed ${seed}`).toEqual(tagged(Answer.ok))
      const proxy = world.deploys.at(-1)!.proxy
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
      await run.finished
    }
  }, 600_000)

  it(`exactly one id, and the proxy's words relayed in order, whatever happens around them (${schedules} schedules)`, async () => {
    const client = await world.client()
    for (let seed = 1; seed <= schedules; seed++) {
      const next = random(5000 + seed)
      const delay = delayer(next)
      behaviour = { begun: `{"secrets":{}}`, delay }
      const answered: Array<Buffer> = []
      const run = client.run(request(img.digest), {
        images: held,
        onAsk: (c: PeerChannel) => void delay().then(() => (answered.push(c.request), c.respond(tagged(0, c.request)), c.finish()))
      })
      await (async () => {
        while (world.deploys.at(-1)?.proxy.begunSent !== true || world.deploys.at(-1)!.stops > 0) {
          await new Promise((r) => setImmediate(r))
        }
      })()
      const proxy = world.deploys.at(-1)!.proxy
      // the proxy speaks and asks at random, before and after the id
      const words: Array<Buffer> = []
      const asks: Array<Promise<Buffer | undefined>> = []
      const steps = 3 + Math.floor(next() * 8)
      for (let i = 0; i < steps; i++) {
        await delay()
        const r = next()
        if (r < 0.4) {
          const word = r < 0.2 ? tagged(Answer.active) : tagged(Answer.inactive, `{"n":${i}}`)
          words.push(word)
          await proxy.say(word)
        } else if (r < 0.5) {
          await proxy.say(tagged(Answer.id, "a second id"))
        } else {
          asks.push(proxy.ask(tagged(16, `ask ${i}`)).then((c) => c.responses.take()))
        }
      }
      expect(await run.first, `seed ${seed}`).toMatchObject({ kind: "id" })
      const relayed = await Promise.all(asks)
      expect(relayed.length, `seed ${seed}`).toBe(asks.length)
      for (const r of relayed) expect(r?.[0], `seed ${seed}`).toBe(0)
      await new Promise<void>((resolve) => {
        const check = () => (run.later.length >= words.length ? resolve() : setImmediate(check))
        check()
      })
      run.stop()
      await run.finished
      expect(run.later, `seed ${seed}`).toEqual(words)
      expect(answered.length, `seed ${seed}`).toBe(asks.length)
    }
  }, 600_000)
})
