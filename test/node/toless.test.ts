// Issue 37 item 3, DECISIONS 16: a run with no valid `to` (missing, not a string, an empty string)
// is refused (refusal 2, naming `to`) by the served repository's own node, exactly once, with no
// `started`; a node on a clone's host leaves it alone. A real `fossil server`, the node's hook
// installed as `hook --node lab` installs it, runs posted through the forum's web form.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Effect from "effect/Effect"
import { writeMessage } from "../../src/protocol/Envelope.js"
import { rootOfHookCommand, shellWords, tolessAnswerer } from "../../src/root/TolessAnswerer.js"
import { hookCommandOf } from "../../src/node/HookInstall.js"
import { hook } from "../../src/tools/hook.js"
import { webLogin, webNewThread, type WebSession } from "../support/fossilServer.js"
import { shellRun } from "../support/nodeWorld.js"
import { signedInHookedWorld, type HookWorld } from "./hookWorld.js"
import { closeCloneWorld, cloneUsers, type CloneWorld, makeCloneWorld, repliesOf, runNode, useThisBuild } from "./cloneWorld.js"
import { dist } from "./hookWorld.js"

/** A run's block with `to` as given: absent when undefined. */
const envelopes: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
  ["no to", {}],
  ["a number as to", { to: 42 }],
  ["an empty to", { to: "" }]
]

describe("a run with no valid to, on the server's hook", () => {
  let world: HookWorld
  let alice: WebSession
  signedInHookedWorld((made, signedIn) => {
    world = made
    alice = signedIn
  })

  it("the served repository's own node is its hook's node", () => {
    expect(tolessAnswerer(world.repository)).toBe("lab")
    expect(rootOfHookCommand(hookCommandOf(world.root))).toBe(world.root)
    expect(shellWords(`'/a b/ocx2-hook' --log "/c/node/hook.log" %R`)).toEqual(["/a b/ocx2-hook", "--log", "/c/node/hook.log", "%R"])
  })

  it("is ended refused, refusal 2 naming to, once, with no started", async () => {
    const runs: Array<string> = []
    // one after another: the forum's first posts at once trip Fossil over its own forumpost table
    for (const [title, envelope] of envelopes) {
      runs.push(await webNewThread(world.server, alice, { title, text: writeMessage({ ocx: 2, ...envelope, run: shellRun(world, "true") }, title) }))
    }
    for (const run of runs) {
      const replies = await world.waitEnded(run, 90_000)
      expect(replies.map((m) => [m.kind, m.sender])).toEqual([["ended", "lab"]])
      const content = replies[0]!.content as { outcome: string; note: string }
      expect(content.outcome).toBe("refused")
      expect(content.note).toMatch(/^refusal 2: to\b/)
    }
    // a later run for lab, decided by a later round, once it has ended: none of them is answered again
    const later = await webNewThread(world.server, alice, { title: "a later run", text: world.runText(shellRun(world, "true")) })
    expect((await world.waitEnded(later, 90_000)).map((m) => m.kind)).toEqual(["started", "ended"])
    // and the node starting again (hook --node lab, which decides every open run) leaves them as they are
    expect((await world.call(hook, { node: "lab", root: world.root })).stopped).toEqual({ reason: "completed" })
    for (const run of runs) expect((await world.replies(run)).map((m) => m.kind)).toEqual(["ended"])
  }, 180_000)
})

describe("a run with no valid to, on a clone's host", () => {
  let world: CloneWorld
  beforeAll(async () => {
    world = await makeCloneWorld("ocx2-toless-clone-")
    useThisBuild(world, dist)
    expect((await runNode(world, ["--check"])).stopped).toEqual({ reason: "completed" })
  }, 120_000)
  afterAll(() => closeCloneWorld(world))

  it("is left alone by the clone's node: not decided, not answered", async () => {
    const alice = await webLogin(world.url, cloneUsers.alice.login, cloneUsers.alice.password)
    const runs: Array<string> = []
    for (const [title, envelope] of envelopes) {
      const run = shellRun({ serverCode: world.cloneCode }, "true", { user: cloneUsers.builder.login })
      runs.push(await webNewThread({ repository: world.served }, alice, { title, text: writeMessage({ ocx: 2, ...envelope, run }, title) }))
    }
    for (const args of [[], ["--check"]]) {
      const answer = await runNode(world, args)
      expect(answer.stopped).toEqual({ reason: "completed" })
      for (const run of runs) expect(answer.output!.runs.map((r) => r.run)).not.toContain(run)
    }
    for (const run of runs) expect(await Effect.runPromise(repliesOf(world, run))).toEqual([])
  }, 120_000)
})
