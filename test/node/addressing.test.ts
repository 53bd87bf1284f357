import { describe, expect, it } from "vitest"
import { webNewThread, type WebSession } from "../support/fossilServer.js"
import { shellRun } from "../support/nodeWorld.js"
import { sleep, signedInHookedWorld, type HookWorld } from "./hookWorld.js"

// Issue 13 item 7: a run whose `to` is this node and whose `clone` is missing or malformed is
// not "a run for another clone": the forms table makes it refusal 2, and the node answers it,
// once, with ended refused naming `clone`. (The clone node's side is in clone.test.ts.)

let world: HookWorld
let alice: WebSession
signedInHookedWorld((made, signedIn) => {
  world = made
  alice = signedIn
})

const post = (run: object, title: string) => webNewThread(world.server, alice, { title, text: world.runText(run) })

describe("malformed addressing on the server's hook", () => {
  it("a run with no clone, or a clone that is not a server-code, is ended refused, refusal 2 naming clone, once", async () => {
    const { clone: _, ...noClone } = shellRun(world, "true")
    const runs: Array<string> = []
    // one after another: the forum's first posts at once trip Fossil over its own forumpost table
    for (const [run, title] of [
      [noClone, "no clone"],
      [{ ...shellRun(world, "true"), clone: "not-a-server-code" }, "a malformed clone"],
      [{ ...shellRun(world, "true"), clone: world.serverCode.toUpperCase() }, "a clone in upper case"],
      [{ ...shellRun(world, "true"), clone: 42 }, "a clone of another type"]
    ] as const) runs.push(await post(run, title))
    for (const run of runs) {
      const replies = await world.waitEnded(run, 90_000)
      expect(replies.map((m) => [m.kind, m.sender])).toEqual([["ended", "lab"]])
      const content = replies[0]!.content as { outcome: string; note: string }
      expect(content.outcome).toBe("refused")
      expect(content.note).toMatch(/^refusal 2: clone/)
    }
    // another round (the next post's hook) answers none of them again
    await post(shellRun(world, "true"), "a later run")
    await sleep(3000)
    for (const run of runs) expect((await world.replies(run)).map((m) => m.kind)).toEqual(["ended"])
  }, 180_000)
})
