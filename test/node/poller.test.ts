import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { hookCursorOf, pollBackoffice, runBackoffice } from "../../src/node/BackofficePoller.js"
import { pollersOf, pollersOfKind } from "../../src/node/HookInstall.js"
import { hook } from "../../src/tools/hook.js"
import { status } from "../../src/tools/status.js"
import { fossil, spawnAsService, webLogin, webNewThread } from "../support/fossilServer.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { makeWorld, type World } from "../support/world.js"
import { endWatchers, makeHookWorld, waitFor, type HookWorld } from "./hookWorld.js"

// Fast mode's poller is the node's (src/node/BackofficePoller.ts, docs/locks.md): `ocx2 hook --fast`
// starts it in place of Fossil's own, status tells the two apart, runs are picked up through it,
// and a backoffice run that left the hook's cursor behind is run again without waiting for a change.

let world: HookWorld
let polled: World | undefined
beforeAll(async () => {
  world = await makeHookWorld({ fastHooks: false })
}, 120_000)
afterAll(async () => {
  for (const pid of pollersOf(world.repository)) process.kill(pid, "SIGKILL")
  endWatchers(world.root)
  await world?.close()
  await polled?.close()
})

describe("the node's poller in fast mode", () => {
  it("hook --fast ends Fossil's own poller and starts the node's; status tells them apart; a run is picked up through it", async () => {
    // an older release's fast mode, or an operator's: fossil backoffice --poll beside the server
    await fossil(["settings", "backoffice-disable", "on", "-R", world.repository])
    const old = spawnAsService(["backoffice", "--poll", "1", world.repository])
    await world.waitFor("the old fossil backoffice --poll is found as a poller of the repository", () => (pollersOfKind(world.repository).some((p) => p.pid === old.pid) ? true : undefined), { ms: 5000 })
    const before = (await world.call(status, { root: world.root })).output!.backoffice!
    expect(before.mode).toBe("fast")
    expect(before.fossilPollers).toEqual([old.pid])
    expect(before.words).toMatch(/Fossil's own poller runs .*refuses people's web posts/)

    const fast = await world.call(hook, { root: world.root, node: users.node.login, fast: true })
    expect(fast.stopped.reason).toBe("completed")
    expect(fast.operations.filter((o) => o.op === "fast").map((o) => o.detail)).toEqual([
      expect.stringMatching(/^start .*ocx2-hook --poll /),
      expect.stringMatching(new RegExp(`^end Fossil's own poller \\(fossil backoffice --poll, pid ${old.pid}\\)`))
    ])
    expect(fast.output!.backoffice.fossilPollers).toEqual([])
    expect(pollersOfKind(world.repository).map((p) => p.kind)).toEqual(["node"])
    const after = (await world.call(status, { root: world.root })).output!.backoffice!
    expect(after.mode).toBe("fast")
    expect(after.words).toMatch(/the node's poller runs \(ocx2-hook --poll, pid \d+\)/)
    // installed again: no second poller
    await world.call(hook, { root: world.root, fast: true })
    expect(pollersOf(world.repository).length).toBe(1)

    // a run posted through the web form is answered: the poller's backoffice ran the hook
    const session = await webLogin(world.server.url, users.admin.login, users.admin.password)
    const run = await webNewThread(world.server, session, { title: "a run in fast mode", text: world.runText(shellRun(world, "echo picked up")) })
    const replies = await world.waitEnded(run, 90_000)
    expect(replies.filter((m) => m.kind === "started").length).toBe(1)
    expect(replies.filter((m) => m.kind === "ended").length).toBe(1)
    const cursor = hookCursorOf(world.repository)!
    await world.waitFor("the hook's cursor reaches the newest receipt", () => (hookCursorOf(world.repository)!.cursor >= cursor.newest ? true : undefined), { ms: 10_000 })
  }, 180_000)

  it("runs the backoffice again when a run left the hook's cursor behind, with no change to the file", async () => {
    // a repository of its own, which nothing but this poller and the test write into (its server's backoffice off)
    polled = await makeWorld({ prefix: "ocx2-polled-", users: [users.admin], checkin: {}, backoffice: false })
    const repository = polled.repository
    const marks = Path.join(polled.dir, "hook-marks")
    // the hook writes the configuration it was given back, and that it ran
    await fossil(["hook", "add", "--type", "after-receive", "--command", `echo "ran host=$OCX2_HOST_FOSSIL_HOME" >> ${marks}`, "-R", repository])
    let runs = 0
    let skipping = false
    const stop = new AbortController()
    const said: Array<string> = []
    // a run that exits without running the hook, as Fossil's does within a push's embargo
    const run = async (r: string) => {
      runs++
      if (skipping) return 0
      return runBackoffice(r)
    }
    const polling = pollBackoffice(repository, { run, everyMs: 100, signal: stop.signal, say: (line) => said.push(line) })
    try {
      // its first run brings the cursor to the newest receipt
      expect(await waitFor(() => {
        const c = hookCursorOf(repository)!
        return runs > 0 && c.cursor === c.newest ? true : undefined
      }, 20_000)).toBe(true)
      Fs.rmSync(marks, { force: true })
      // a receipt, and runs that skip the hook until one started after its command's last write
      skipping = true
      await fossil(["ticket", "add", "title", "a receipt", "-R", repository])
      const written = runs
      await world.waitFor("a receipt makes the poller run the hook again", () => (runs > written ? true : undefined), { ms: 20_000 })
      skipping = false
      // nothing changes the file from here: only the lagging cursor makes the poller run again
      const ran = await waitFor(() => (Fs.existsSync(marks) ? Fs.readFileSync(marks, "utf8") : undefined), 20_000)
      expect(ran).toBe(`ran host=${process.env["FOSSIL_HOME"] ?? ""}\n`)
      expect(said.some((l) => /left the hook's cursor at \d+, behind receipt \d+/.test(l))).toBe(true)
      // Fossil sets the cursor after it has started the hook, which may already have written its mark
      const caughtUp = await waitFor(() => {
        const c = hookCursorOf(repository)!
        return c.cursor === c.newest ? c : undefined
      }, 20_000)
      expect(caughtUp, JSON.stringify(hookCursorOf(repository))).toBeDefined()
    } finally {
      stop.abort()
      await polling
    }
  }, 120_000)
})
