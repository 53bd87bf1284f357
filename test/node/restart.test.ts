import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { Repository } from "../../services/Repository.js"
import { composeForumPost } from "../../src/fossil/Artifact.js"
import { writeMessage } from "../../src/protocol/Envelope.js"
import { hook } from "../../src/tools/hook.js"
import { unhook } from "../../src/tools/unhook.js"
import { webLogin, webNewThread, type WebSession } from "../support/fossilServer.js"
import { users } from "../support/nodeWorld.js"
import { countingRuns, endWatchers, makeHookWorld, pidsNaming, waitFor, type HookWorld } from "./hookWorld.js"

// The node going down and coming back: watchers SIGKILLed mid-run, a run posted while no hook
// ran, a stop the hook missed; then `hook --node lab` again, twice.

let world: HookWorld
let alice: WebSession
beforeAll(async () => {
  world = await makeHookWorld()
  alice = await webLogin(world.server.url, users.admin.login, users.admin.password)
}, 120_000)
afterAll(async () => {
  endWatchers(world.root)
  await world?.close()
})

const { counting, launched, holder } = countingRuns(() => world)
/** whether the process `pid` has ended (a zombie not yet reaped has) */
const gone = (pid: number) => {
  try {
    return Fs.readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /s, "").startsWith("Z")
  } catch {
    return true
  }
}

/**
 * Once the hook is removed: whether no backoffice run of Fossil's (its poller aside) and no hook it
 * ran is still at work, one started before the removal being able to read what arrives next.
 */
const hooksAtRest = () =>
  waitFor(() => pidsNaming(world.repository).some((pid) => {
    try {
      const argv = Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
      return (argv.includes("backoffice") && !argv.includes("--poll")) || argv.includes(Path.join(world.root, "node", "hook.log"))
    } catch {
      return false
    }
  }) ? undefined : true, 30_000, 50)

