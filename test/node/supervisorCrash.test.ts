import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { composeForumPost } from "../../src/fossil/Artifact.js"
import { hook } from "../../src/tools/hook.js"
import { addUsers, cloneAs, pushArtifacts, webLogin, webNewThread, type TestUser, type WebSession } from "../support/fossilServer.js"
import { repeats, timeoutFor } from "../support/crashRepeats.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { closeHookWorld, makeHookWorld, sleep, waitFor, type HookWorld } from "./hookWorld.js"
import { answeredLostBy, startSupervisor, supervisorLog, stopSupervisor, type RunningSupervisor, withoutSpare } from "./supervisorWorld.js"

// The supervisor SIGKILLed at chosen moments and started again, with a real fossil server and real
// bubblewrap sandboxes: every run ends with exactly one started and one ended from the node user,
// none is launched twice, none is left unanswered. And a watcher SIGKILLed while the supervisor
// runs is answered lost with no restart, in one world. Where the moment of the kill varies, the
// repetitions sweep it (a hand-off: 0 to 120 ms after the receipt; a burst of 10 runs: 100 ms to
// 1 s into it); where it is a fixed point (the lock just taken, a process running), a few suffice.
// Each run costs a watcher and a sandbox, so the repetitions are kept to what they prove, and each
// run to what they count (a workspace with no files of trunk in it).

/** kills along a hand-off, `handOffStep` ms apart from the receipt on */
const handOffs = repeats(5)
const handOffStep = 30
/** kills just after the watcher took the run's lock */
const whileStarting = repeats(4)
/** bursts of `burstSize` runs, the kill `burstStep` ms later into each burst */
const bursts = repeats(4)
const burstStep = 300
/**
 * A burst's runs and the process users they share: 10 runs of 4 users queue 2 or 3 deep, as 20 of
 * 8 did, so a kill finds runs handed, running and waiting for their user alike, at half the watchers.
 */
const burstSize = 10
const burstQueues = 4
/** watchers killed while their process runs */
const killedWatchers = repeats(3)
/** watchers killed after their hand-off, just before they take the run's lock (a fixed point) */
const handedKills = repeats(4)
/** process users of their own for the bursts, so that a burst runs side by side */
const burstUsers: ReadonlyArray<TestUser> = ["b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8"].map((login) => ({ login, capabilities: "oi", password: `${login}-pw` }))

let world: HookWorld
let alice: WebSession
let clone: string
let supervisor: RunningSupervisor | undefined
beforeAll(async () => {
  world = await makeHookWorld({ fastHooks: false })
  await addUsers(world.repository, burstUsers)
  const installed = await world.call(hook, { node: users.node.login, root: world.root })
  expect(installed.stopped).toEqual({ reason: "completed" })
  alice = await webLogin(world.server.url, users.admin.login, users.admin.password)
  clone = await cloneAs(world.server.url, users.admin.login, users.admin.password, Path.join(world.dir, "alice.fossil"))
  supervisor = await startSupervisor(world)
}, 120_000)
afterAll(async () => {
  await stopSupervisor(supervisor)
  await closeHookWorld(world)
})

// the workspace a directory only: what these cases count needs no files of trunk (a fossil tarball,
// a tar and a gzip less for each run)
const counting = (user: string, script = "true") =>
  shellRun(world, `echo x >> $$workspace$$/launched; ${script}`, { user }, { workspace: [{ step: "directory", at: "$$root$$/work/$$run$$" }] })
const launched = (run: string) => {
  try {
    return Fs.readFileSync(Path.join(world.root, "work", run, "launched"), "utf8").split("\n").filter((l) => l.length > 0).length
  } catch {
    return 0
  }
}

/** SIGKILLs the supervisor and starts it again (as Restart=always would) */
const killAndRestart = async () => {
  process.kill(supervisor!.pid, "SIGKILL")
  await supervisor!.exited
  supervisor = await startSupervisor(world)
}

/** each run: exactly one started and one ended (exited 0) from the node user, launched once */
const expectEachOnce = async (runs: ReadonlyArray<string>, settle = true) => {
  for (const run of runs) await world.waitEnded(run, 90_000)
  if (settle) await sleep(1000) // a second answer, or a second launch, would come now
  for (const run of runs) {
    const replies = (await world.replies(run)).filter((m) => m.kind === "started" || m.kind === "ended")
    expect(replies.map((m) => [m.kind, m.sender, m.kind === "ended" ? m.content : undefined]), run)
      .toEqual([["started", "lab", undefined], ["ended", "lab", { outcome: "exited", exit: 0 }]])
    expect(launched(run), run).toBe(1)
  }
}

