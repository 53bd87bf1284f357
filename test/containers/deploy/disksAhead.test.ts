import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it, vi } from "vitest"
import { until } from "../world.js"
import { deployCases } from "./deployWorld.js"

vi.setConfig({ testTimeout: 300_000 })

/**
 * Disks made ahead (issue 43; docs/containers.md section 12): after a deploy, an empty disk of its
 * size is made in ROOT/disks, and the next deploy of that size from nothing (no spare) takes it
 * instead of running mkfs on the request's path; a size pushed out loses its disk.
 */
const { sh, world } = deployCases("disks-ahead")

const request = (digest: string, disk: number) => JSON.stringify({ image: digest, template: "t", memory: 64 << 20, disk })
const disksOf = (root: string) => (Fs.existsSync(Path.join(root, "disks")) ? Fs.readdirSync(Path.join(root, "disks")).sort() : [])

describe("disks made ahead", () => {
  it("are taken by the next deploy of their size, which runs no mkfs, and made again after it", async () => {
    const image = sh("wget -q -O /dev/null --post-data up http://127.0.0.1:14978/ask/16")
    const steps: Array<string> = []
    const w = await world([image], undefined, { spares: 0, disksAhead: 1, trace: (step) => steps.push(step) })
    const client = await w.client()
    const runOnce = async (disk: number) => {
      steps.length = 0
      const run = client.run(request(image.digest, disk), { onAsk: (c) => c.finish() })
      expect((await run.first).kind).toBe("id")
      await run.finished
      return [...steps]
    }
    // the first of its size makes its disk, and one is made ahead once its proxy was reached
    expect(await runOnce(16 << 20)).toContain("disk made")
    await until(() => disksOf(w.root).some((f) => f.startsWith(`${16 << 20}-`)), "a disk of 16 MiB to be made ahead")
    const [ahead] = disksOf(w.root)
    // the next takes it: no mkfs on its path
    const second = await runOnce(16 << 20)
    expect(second).toContain("disk taken")
    expect(second).not.toContain("disk made")
    await until(() => disksOf(w.root).length === 1 && disksOf(w.root)[0] !== ahead, "the next disk of 16 MiB to be made ahead")
    // another size pushes the first out (one size kept): its disk is removed
    expect(await runOnce(24 << 20)).toContain("disk made")
    await until(() => disksOf(w.root).length === 1 && disksOf(w.root)[0]!.startsWith(`${24 << 20}-`), "the 24 MiB disk made, the 16 MiB one removed")
  })
})
