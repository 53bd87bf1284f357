import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it, vi } from "vitest"
import { ContainersError } from "../../src/containers/Client.js"
import { tagged } from "../../src/containers/Frames.js"
import { outputBound, readOutput } from "../../src/containers/ProgramOutput.js"
import { Answer, Endpoint } from "../../src/containers/Wire.js"
import { images, makeImage, request, until, worldPerCase } from "./world.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 300_000 })

/**
 * A program's output (issue 43; docs/containers.md section 3, containers::output): what a
 * container's program writes on stdout and stderr is kept under ROOT/output/IDENTITY/ID, bounded,
 * and read by the identity that ran it, not by another. The test deployer's deploys say what
 * their program printed; test/containers/deploy/programOutput.test.ts runs a real program.
 */
const open = worldPerCase()
const img = makeImage()
const held = images(img)

describe("containers::output", () => {
  it("the identity that ran a container reads its stdout and stderr, during the run and after it; another identity cannot", async () => {
    const w = await open({ output: () => ({ stdout: "to stdout\n", stderr: "to stderr\n" }) })
    const alice = await w.client("alice")
    const run = alice.run(request(img.digest), { images: held })
    const first = await run.first
    expect(first).toMatchObject({ kind: "id" })
    const id = (first as { id: string }).id
    await until(() => readOutput(w.root, "alice", id, "stderr")?.toString() === "to stderr\n", "the output kept")
    expect(Fs.readFileSync(Path.join(w.root, "output", "alice", id, "stdout"), "utf8")).toBe("to stdout\n")
    expect((await alice.output(id, "stdout")).toString()).toBe("to stdout\n")
    expect((await alice.output(id, "stderr")).toString()).toBe("to stderr\n")

    const bob = await w.client("bob")
    await expect(bob.output(id, "stdout")).rejects.toThrow(ContainersError)
    await expect(bob.output(id, "stderr")).rejects.toThrow(/you ran no container/)

    run.stop()
    await run.finished
    expect((await alice.output(id, "stdout")).toString()).toBe("to stdout\n")
    await expect(bob.output(id, "stdout")).rejects.toThrow(/you ran no container/)
  })

  it("keeps the last part of a stream, at most its bound", async () => {
    const lines = Array.from({ length: 40_000 }, (_, i) => `line ${i}\n`).join("")
    const w = await open({ output: () => ({ stdout: lines, stderr: "" }) })
    const alice = await w.client("alice")
    const run = alice.run(request(img.digest), { images: held })
    const id = ((await run.first) as { id: string }).id
    await until(() => readOutput(w.root, "alice", id, "stdout")?.toString().endsWith("line 39999\n") === true, "the output's end kept")
    const kept = await alice.output(id, "stdout")
    expect(lines.length).toBeGreaterThan(outputBound)
    expect(kept.length).toBeLessThanOrEqual(outputBound)
    expect(lines.endsWith(kept.toString())).toBe(true)
    expect((await alice.output(id, "stderr")).length).toBe(0)
  })

  it("a request that does not decode gets the bare finish; a run that fails before its id keeps nothing", async () => {
    const w = await open({ output: () => ({ stdout: "x", stderr: "y" }), behaviour: () => ({ begun: tagged(Answer.error, "it did not come up") }) })
    const alice = await w.client("alice")
    for (const body of ["{}", `{"id":"x"}`, `{"id":"x","stream":"stdin"}`, `{"id":"x","stream":"stdout","more":1}`, "not json"]) {
      expect(await alice.call(Endpoint.containersOutput, body)).toEqual({ responses: [], finished: true })
    }
    const failed = alice.run(request(img.digest), { images: held })
    expect(await failed.first).toMatchObject({ kind: "error" })
    await failed.finished
    expect(w.deploys).toHaveLength(1)
    expect(Fs.readdirSync(Path.join(w.root, "output", "alice"))).toEqual([])
  })
})
