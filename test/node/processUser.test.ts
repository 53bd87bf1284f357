import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { create } from "../../src/tools/create.js"
import { hook } from "../../src/tools/hook.js"
import { run as runTool } from "../../src/tools/run.js"
import { status } from "../../src/tools/status.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { endWatchers, makeHookWorld, sleep, waitFor, type HookWorld } from "./hookWorld.js"

// 2.13 and seed 001: a run whose process user has another run in the node's care waits, and is
// decided again (and started) when that run is over; a run of another process user does not wait.

let world: HookWorld
beforeAll(async () => {
  world = await makeHookWorld()
  expect((await world.call(hook, { node: users.node.login, root: world.root })).stopped).toEqual({ reason: "completed" })
}, 120_000)
afterAll(async () => {
  endWatchers(world.root)
  await world?.close()
})

const createRun = async (script: string, process: object = {}) => {
  const { process: base, ...rest } = shellRun(world, script)
  const answer = await world.call(create, { title: "a run", node: users.node.login, objective: "one per user", fields: { ...rest, process: { ...base, ...process } } })
  expect(answer.stopped).toEqual({ reason: "completed" })
  return answer
}

/** a process that runs until the test creates `go` in its workspace */
const untilGo = "echo up > $$workspace$$/up; while [ ! -e $$workspace$$/go ]; do sleep 0.1; done"
const workspace = (run: string) => Path.join(world.root, "work", run)
const kindsOf = async (run: string) => (await world.replies(run)).map((m) => m.kind)

describe("one run per process user in the node's care", () => {
  it("a second run of the same process user waits until the first is over, then starts; another user's does not wait", async () => {
    const first = (await createRun(untilGo)).output!.run!
    await world.waitFor("the first run's process writes up in its workspace", () => (Fs.existsSync(Path.join(workspace(first), "up")) ? true : undefined), { ms: 20_000, run: first })

    const second = await createRun("echo second")
    // decided by create's own call of the node, or by the hook that Fossil's poller ran first
    expect(second.output?.acted).toMatch(/waits: its process user builder has another run in this node's care|found nothing to do/)
    // status names it among the runs waiting for their process user
    const waiting = await waitFor(async () => {
      const shown = (await world.call(status, { root: world.root })).output?.care?.waiting
      return shown !== undefined && shown.length > 0 ? shown : undefined
    }, 90_000)
    expect(waiting).toEqual([{ user: users.builder.login, runs: [second.output!.run!] }])
    const other = (await createRun("echo other", { user: users.runner.login })).output!.run!
    expect((await world.waitEnded(other, 90_000)).map((m) => m.kind)).toEqual(["started", "ended"])
    await sleep(1000)
    expect(await kindsOf(second.output!.run!)).toEqual([])

    // a manual run of the same user, started by a person, waits too
    const manual = (await createRun("echo by-hand", { manual: true })).output!.run!
    const started = await world.call(runTool, { run: manual })
    expect(started.stopped).toEqual({ reason: "completed" })
    expect(started.output?.acted).toMatch(/waits: its process user builder/)
    await sleep(1000)
    expect(await kindsOf(manual)).toEqual([])

    Fs.writeFileSync(Path.join(workspace(first), "go"), "")
    expect((await world.waitEnded(first, 90_000)).map((m) => m.kind)).toEqual(["started", "ended"])
    for (const run of [second.output!.run!, manual]) {
      const replies = await world.waitEnded(run, 90_000)
      expect(replies.map((m) => [m.kind, m.content])).toEqual([["started", expect.anything()], ["ended", { outcome: "exited", exit: 0 }]])
    }
    // one after the other: each started only once the run before had ended
    const endedFirst = Fs.readFileSync(Path.join(world.root, "care", `${first}.log`), "utf8")
    expect(endedFirst).toMatch(/its process user is free: handed [0-9a-f]{64} to (the spare|watcher) \d+/)
  }, 240_000)
})
