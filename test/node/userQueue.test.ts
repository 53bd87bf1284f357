import BetterSqlite3 from "better-sqlite3"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { composeForumPost } from "../../src/fossil/Artifact.js"
import { hook } from "../../src/tools/hook.js"
import { cloneAs, pushArtifacts } from "../support/fossilServer.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { closeHookWorld, makeHookWorld, waitFor, type HookWorld } from "./hookWorld.js"
import { countWatchers } from "./watcherCount.js"

// Issue 13 item 2: runs of one process user that arrive together are started one after another
// in the server's order, each by one watcher: a run that is over hands the next waiting run to one
// watcher (the spare where one waits), not every waiting run to a watcher of its own.

let world: HookWorld
beforeAll(async () => {
  world = await makeHookWorld({ fastHooks: true })
  expect((await world.call(hook, { node: users.node.login, root: world.root })).stopped).toEqual({ reason: "completed" })
}, 60_000)
afterAll(() => closeHookWorld(world))

/** where the server received each artifact: [rcvid, rid] */
const placesOf = (hashes: ReadonlyArray<string>): Map<string, readonly [number, number]> => {
  const db = new BetterSqlite3(world.repository, { readonly: true, fileMustExist: true })
  try {
    const get = db.prepare<[string], { rcvid: number; rid: number }>("SELECT rcvid, rid FROM blob WHERE uuid = ?")
    return new Map(hashes.map((h) => {
      const row = get.get(h)!
      return [h, [row.rcvid, row.rid] as const]
    }))
  } finally {
    db.close()
  }
}
const byPlace = (a: readonly [number, number], b: readonly [number, number]) => a[0] - b[0] || a[1] - b[1]

describe("runs of one process user arriving together", () => {
  it("all end once, started in the order they arrived, each by one watcher, with at most 3 watchers alive at once", async () => {
    const count = 15
    const clones = await Promise.all(["a", "b"].map((n) => cloneAs(world.server.url, users.admin.login, users.admin.password, Path.join(world.dir, `alice-${n}.fossil`))))
    const artifacts = Array.from({ length: count }, (_, i) =>
      composeForumPost({ date: new Date(Date.now() + i), user: users.admin.login, title: `run ${i}`, text: world.runText(shellRun(world, `echo run ${i}`)) }))
    const watchers = countWatchers(world.root)
    // two pushes at once, so the runs may reach the hook in more than one round
    await Promise.all([pushArtifacts(clones[0]!, users.admin.login, artifacts.slice(0, 8)), pushArtifacts(clones[1]!, users.admin.login, artifacts.slice(8))])
    const runs = artifacts.map((a) => a.hash)
    const ended = await waitFor(async () => {
      const all = await Promise.all(runs.map((r) => world.replies(r)))
      return all.every((replies) => replies.some((m) => m.kind === "ended")) ? all : undefined
    }, 150_000, 500)
    const seen = watchers.stop()
    expect(ended).toBeDefined()
    // each ended exactly once, after exactly one started, as exited 0
    for (const replies of ended!) {
      expect(replies.map((m) => [m.kind, m.content])).toEqual([["started", expect.anything()], ["ended", { outcome: "exited", exit: 0 }]])
    }
    // started in the server's order of the runs
    const runPlaces = placesOf(runs)
    const startedPlaces = placesOf(ended!.map((replies) => replies[0]!.hash))
    const inArrival = [...runs].sort((a, b) => byPlace(runPlaces.get(a)!, runPlaces.get(b)!))
    const inStart = runs.map((r, i) => ({ r, at: startedPlaces.get(ended![i]![0]!.hash)! })).sort((a, b) => byPlace(a.at, b.at)).map((x) => x.r)
    expect(inStart).toEqual(inArrival)
    // one watcher per run (the spare that took it, or one started for it), the spare left waiting,
    // and spares started while another was still starting (each ends at once; a loaded machine
    // makes more of those): linear, at most two a run, where the quadratic hand-off made ~n²/2
    expect(seen.started).toBeLessThanOrEqual(2 * count)
    expect(seen.peakAlive).toBeLessThanOrEqual(3)
  }, 200_000)
})
