import { describe, expect, it } from "vitest"
import { create } from "../../src/tools/create.js"
import { stop } from "../../src/tools/stop.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { installedHookWorld, waitFor, type HookWorld } from "./hookWorld.js"

// Seed 001: a write on the repository itself starts no hook, so when a run (or a stop) names
// the node of this host's hook, create and stop have that node act at once, and say what it did.
// Fossil's automatic backoffice is left as it is, so nothing but the tools can make the node act
// within these tests' time.

let world: HookWorld
installedHookWorld({ fastHooks: false }, (made) => (world = made))

describe("create and stop on the served repository have this host's node act at once", () => {
  it("create: the node hands the run to a watcher at once, and the answer says so", async () => {
    const { process, ...rest } = shellRun(world, "echo at-once")
    const answer = await world.call(create, {
      title: "a run the node takes at once",
      node: users.node.login,
      objective: "run at once",
      fields: { ...rest, process }
    })
    expect(answer.stopped).toEqual({ reason: "completed" })
    expect(answer.output?.acted).toMatch(/handed to a watcher, which starts it/)
    const replies = await world.waitEnded(answer.output!.run!, 90_000)
    expect(replies.map((m) => [m.kind, m.sender])).toEqual([["started", users.node.login], ["ended", users.node.login]])
  }, 180_000)

  it("stop: the node tells the running watcher at once, and the run ends stopped", async () => {
    const { process, ...rest } = shellRun(world, "sleep 60")
    const created = await world.call(create, {
      title: "a long run", node: users.node.login, objective: "wait", fields: { ...rest, process }
    })
    const run = created.output!.run!
    await waitFor(async () => ((await world.replies(run)).some((m) => m.kind === "started") ? true : undefined), 90_000)
    const stopped = await world.call(stop, { run })
    expect(stopped.stopped).toEqual({ reason: "completed" })
    expect(stopped.output?.acted).toMatch(/told its watcher/)
    const replies = await world.waitEnded(run, 90_000)
    expect(replies.map((m) => [m.kind, m.content])).toEqual([
      ["started", expect.anything()], ["stop", {}], ["ended", { outcome: "stopped" }]
    ])
  }, 180_000)

  it("a dry run of create has the node do nothing", async () => {
    const { process, ...rest } = shellRun(world, "true")
    const answer = await world.call(create, { title: "dry", node: users.node.login, objective: "dry", fields: { ...rest, process } }, { dryRun: true })
    expect(answer.stopped).toEqual({ reason: "dry_run" })
    expect(answer.output?.acted).toBeUndefined()
  }, 90_000)
})
