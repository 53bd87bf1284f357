import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { readShapes, SparePool, type Spare, type SpareShape } from "../../../src/containers/deploy/SparePool.js"
import { tempDir } from "./deployWorld.js"

/** The pool's own rules, with spares that are only names: bounded, by shape, one stood up at a time, written down and read back. */
const dir = tempDir("spare-pool")
afterAll(() => Fs.rmSync(dir, { recursive: true, force: true }))

const shape = (n: string, more: Partial<SpareShape> = {}): SpareShape => ({
  identity: "alice", digest: `sha256:${n.repeat(64).slice(0, 64)}`, disk: 1 << 20, memory: 1 << 24, rootfs: "/rootfs",
  launch: { command: ["/bin/sh"], env: [], workingDir: "/", secrets: "{}" }, ...more
})

const fakes = (file?: string, max = 2) => {
  const stood: Array<string> = []
  const stopped: Array<string> = []
  let standing = 0
  let most = 0
  const release: Array<() => void> = []
  const pool = new SparePool<Spare & { name: string; memory: number }>({
    max,
    file,
    standUp: async (s) => {
      const name = `${s.identity} ${s.digest.slice(7, 8)} ${s.disk}`
      most = Math.max(most, ++standing)
      await new Promise<void>((resolve) => release.push(resolve))
      standing--
      stood.push(name)
      return { name, memory: s.memory, alive: () => true, stop: async () => void stopped.push(name) }
    }
  })
  /** lets every stand-up begun so far complete, and those queued behind them */
  const settle = async () => {
    for (let i = 0; i < 20; i++) {
      for (const r of release.splice(0)) r()
      await new Promise((resolve) => setImmediate(resolve))
    }
  }
  return { pool, stood, stopped, settle, most: () => most }
}

describe("the spare pool", () => {
  it("keeps one spare per shape for the most recent shapes, stands them up one at a time, and stops the one pushed out", async () => {
    const f = fakes()
    f.pool.used(shape("a"))
    f.pool.used(shape("b"))
    f.pool.used(shape("c"))
    await f.settle()
    expect(f.most()).toBe(1)
    // a was pushed out before its turn came: never stood up
    expect(f.stood).toEqual(["alice b 1048576", "alice c 1048576"])
    expect(f.pool.recent().map((s) => s.digest.slice(7, 8))).toEqual(["c", "b"])
    f.pool.used(shape("a"))
    await f.settle()
    expect(f.stopped).toEqual(["alice b 1048576"])
    await f.pool.close()
    expect(f.stopped.sort()).toEqual(["alice a 1048576", "alice b 1048576", "alice c 1048576"])
  })

  it("gives a spare only to its identity, image and disk, whatever the memory; the next stands with the memory last asked", async () => {
    const f = fakes()
    f.pool.used(shape("a"))
    await f.settle()
    expect(await f.pool.take(shape("a", { identity: "bob" }))).toBeUndefined()
    expect(await f.pool.take(shape("a", { disk: 2 << 20 }))).toBeUndefined()
    expect(await f.pool.take(shape("a", { rootfs: "/elsewhere" }))).toBeUndefined()
    expect(await f.pool.take(shape("a", { launch: { command: ["/bin/other"], env: [], workingDir: "/", secrets: "{}" } }))).toBeUndefined()
    const taken = await f.pool.take(shape("a", { memory: 1 << 26 }))
    expect(taken?.name).toBe("alice a 1048576")
    expect(await f.pool.take(shape("a"))).toBeUndefined()
    f.pool.used(shape("a", { memory: 1 << 26 }))
    await f.settle()
    expect((await f.pool.take(shape("a")))?.memory).toBe(1 << 26)
    await f.pool.close()
  })

  it("does not make a take wait for a spare queued behind another, and stands none up once closed", async () => {
    const f = fakes()
    f.pool.used(shape("a"))
    f.pool.used(shape("b"))
    // a is being stood up, b waits its turn: taking b answers at once
    expect(await f.pool.take(shape("b"))).toBeUndefined()
    // the close waits for the spare being stood up, and stops it
    const closing = f.pool.close()
    await f.settle()
    await closing
    expect(f.stood).toEqual(["alice a 1048576"])
    expect(f.stopped).toEqual(["alice a 1048576"])
    f.pool.used(shape("c"))
    await f.settle()
    expect(f.stood).toEqual(["alice a 1048576"])
  })

  it("writes the shapes down, most recent first, and a pool started again stands their spares up; what does not read as a shape is left out", async () => {
    const file = Path.join(dir, "spares.json")
    const f = fakes(file)
    f.pool.used(shape("a"))
    f.pool.used(shape("b", { identity: "bob", memory: 1 << 25 }))
    await f.settle()
    await f.pool.close()
    expect(readShapes(file)).toEqual([shape("b", { identity: "bob", memory: 1 << 25 }), shape("a")])
    const again = fakes(file)
    again.pool.restore(readShapes(file))
    await again.settle()
    expect(again.stood).toEqual(["bob b 1048576", "alice a 1048576"])
    await again.pool.close()
    Fs.writeFileSync(file, JSON.stringify([{ ...shape("a"), disk: -1 }, { ...shape("b"), digest: "sha256:nothex" }, { ...shape("c"), rootfs: "relative" }, { ...shape("d"), launch: { command: [] } }, shape("e"), 7]))
    expect(readShapes(file)).toEqual([shape("e")])
    Fs.writeFileSync(file, "not json")
    expect(readShapes(file)).toEqual([])
  })
})
