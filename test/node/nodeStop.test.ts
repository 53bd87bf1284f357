import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { sparePid } from "../../src/care/SpareFiles.js"
import { pollersOfKind } from "../../src/node/HookInstall.js"
import { hook } from "../../src/tools/hook.js"
import { ensureStreamServer, runningServer } from "../../src/follow/StreamServer.js"
import { webLogin, webNewThread } from "../support/fossilServer.js"
import { users } from "../support/nodeWorld.js"
import { closeHookWorld, countingRuns, makeHookWorld, type HookWorld } from "./hookWorld.js"
import { startSupervisor, stopSupervisor, type RunningSupervisor } from "./supervisorWorld.js"

// Ending a node took five pids (poller, supervisor, stream server, spare, server), and the spare
// outlived the supervisor. `ocx2 supervise --node USER --stop`, the installed program, ends the
// node's resident processes in one call and leaves the watchers of running runs to answer them;
// a supervisor stopped by SIGTERM (as systemctl stop stops it) takes its spare with it.

let world: HookWorld
let supervisor: RunningSupervisor | undefined
beforeAll(async () => {
  world = await makeHookWorld({ fastHooks: false })
  const installed = await world.call(hook, { node: users.node.login, root: world.root, fast: true })
  expect(installed.stopped).toEqual({ reason: "completed" })
}, 120_000)
afterAll(async () => {
  await stopSupervisor(supervisor)
  for (const p of pollersOfKind(world.repository)) process.kill(p.pid, "SIGKILL")
  await closeHookWorld(world)
})

const alive = (pid: number | undefined): boolean => {
  if (pid === undefined) return false
  try {
    return Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8") !== ""
  } catch {
    return false
  }
}

const { counting, launched, holder } = countingRuns(() => world)

describe("a node's resident processes", () => {
  it("supervise --stop ends the supervisor, spare, stream server and poller in one call; a running run's watcher answers its run", async () => {
    supervisor = await startSupervisor(world)
    // a run still running when the node stops: its watcher goes on and answers it
    const alice = await webLogin(world.server.url, users.admin.login, users.admin.password)
    const run = await webNewThread(world.server, alice, { title: "runs through a stop", text: world.runText(counting("sleep 8")) })
    await world.waitFor("the run's launch", () => (launched(run) === 1 ? true : undefined), { run })
    const watcher = holder(run)
    // the spare that took the run is its watcher now: the next one, started after the hand-off
    const spare = await world.waitFor("a spare after the hand-off", () => {
      const pid = sparePid(world.root)
      return pid !== undefined && pid !== watcher && alive(pid) ? pid : undefined
    })
    const stream = await ensureStreamServer(world.root, Path.join(world.root, "current", "ocx2-cgi"))
    expect(stream).toBeGreaterThan(0)
    const streamPid = runningServer(world.root)!.pid
    const poller = pollersOfKind(world.repository).find((p) => p.kind === "node")
    expect(poller, "hook --fast started the node's poller").toBeDefined()

    const stop = ChildProcess.spawnSync(Path.join(world.root, "current", "ocx2-supervise"), ["--node", users.node.login, "--root", world.root, "--stop"], {
      cwd: "/", env: {}, encoding: "utf8", timeout: 120_000
    })
    expect(stop.status, stop.stderr).toBe(0)
    const lines = stop.stdout.trim().split("\n")
    expect(lines, stop.stdout).toContain(`ended the supervisor (pid ${supervisor.pid})`)
    // the spare went with the supervisor, or is ended by the call after it
    expect(lines.filter((l) => l.includes("spare")).every((l) => l === `ended the spare watcher (pid ${spare})`), stop.stdout).toBe(true)
    expect(lines).toContain(`ended the stream server (pid ${streamPid})`)
    expect(lines).toContain(`ended fast mode's poller (pid ${poller!.pid})`)
    expect(lines.at(-1)).toMatch(new RegExp(`^left 1 watcher of running runs alone \\(pid ${watcher}\\)`))
    expect([supervisor.pid, spare, streamPid, poller!.pid].map(alive)).toEqual([false, false, false, false])
    expect((await supervisor.exited).code).toBe(0)
    // the run is answered by its watcher, with no node around it
    const replies = (await world.waitEnded(run)).filter((m) => m.kind === "started" || m.kind === "ended")
    expect(replies.map((m) => m.kind)).toEqual(["started", "ended"])
  }, 240_000)

  it("a supervisor ended by SIGTERM, as systemctl stop ends it, takes its spare with it", async () => {
    supervisor = await startSupervisor(world)
    const spare = await world.waitFor("the supervisor's spare", () => (alive(sparePid(world.root)) ? sparePid(world.root) : undefined))
    await stopSupervisor(supervisor)
    await world.waitFor("the spare's end", () => (alive(spare) ? undefined : true))
    expect(alive(spare)).toBe(false)
  }, 240_000)
})
