import { describe, expect, it, vi } from "vitest"
import { deployCases, obtained } from "./deployWorld.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 1_800_000, hookTimeout: 120_000 })

/**
 * Seed 004 step 7 and the conduit (issue 43): a container whose begin was answered Begun is
 * registered and gets exactly one id, even when its program ended before the server read the
 * Begun; its end (the exit status, or why it could not start) is relayed after the id. Real
 * containers through the bubblewrap deployer. OCX2_ENDS_AT_ONCE_RUNS runs of each (default 20;
 * the issue asks for 100, run by hand: `OCX2_ENDS_AT_ONCE_RUNS=100 npx vitest run ...`).
 */
const runs = Number(process.env.OCX2_ENDS_AT_ONCE_RUNS ?? "20")

const { rootfs, world } = deployCases("ends-at-once")

const runRequest = (digest: string) => JSON.stringify({ image: digest, template: "tmpl-1", memory: 256 * 1024 * 1024, disk: 32 * 1024 * 1024 })

describe("a program that ends at once", () => {
  it(`is registered, gets one id and its end after it: /bin/true, /bin/false and a missing WorkingDir, ${runs} times each`, async () => {
    // a label of its own for each, so each is an image of its own digest
    const image = (entrypoint: string, workingDir = "/") =>
      obtained({ rootfs: rootfs(), entrypoint: [entrypoint], cmd: [], env: ["PATH=/bin"], workingDir, labels: { kind: `${entrypoint} in ${workingDir}` } })
    const kinds = [
      { what: "/bin/true", image: image("/bin/true"), end: [] as Array<string> },
      { what: "/bin/false", image: image("/bin/false"), end: ["6 the program ended with exit status 1"] },
      {
        what: "a missing WorkingDir",
        image: image("/bin/true", "/no/such/dir"),
        end: ["6 the program /bin/true could not be started: its working directory /no/such/dir does not exist (spawn /bin/true ENOENT)"]
      }
    ]
    const w = await world(kinds.map((k) => k.image))
    const client = await w.client()
    const seen = new Map<string, Map<string, number>>(kinds.map((k) => [k.what, new Map()]))
    const ids = new Set<string>()
    for (let i = 0; i < runs; i++) {
      for (const kind of kinds) {
        const run = client.run(runRequest(kind.image.digest))
        const first = await run.first
        await run.finished
        if (first.kind === "id") ids.add(first.id)
        const outcome = JSON.stringify(first.kind === "id" ? ["id", ...run.later.map((p) => `${p[0]} ${p.subarray(1).toString("utf8")}`)] : [first])
        const counts = seen.get(kind.what)!
        counts.set(outcome, (counts.get(outcome) ?? 0) + 1)
      }
    }
    const tally = Object.fromEntries([...seen].map(([what, counts]) => [what, Object.fromEntries(counts)]))
    expect(tally).toEqual(Object.fromEntries(kinds.map((k) => [k.what, { [JSON.stringify(["id", ...k.end])]: runs }])))
    expect(ids.size).toBe(runs * kinds.length)
  })
})
