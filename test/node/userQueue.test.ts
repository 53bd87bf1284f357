import BetterSqlite3 from "better-sqlite3"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { composeForumPost } from "../../src/fossil/Artifact.js"
import { writeMessage } from "../../src/protocol/Envelope.js"
import { flockHeld } from "../../src/care/FlockHeld.js"
import { handOff, watcherOf } from "../../src/pickup/HandOff.js"
import { cursorFileOf, readCursor } from "../../src/root/HookFiles.js"
import { appendWaitingOnce, processUserFileName, readWaiting } from "../../src/care/ProcessUserFiles.js"
import { hook } from "../../src/tools/hook.js"
import { cloneAs, pushArtifacts } from "../support/fossilServer.js"
import { holdLock } from "../support/heldLock.js"
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
}, 120_000)
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
  it("all end once, started in the order they arrived, each by one watcher, with at most 4 watchers alive at once", async () => {
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
    // alive at once: the holder, the one it hands to, the spare and a spare still starting (a
    // loaded machine was seen with that fourth), a bound that does not grow with the count, where
    // the quadratic hand-off kept most of the waiting runs' watchers alive together
    expect(seen.peakAlive).toBeLessThanOrEqual(4)
  }, 200_000)

  it("a run written down as waiting while its hand-off was on its way is taken out by the watcher that takes its user", async () => {
    // a manual run: no round hands it to anyone, so the test hands it itself, as a round would
    // have, after writing it down as a round deciding it again meanwhile would have
    const clone = await cloneAs(world.server.url, users.admin.login, users.admin.password, Path.join(world.dir, "alice-dupe.fossil"))
    const run = composeForumPost({ date: new Date(), user: users.admin.login, title: "dupe", text: world.runText(shellRun(world, "echo once", { manual: true })) })
    await pushArtifacts(clone, users.admin.login, [run])
    const care = Path.join(world.root, "care")
    // the round that read it is over (a round passes on the turn of users with runs waiting)
    const [rcvid] = placesOf([run.hash]).get(run.hash)!
    const cursorFile = cursorFileOf(world.root, world.repository, users.node.login)
    await waitFor(() => ((readCursor(cursorFile)?.rcvid ?? 0) >= rcvid && flockHeld(Path.join(care, "round.lock")) !== "held") || undefined, 30_000, 50)
    appendWaitingOnce(care, users.builder.login, { run: run.hash, at: [1, 1] })
    handOff({ root: world.root, repository: world.repository, nodeUser: users.node.login, serverUrl: undefined, passwordsFile: undefined }, run.hash, {
      watcherProgram: watcherOf(world.root), personStart: true
    })
    const log = Path.join(care, `${run.hash}.log`)
    // the watcher's last line, written after it passed its user's turn on
    const done = await waitFor(() => (Fs.existsSync(log) && Fs.readFileSync(log, "utf8").includes("peak memory") ? Fs.readFileSync(log, "utf8") : undefined), 60_000, 100)
    expect(done).toContain("wrote ended exited")
    // its line went with its start: not handed on once over to a watcher for nothing
    expect(readWaiting(care, users.builder.login).map((w) => w.run)).not.toContain(run.hash)
    expect(done).not.toContain(`handed ${run.hash}`)
    expect((await world.replies(run.hash)).map((m) => m.kind)).toEqual(["started", "ended"])
  }, 90_000)

  it("a run left waiting behind a holder that died without passing the turn on starts at the node's next round", async () => {
    const care = Path.join(world.root, "care")
    const userLock = Path.join(care, processUserFileName(users.builder.login, "lock"))
    // the holder: a process with the process user's lock, as a watcher holds it; killed below
    // without waking anyone, as a SIGKILLed watcher is
    Fs.mkdirSync(care, { recursive: true })
    const letGo = await holdLock(userLock)
    try {
      const clone = await cloneAs(world.server.url, users.admin.login, users.admin.password, Path.join(world.dir, "alice-waits.fossil"))
      const run = composeForumPost({ date: new Date(), user: users.admin.login, title: "waits", text: world.runText(shellRun(world, "echo waited")) })
      await pushArtifacts(clone, users.admin.login, [run])
      const waiting = await waitFor(() => readWaiting(care, users.builder.login).some((w) => w.run === run.hash) || undefined, 30_000)
      expect(waiting).toBe(true)
      await letGo()
      // nobody passes the turn on now; the node's next round does (a receipt of a message the round
      // acts on makes one: here a stop for no run of the node)
      const note = composeForumPost({ date: new Date(), user: users.admin.login, title: "a stop for nothing", text: writeMessage({ ocx: 2, re: "0".repeat(64), stop: {} }) })
      await pushArtifacts(clone, users.admin.login, [note])
      const replies = await waitFor(async () => {
        const got = await world.replies(run.hash)
        return got.some((m) => m.kind === "ended") ? got : undefined
      }, 90_000, 300)
      expect(replies?.map((m) => [m.kind, m.content])).toEqual([["started", expect.anything()], ["ended", { outcome: "exited", exit: 0 }]])
    } finally {
      await letGo()
    }
  }, 180_000)
})
