import { describe, expect, it } from "vitest"
import { create } from "../../src/tools/create.js"
import { run } from "../../src/tools/run.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { installedHookWorld, sleep, type HookWorld } from "./hookWorld.js"

// Seed 001, "Start a manual run by hand": a manual run waits for a person; `run` has this host's
// node start it; a run that is not manual, not waiting, of another node, or refused is refused.

let world: HookWorld
installedHookWorld({ fastHooks: false }, (made) => (world = made))

const createRun = async (script: string, process: object = {}, extra: object = {}, node = users.node.login) => {
  const { process: base, ...rest } = shellRun(world, script)
  const answer = await world.call(create, {
    title: "a run", node, objective: "by hand", fields: { ...rest, ...extra, process: { ...base, ...process } }
  })
  expect(answer.stopped).toEqual({ reason: "completed" })
  return answer
}

describe("run: a person starts a manual run", () => {
  it("a manual run waits; run starts it, and it gets one started and one ended from the node user", async () => {
    const created = await createRun("echo by-hand", { manual: true })
    const hash = created.output!.run!
    // decided by create's own call of the node, or by the hook that Fossil's poller ran first
    expect(created.output?.acted).toMatch(/waits: a manual run waits|found nothing to do/)
    await sleep(500)
    expect(await world.replies(hash)).toEqual([])

    const dry = await world.call(run, { run: hash }, { dryRun: true })
    expect(dry.stopped).toEqual({ reason: "dry_run" })
    expect(dry.operations.some((o) => o.op === "start" && !o.done)).toBe(true)
    await sleep(500)
    expect(await world.replies(hash)).toEqual([])

    const started = await world.call(run, { run: hash.slice(0, 16) })
    expect(started.stopped).toEqual({ reason: "completed" })
    expect(started.output?.acted).toMatch(/handed to a watcher, which starts it/)
    const replies = await world.waitEnded(hash, 90_000)
    expect(replies.map((m) => [m.kind, m.sender, m.content])).toEqual([
      ["started", users.node.login, expect.anything()],
      ["ended", users.node.login, { outcome: "exited", exit: 0 }]
    ])

    const again = await world.call(run, { run: hash })
    expect(again.stopped.reason).toBe("refused")
    expect(again.stopped.message).toMatch(/is over \(exited\): it is not waiting for a person/)
  }, 180_000)

  it("refuses a run that is not manual, one of another node, one the node refused, and a caller without admin or setup", async () => {
    const automatic = await createRun("sleep 30")
    const notManual = await world.call(run, { run: automatic.output!.run! })
    expect(notManual.stopped.reason).toBe("refused")
    expect(notManual.stopped.message).toMatch(/not waiting for a person|is not manual/)

    const elsewhere = await createRun("true", { manual: true }, {}, users.runner.login)
    const otherNode = await world.call(run, { run: elsewhere.output!.run! })
    expect(otherNode.stopped.message).toMatch(/is for rita, another node than this host's lab/)

    const builder = await world.call(run, { run: elsewhere.output!.run! }, { as: users.builder.login })
    expect(builder.stopped).toEqual({ reason: "refused", message: expect.stringMatching(/^run needs Fossil's admin \(a\) or setup \(s\) capability/) })
  }, 120_000)
})
