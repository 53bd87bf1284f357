import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BoundedLog } from "../../layers/BwrapSandbox.js"
import { workspaceSizes } from "../../src/tools/support/HookSetup.js"
import { status } from "../../src/tools/status.js"
import { webLogin, webNewThread } from "../support/fossilServer.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { closeHookWorld, makeHookedWorld, type HookWorld } from "./hookWorld.js"

// Issue 13 item 6: disk is bounded. file_size bounds each file the process writes, and the
// watcher's own stdout.log and stderr.log too, which keep their ends as the kept logs do; status
// shows the space each workspace takes.

describe("a bounded log", () => {
  it("never passes its bound and keeps the end of what was written", () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-boundedlog-"))
    try {
      const file = Path.join(dir, "stdout.log")
      const log = new BoundedLog(Fs.openSync(file, "w+"), 1000)
      let all = ""
      for (let i = 0; i < 500; i++) {
        const line = `line ${i} ${"y".repeat(i % 37)}\n`
        all += line
        log.write(Buffer.from(line))
        expect(Fs.statSync(file).size).toBeLessThanOrEqual(1000)
      }
      // one chunk larger than the bound
      const big = `${"z".repeat(3000)}the end\n`
      all += big
      log.write(Buffer.from(big))
      Fs.closeSync(log.fd)
      const kept = Fs.readFileSync(file, "utf8")
      expect(kept.length).toBeGreaterThan(0)
      expect(kept.length).toBeLessThanOrEqual(1000)
      expect(all.endsWith(kept)).toBe(true)
      // no bound: all of it
      const whole = new BoundedLog(Fs.openSync(Path.join(dir, "whole.log"), "w+"), undefined)
      whole.write(Buffer.from(all))
      Fs.closeSync(whole.fd)
      expect(Fs.readFileSync(Path.join(dir, "whole.log"), "utf8")).toBe(all)
    } finally {
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})

let world: HookWorld
beforeAll(async () => {
  const made = await makeHookedWorld()
  world = made.world
  expect(made.installed.stopped).toEqual({ reason: "completed" })
}, 120_000)
afterAll(() => closeHookWorld(world))

describe("a run under file_size", () => {
  it("leaves stdout.log and stderr.log within file_size, each ending as the stream ended; status shows the workspace's space", async () => {
    const alice = await webLogin(world.server.url, users.admin.login, users.admin.password)
    // 4 MiB on stdout and 1 MiB on stderr, under file_size 64K
    const script = "i=0; while [ $i -lt 64 ]; do head -c 65536 /dev/zero | tr '\\0' x; i=$((i+1)); done; echo; echo the last line; " +
      "head -c 1048576 /dev/zero | tr '\\0' e >&2; echo the last error >&2"
    const run = await webNewThread(world.server, alice, {
      title: "a loud run",
      text: world.runText(shellRun(world, script, { keep: { stdout: "4K", stderr: "4K", stdout_when: "always" } }, { limits: { wall: "2m", file_size: "64K" } }))
    })
    const replies = await world.waitEnded(run, 90_000)
    expect(replies.find((m) => m.kind === "ended")?.content).toEqual({ outcome: "exited", exit: 0 })
    const workspace = Path.join(world.root, "work", run)
    for (const [name, last] of [["stdout.log", "the last line\n"], ["stderr.log", "the last error\n"]] as const) {
      const file = Path.join(workspace, name)
      const size = Fs.statSync(file).size
      expect(size, name).toBeLessThanOrEqual(64 * 1024)
      expect(size, name).toBeGreaterThan(16 * 1024)
      const text = Fs.readFileSync(file, "utf8")
      expect(text.slice(-40), name).toContain(last)
      expect(text.endsWith(last), name).toBe(true)
    }

    const sizes = workspaceSizes(world.root)
    const mine = sizes.find((w) => w.run === run)
    expect(mine).toMatchObject({ path: workspace, complete: true })
    expect(mine!.bytes).toBeGreaterThan(2 * 16 * 1024)
    expect(mine!.bytes).toBeLessThan(1024 * 1024)
    const answer = await world.call(status, { root: world.root }, { as: users.stranger.login })
    expect(answer.output?.workspaces?.find((w) => w.run === run)).toMatchObject({ path: workspace, complete: true })
    // the walk is bounded: past its bound it says so
    expect(workspaceSizes(world.root, { entries: 1, ms: 1000 }).some((w) => !w.complete)).toBe(true)
  }, 180_000)
})
