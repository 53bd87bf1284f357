import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { spareWaits, stopSpare } from "../../src/pickup/SpareClient.js"
import { webLogin, webNewThread, type WebSession } from "./fossilServer.js"
import { shellRun, users } from "./nodeWorld.js"
import { onWaitRanOut } from "./explain.js"
import { answerWithin, makeWorld, waitFor, type World } from "./world.js"

// A wait for the product that runs out says what the node saw (test/support/explain.ts): here a
// node whose watcher program never writes started (it takes the run it is handed and sleeps), so
// world.waitEnded, given a short limit on purpose, runs out. Its failure names the run, the load,
// the hook's log with the round that handed the run, the run's care files and the watcher that
// holds it, alive and sleeping: a lost run, told from a slow machine.

let world: World
let alice: WebSession

beforeAll(async () => {
  world = await makeWorld({ prefix: "ocx2-explain-", checkin: { "hello.txt": "hello from trunk\n" }, fastHooks: true, node: true })
  expect(world.installed?.stopped).toEqual({ reason: "completed" })
  // every run to a watcher of its own (no spare, which would be the real program), and that program one that never answers
  const settings = Path.join(world.root, "settings")
  Fs.mkdirSync(settings, { recursive: true })
  Fs.writeFileSync(Path.join(settings, "spare-watcher"), "off")
  stopSpare(world.root)
  expect(await waitFor(() => (spareWaits(world.root) ? undefined : true), answerWithin, 50)).toBe(true)
  const watcher = Path.join(Fs.realpathSync(Path.join(world.root, "current")), "ocx2-watcher")
  Fs.rmSync(watcher)
  Fs.writeFileSync(watcher, "#!/usr/bin/env node\n// takes nothing, writes nothing: a lost run\nsetInterval(() => {}, 1 << 30)\n", { mode: 0o755 })
  alice = await webLogin(world.server.url, users.admin.login, users.admin.password)
}, 180_000)

afterAll(() => world?.close())

describe("a wait for the product that runs out", () => {
  it("fails with what the node saw: the run, the load, the hook's log, the run's care files, the world's processes with the silent watcher", async () => {
    const run = await webNewThread(world.server, alice, { title: "a run never started", text: world.runText(shellRun(world, "true")) })
    // the silent watcher is started for the run (its command line names it)
    const watcher = await world.waitFor("a watcher is started for the run", () => {
      const line = world.explain(run).split("\n").find((l) => l.includes("ocx2-watcher") && l.includes(run))
      return line
    }, { run })
    expect(watcher).toMatch(/^\d+ ppid \d+ [RSD] age [\d.]+ s cpu [\d.]+ s cwd /)
    const failure = await world.waitEnded(run, 3_000).then(() => undefined, (e: unknown) => (e instanceof Error ? e.message : String(e)))
    expect(failure).toBeDefined()
    expect(failure).toContain(`the run ${run} was not answered ended within 3 s (its replies: none)`)
    expect(failure).toMatch(/load average [\d.]+ [\d.]+ [\d.]+ on \d+ cores/)
    expect(failure).toContain(`--- ${Path.join(world.root, "node", "hook.log")} (`)
    expect(failure).toContain(`--- the processes of ${world.dir} (`)
    expect(failure).toMatch(new RegExp(`\\n\\d+ ppid \\d+ [RSD] age [\\d.]+ s cpu [\\d.]+ s cwd \\S+: \\S+(?: -\\S+)* \\S*ocx2-watcher .*--run ${run}`))
    // the run's care: its hand-off noted, no watcher has taken it
    expect(failure).toContain(`${Path.join(world.root, "care", `${run}.lock`)}: absent (no watcher has taken the run)`)
    // and the world's server, which serves on
    expect(failure).toMatch(/fossil server/)
  }, 180_000)
  it("a bare wait that runs out tells what each open world saw then, with the wait's place (printed by failedWaits.ts if its test fails)", async () => {
    const told: Array<string> = []
    const before = onWaitRanOut((text) => told.push(text))
    try {
      // a wait meant to run out, as a test may make one: it still gives undefined
      expect(await waitFor(() => undefined, 200, 50)).toBeUndefined()
      expect(await waitFor(() => true, 200, 50)).toBe(true)
    } finally {
      onWaitRanOut(before)
    }
    expect(told.length).toBe(1)
    expect(told[0]).toMatch(/^a wait of 0.2 s ran out \(waited 0.\d s\), at .*explain\.test\.ts:\d+:\d+/)
    expect(told[0]).toContain(`ROOT ${world.root}\n`)
    expect(told[0]).toContain(`--- the processes of ${world.dir} (`)
  })
})
