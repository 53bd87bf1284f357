import { describe, expect, it, vi } from "vitest"
import { images, makeImage, makeWorld, request } from "./world.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 300_000 })

describe("smoke", () => {
  it("runs", async () => {
    const world = await makeWorld({ behaviour: () => ({ begun: `{"secrets":{"tok":"rotating"}}` }) })
    try {
      const client = await world.client()
      const img = makeImage()
      const run = client.run(JSON.stringify(request(img.digest)).slice(0, -1) + `,"arguments":{"n":12345678901234567890}}`, { images: images(img) })
      const first = await run.first
      expect(first).toMatchObject({ kind: "id" })
      expect(world.deploys[0]!.proxy.scopes[0]!.body).toBe(`{"template":"tmpl-1","arguments":{"n":12345678901234567890}}`)
      run.stop()
      await run.finished
      expect(world.deploys[0]!.stops).toBe(1)
    } finally {
      await world.close()
    }
  })
})
