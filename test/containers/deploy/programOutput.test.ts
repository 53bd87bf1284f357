import { describe, expect, it, vi } from "vitest"
import { connect } from "../../../src/containers/Client.js"
import { mintToken } from "../../../src/containers/Server.js"
import { deployCases } from "./deployWorld.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 600_000, hookTimeout: 120_000 })

/**
 * A program's output (issue 43; docs/containers.md section 11): a real container's program
 * writes on stdout and stderr; the server keeps both under ROOT/output/IDENTITY/ID and the
 * identity that ran it reads them with containers::output; another identity cannot.
 */
const { sh, world } = deployCases("program-output")

const runRequest = (digest: string) => JSON.stringify({ image: digest, template: "tmpl-1", memory: 256 * 1024 * 1024, disk: 32 * 1024 * 1024 })

describe("a container program's output", () => {
  it("is kept, stdout and stderr apart, and read by the identity that ran it only", async () => {
    const image = sh("echo to stdout; echo to stderr >&2; echo more to stdout; exit 3")
    const w = await world([image])
    const alice = await w.client()
    const run = alice.run(runRequest(image.digest))
    const first = await run.first
    expect(first).toMatchObject({ kind: "id" })
    await run.finished
    expect(run.later.map((p) => p.subarray(1).toString("utf8"))).toEqual(["the program ended with exit status 3"])
    const id = (first as { id: string }).id
    // the run ended: its container was stopped, so both streams reached their end
    expect((await alice.output(id, "stdout")).toString("utf8")).toBe("to stdout\nmore to stdout\n")
    expect((await alice.output(id, "stderr")).toString("utf8")).toBe("to stderr\n")
    const bob = await connect(w.url, mintToken(w.root, "bob"))
    try {
      await expect(bob.output(id, "stdout")).rejects.toThrow(/you ran no container/)
      await expect(bob.output(id, "stderr")).rejects.toThrow(/you ran no container/)
    } finally {
      bob.close()
    }
  })
})