describe("the node restarting (hook --node USER again)", () => {
  it.live("answers lost the runs whose watchers died, hands on a run never started, sends a missed stop, and never launches twice", () => Effect.gen(function*() {
    const node = { node: users.node.login, root: world.root }
    expect((yield* Effect.promise(() => world.call(hook, node))).stopped.reason).toBe("completed")
    const post = (run: object) => webNewThread(world.server, alice, { title: "a run", text: world.runText(run) })
    const killedA = yield* Effect.promise(() => post(counting("sleep 60")))
    const killedB = yield* Effect.promise(() => post(counting("sleep 60", users.runner.login)))
    const missedStop = yield* Effect.promise(() => post(counting("sleep 60", users.stranger.login)))
    for (const run of [killedA, killedB, missedStop]) {
      expect(yield* Effect.promise(() => waitFor(() => (launched(run) === 1 ? true : undefined), 30_000))).toBe(true)
    }
    // the node goes away: no hook; a run and a stop arrive meanwhile
    expect((yield* Effect.promise(() => world.call(unhook, { root: world.root }))).output?.removed.length).toBe(1)
    expect(yield* Effect.promise(() => hooksAtRest())).toBe(true) // a hook Fossil started before the unhook has run its round
    const neverStarted = yield* Effect.promise(() => post(counting("true")))
    yield* Effect.promise(() => world.reply(users.admin.login, missedStop, writeMessage({ ocx: 2, re: missedStop, stop: {} }, "stop")))
    // the watchers of two runs die (their sandboxed processes die with them)
    for (const run of [killedA, killedB]) process.kill(holder(run), "SIGKILL")
    yield* Effect.sleep(1500)
    expect((yield* Effect.promise(() => world.replies(neverStarted))).length).toBe(0)

    const began = Date.now()
    const again = yield* Effect.promise(() => world.call(hook, node))
    expect(again.stopped.reason).toBe("completed")
    expect(again.output?.hook).toBe("installed")
    const actions = new Map(again.output!.runs!.map((r) => [r.run, r.action]))
    expect(actions.get(killedA)).toMatch(/^answered lost/)
    expect(actions.get(killedB)).toMatch(/^answered lost/)
    expect(actions.get(missedStop)).toMatch(/stop counts/)
    expect(actions.get(neverStarted)).toMatch(/handed to a watcher/)

    const ended = (run: string) =>
      Effect.promise(() => world.waitEnded(run, 90_000)).pipe(Effect.map((replies) =>
        replies.filter((m) => m.kind === "started" || m.kind === "ended")
          .map((m) => [m.kind, m.sender, m.kind === "ended" ? (m.content as { outcome: string }).outcome : ""])))
    expect(yield* ended(killedA)).toEqual([["started", "lab", ""], ["ended", "lab", "lost"]])
    expect(yield* ended(killedB)).toEqual([["started", "lab", ""], ["ended", "lab", "lost"]])
    expect(yield* ended(missedStop)).toEqual([["started", "lab", ""], ["ended", "lab", "stopped"]])
    expect(yield* ended(neverStarted)).toEqual([["started", "lab", ""], ["ended", "lab", "exited"]])
    const recovered = Date.now() - began

    // running it again changes nothing: no second answer, no second launch
    const third = yield* Effect.promise(() => world.call(hook, node))
    expect(third.output?.hook).toBe("unchanged")
    expect(third.output?.runs).toEqual([])
    yield* Effect.sleep(1500)
    for (const run of [killedA, killedB, missedStop, neverStarted]) {
      const replies = (yield* Effect.promise(() => world.replies(run))).filter((m) => m.kind === "started" || m.kind === "ended")
      expect(replies.map((m) => m.kind)).toEqual(["started", "ended"])
      expect(launched(run)).toBe(1)
    }
    expect(recovered).toBeLessThan(30_000)
  }), 180_000)

  it.live("what a dead watcher left in an ended run's outbox (its kept logs) is sent when the node starts", () => Effect.gen(function*() {
    expect((yield* Effect.promise(() => world.call(unhook, { root: world.root }))).stopped.reason).toBe("completed")
    const run = yield* Effect.promise(() => webNewThread(world.server, alice, { title: "a run", text: world.runText(counting("true", users.runner.login)) }))
    const hooked = yield* Effect.promise(() => world.call(hook, { node: users.node.login, root: world.root }))
    expect(hooked.stopped).toEqual({ reason: "completed" })
    yield* Effect.promise(() => world.waitEnded(run, 90_000))
    // its watcher still holds the run a moment after its ended is in (its kept logs, its outbox taken
    // away): what a dead watcher leaves is left once it is gone, or it would meet a live one
    expect(yield* Effect.promise(() => waitFor(() => {
      try {
        return gone(holder(run)) ? true : undefined
      } catch {
        return true // no lock file left: nobody holds the run
      }
    }, 30_000, 50))).toBe(true)
    // a watcher killed after keeping a report and before sending it leaves this behind
    const kept = composeForumPost({ user: users.node.login, date: new Date(), root: run, replyTo: run, text: "kept logs left behind" })
    Fs.appendFileSync(Path.join(world.root, "care", `${run}.outbox`),
      `${JSON.stringify({ keep: { kind: "report", hash: kept.hash, user: users.node.login, bytes: kept.bytes.toString("base64") } })}\n`)
    const again = yield* Effect.promise(() => world.call(hook, { node: users.node.login, root: world.root, check: true }))
    expect(again.stopped, JSON.stringify(again.operations)).toEqual({ reason: "completed" })
    const thread = yield* Effect.flatMap(Repository, (r) => r.thread(run)).pipe(Effect.provide(FossilRepository.layer({ path: world.repository })))
    expect(thread.filter((p) => p.text === "kept logs left behind").map((p) => [p.hash, p.sender])).toEqual([[kept.hash, users.node.login]])
    expect(Fs.existsSync(Path.join(world.root, "care", `${run}.outbox`))).toBe(false)
  }), 180_000)

  it.live("a hand-off noted by a hook killed before it made it holds nothing up: hook --node starts that run and the one waiting behind it", () => Effect.gen(function*() {
    expect((yield* Effect.promise(() => world.call(unhook, { root: world.root }))).stopped.reason).toBe("completed")
    const post = (run: object) => webNewThread(world.server, alice, { title: "a run", text: world.runText(run) })
    const user = users.runner.login
    const handed = yield* Effect.promise(() => post(counting("true", user)))
    const behind = yield* Effect.promise(() => post(counting("true", user)))
    // what a hook killed between its note and its hand-off leaves: the first noted as on its way
    // to the user's lock, the second written down as waiting for it
    const care = Path.join(world.root, "care")
    Fs.mkdirSync(care, { recursive: true, mode: 0o700 })
    Fs.writeFileSync(Path.join(care, `~${user}.handed`), `${handed}\n`, { mode: 0o600 })
    Fs.writeFileSync(Path.join(care, `~${user}.waiting`), `${JSON.stringify({ run: behind })}\n`, { mode: 0o600 })
    const again = yield* Effect.promise(() => world.call(hook, { node: users.node.login, root: world.root }))
    expect(again.stopped, JSON.stringify(again.operations)).toEqual({ reason: "completed" })
    for (const run of [handed, behind]) {
      const replies = (yield* Effect.promise(() => world.waitEnded(run, 90_000))).filter((m) => m.kind === "started" || m.kind === "ended")
      expect(replies.map((m) => [m.kind, m.sender])).toEqual([["started", "lab"], ["ended", "lab"]])
      expect(launched(run)).toBe(1)
    }
  }), 180_000)

  it.live("hooks SIGKILLed mid-round leave nothing undone or done twice: hook --node decides what they left", () => Effect.gen(function*() {
    expect((yield* Effect.promise(() => world.call(unhook, { root: world.root }))).stopped.reason).toBe("completed")
    expect(yield* Effect.promise(() => hooksAtRest())).toBe(true)
    const runs: Array<string> = []
    for (const delay of [50, 150, 300, 600]) {
      const run = yield* Effect.promise(() => webNewThread(world.server, alice, { title: "a run", text: world.runText(counting("true")) }))
      runs.push(run)
      const child = ChildProcess.spawn(Path.join(world.root, "ocx2-hook"), ["--log", Path.join(world.root, "node", "hook.log"), world.repository], {
        stdio: "ignore"
      })
      const exited = new Promise((r) => child.once("exit", r))
      yield* Effect.sleep(delay)
      child.kill("SIGKILL")
      yield* Effect.promise(() => exited)
    }
    yield* Effect.sleep(1000)
    const again = yield* Effect.promise(() => world.call(hook, { node: users.node.login, root: world.root }))
    expect(again.stopped, JSON.stringify(again.operations)).toEqual({ reason: "completed" })
    for (const run of runs) {
      const replies = (yield* Effect.promise(() => world.waitEnded(run, 90_000))).filter((m) => m.kind === "started" || m.kind === "ended")
      expect(replies.map((m) => [m.kind, m.sender])).toEqual([["started", "lab"], ["ended", "lab"]])
    }
    yield* Effect.sleep(1000)
    for (const run of runs) expect(launched(run)).toBe(1)
  }), 180_000)
})