describe("the supervisor SIGKILLed and started again", () => {
  it("while it hands a run off: each run once", async () => {
    const runs: Array<string> = []
    for (let i = 0; i < handOffs; i++) {
      const user = burstUsers[i % burstUsers.length]!.login
      const run = await webNewThread(world.server, alice, { title: `handing ${i}`, text: world.runText(counting(user)) })
      runs.push(run)
      // from the receipt, a moment along its hand-off: the round, the spare asked, a watcher started
      await sleep(i * handOffStep)
      await killAndRestart()
    }
    await expectEachOnce(runs)
  }, timeoutFor(5, 300_000))

  it("while its watcher writes started: each run once", async () => {
    const runs: Array<string> = []
    for (let i = 0; i < whileStarting; i++) {
      const user = burstUsers[i % burstUsers.length]!.login
      const run = await webNewThread(world.server, alice, { title: `starting ${i}`, text: world.runText(counting(user)) })
      runs.push(run)
      // the watcher holds the run: what it does next is write started
      await world.waitFor("a watcher takes the run's lock", () => (Fs.existsSync(Path.join(world.root, "care", `${run}.lock`)) ? true : undefined), { ms: 30_000, every: 5, run })
      await killAndRestart()
    }
    await expectEachOnce(runs)
  }, timeoutFor(4, 300_000))

  it(`during a burst of ${burstSize} runs: each run once`, async () => {
    const all: Array<string> = []
    for (let i = 0; i < bursts; i++) {
      const artifacts = Array.from({ length: burstSize }, (_, k) => composeForumPost({
        date: new Date(), user: users.admin.login, title: `burst ${i}.${k}`,
        text: world.runText(counting(burstUsers[k % burstQueues]!.login))
      }))
      await pushArtifacts(clone, users.admin.login, artifacts)
      await sleep(100 + i * burstStep)
      await killAndRestart()
      all.push(...artifacts.map((a) => a.hash))
      // checked now, and all of them once more at the end, when a second answer would long have come
      await expectEachOnce(artifacts.map((a) => a.hash), false)
    }
    await expectEachOnce(all)
  }, timeoutFor(4, 600_000))
})

describe("a watcher SIGKILLed while the supervisor runs", () => {
  it("is answered lost, with no restart, each time", async () => {
    const pid = supervisor!.pid
    for (let i = 0; i < killedWatchers; i++) {
      const run = await webNewThread(world.server, alice, { title: `killed ${i}`, text: world.runText(counting(users.builder.login, "sleep 60")) })
      await world.waitFor("the supervisor launches the run's watcher, once", () => (launched(run) === 1 ? true : undefined), { ms: 30_000, every: 20, run })
      const watcher = Number(Fs.readFileSync(Path.join(world.root, "care", `${run}.lock`), "utf8").trim())
      process.kill(watcher, "SIGKILL")
      const replies = (await world.waitEnded(run, 90_000)).filter((m) => m.kind === "started" || m.kind === "ended")
      expect(replies.map((m) => [m.kind, m.sender, m.kind === "ended" ? (m.content as { outcome: string }).outcome : ""]))
        .toEqual([["started", "lab", ""], ["ended", "lab", "lost"]])
      // its line is written once the run's process user has been looked at too
      // (a loaded machine may take a while to hand the user's next waiting run, which comes first)
      expect(await waitFor(() => answeredLostBy(world, pid, run) || undefined, 30_000, 50),
        JSON.stringify(supervisorLog(world).filter((l) => l.run === run || l.did.some((d) => d.includes(run))))).toBe(true)
    }
    expect(supervisor!.pid).toBe(pid)
  }, timeoutFor(3, 300_000))
})

describe("a watcher SIGKILLed after its hand-off, before it took the run's lock", () => {
  it("has its run handed again by the supervisor, which starts and ends once, each time", async () => {
    // watchers the supervisor starts (no spare: a spare's environment is its own) SIGKILL themselves
    // just before they take the run's lock, the first one only: the one that removes the file
    const spareBack = await withoutSpare(world.root)
    const once = Path.join(world.dir, "crash-once")
    await stopSupervisor(supervisor)
    supervisor = await startSupervisor(world, { OCX2_CRASH_AT: "handed", OCX2_CRASH_ONCE: once })
    const pid = supervisor.pid
    try {
      const runs: Array<string> = []
      for (let i = 0; i < handedKills; i++) {
        Fs.writeFileSync(once, "")
        const user = burstUsers[i % burstUsers.length]!.login
        const run = await webNewThread(world.server, alice, { title: `handed ${i}`, text: world.runText(counting(user)) })
        runs.push(run)
        // a watcher took the file and crashed: the supervisor saw it gone, and the run handed again
        await world.waitFor("the watcher that crashed has taken the once-file (gone)", () => (Fs.existsSync(once) ? undefined : true), { ms: 30_000, every: 20, run })
        expect(await waitFor(() => supervisorLog(world).some((l) => l.pid === pid && l.run === run &&
          l.did[0]?.startsWith("its watcher was handed the run and ended before it took the run's lock: ") === true &&
          l.did.some((d) => d.startsWith("the run is with the watcher "))) || undefined, 30_000, 50),
          JSON.stringify(supervisorLog(world).filter((l) => l.run === run || l.did.some((d) => d.includes(run))))).toBe(true)
        await expectEachOnce([run], false)
      }
      await expectEachOnce(runs)
      expect(supervisor.pid).toBe(pid)
    } finally {
      Fs.rmSync(once, { force: true })
      spareBack()
      await stopSupervisor(supervisor)
      supervisor = await startSupervisor(world)
    }
  }, timeoutFor(4, 300_000))
})
