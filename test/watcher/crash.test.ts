import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CareDirectoryFs from "../../layers/CareDirectoryFs.js"
import * as FossilReceipts from "../../layers/FossilReceipts.js"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { recoverRun, type Recovered } from "../../src/node/Recovery.js"
import { readMessage } from "../../src/protocol/Envelope.js"
import { crashPoints, type CrashPoint } from "../../src/watcher/Watcher.js"
import { repeats, timeoutFor } from "../support/crashRepeats.js"
import { addUsers, fossil } from "../support/fossilServer.js"
import { makeNodeWorld, shellRun, users, type NodeWorld } from "../support/nodeWorld.js"

// SIGKILL the watcher at each point of a run's life; after recovery every run has exactly one
// started and one ended from the node user, and its process was launched at most once. Most of the
// points are fixed places in the watcher's code, the same each time: three repetitions each. At
// writing-ended the watcher dies 30 ms into its write of ended, which has landed or not: a race,
// repeated more often. Killed at any moment after its process exited (exited, before-ended,
// writing-ended), the run is answered with its real exit (7), which bubblewrap kept in the run's
// status file, never lost. Killed once its sandbox was made and before started (launched), the
// watcher leaves its cgroup behind: the next watcher mends it and runs the run.

const repeatsAt = (point: CrashPoint) => repeats(point === "writing-ended" ? 6 : 3)
let world: NodeWorld
beforeAll(async () => {
  world = await makeNodeWorld()
  // the points run at once, and a node keeps one run per process user: each point has its own user
  await addUsers(world.repository, [...crashPoints.map((point) => ({ login: processUserOf(point), capabilities: "oi", password: `${point}-pw` })),
    { login: "crash-again", capabilities: "oi", password: "again-pw" }, { login: "crash-verdict", capabilities: "oi", password: "verdict-pw" }])
}, 120_000)
afterAll(async () => {
  await world?.close()
})

const recover = (run: string) =>
  recoverRun(world.config, run).pipe(
    Effect.provide(Layer.mergeAll(
      CareDirectoryFs.layer({ root: world.root }),
      FossilRepository.layer({ path: world.repository }),
      FossilReceipts.layer({ path: world.repository })
    ))
  )

/** Recovery as a node coming back up does it: wait out a live holder, hand on a run never started. */
const recoverFully = (run: string): Effect.Effect<Recovered, unknown> =>
  Effect.gen(function*() {
    for (let i = 0; i < 200; i++) {
      const recovered = yield* recover(run)
      if (recovered === "alive") {
        yield* Effect.sleep(50)
        continue
      }
      if (recovered === "not-started") yield* Effect.promise(() => world.watch(run))
      return recovered
    }
    return yield* Effect.die(new Error(`run ${run} stayed in a watcher's care`))
  })

const reports = async (run: string) =>
  (await world.thread(run)).flatMap((post) => {
    const reading = readMessage(post.text)
    return reading._tag === "Message" && reading.re === run && post.sender === users.node.login ? [reading.kind] : []
  })

/** the run's ended content, and whether its kept logs (a plain post of the node user's) were written */
const endedOf = async (run: string) => {
  const thread = await world.thread(run)
  const ended = thread.flatMap((post) => {
    const reading = readMessage(post.text)
    return reading._tag === "Message" && reading.re === run && reading.kind === "ended" ? [reading.content] : []
  })
  const kept = thread.some((post) => post.sender === users.node.login && post.text.includes("its last words"))
  return { ended, kept }
}

/** the points after the process exited: the run's real exit is known whatever happens after */
const exitKnown: ReadonlyArray<CrashPoint> = ["exited", "before-ended", "writing-ended"]

const launches = (run: string) => {
  try {
    return Fs.readFileSync(Path.join(world.root, "work", run, "launches"), "utf8").split("\n").filter((l) => l !== "").length
  } catch {
    return 0
  }
}

const processUserOf = (point: CrashPoint) => `crash-${point}`

/**
 * A run of `user` that counts its launches; its workspace a directory only, since nothing here looks
 * for trunk's files in it (a fossil tarball, a tar and a gzip less for each of the many crashes).
 */
const countingRun = (user: string) => shellRun(world, "", {
  user,
  command: ["sh", "-c", "echo launched >> $$workspace$$/launches; echo its last words; sleep 0.3; exit 7"]
}, { workspace: [{ step: "directory", at: "$$root$$/work/$$run$$" }] })

const crashOnce = (point: CrashPoint) =>
  Effect.gen(function*() {
    const run = yield* Effect.promise(() => world.post(countingRun(processUserOf(point))))
    const crashed = yield* Effect.promise(() => world.watch(run, { OCX2_CRASH_AT: point }))
    const recovered = yield* recoverFully(run)
    return {
      run, crashed, recovered, reports: yield* Effect.promise(() => reports(run)), launches: launches(run),
      ended: yield* Effect.promise(() => endedOf(run))
    }
  })

// the points at once: each its own process user; real processes and real time
describe.concurrent("a watcher killed at any point", () => {
  it.live.each(crashPoints)(
    `SIGKILLed %s, again and again: exactly one started and one ended, never launched twice`,
    (point) => Effect.gen(function*() {
      const outcomes = []
      for (let i = 0; i < repeatsAt(point); i++) outcomes.push(yield* crashOnce(point))
      for (const outcome of outcomes) {
        const log = (() => { try { return Fs.readFileSync(Path.join(world.root, "care", `${outcome.run}.log`), "utf8") } catch { return "" } })()
        expect(outcome.crashed.signal, log).toBe("SIGKILL")
        expect(outcome.reports.sort()).toEqual(["ended", "started"])
        expect(outcome.launches).toBeLessThanOrEqual(1)
      }
      // what each point leaves for recovery
      const recovered = new Set(outcomes.map((o) => o.recovered))
      if (point === "locked" || point === "launched") expect([...recovered]).toEqual(["not-started"])
      if (point === "started" || point === "running") expect([...recovered]).toEqual(["lost"])
      if (point === "exited" || point === "before-ended") expect([...recovered]).toEqual(["exit-kept"])
      if (point === "locked" || point === "launched") expect(outcomes.every((o) => o.launches === 1)).toBe(true)
      if (point === "started") expect(outcomes.every((o) => o.launches === 0)).toBe(true)
      // the real exit and its kept logs, every time, wherever after the exit the watcher died
      if (exitKnown.includes(point)) {
        for (const outcome of outcomes) expect(outcome.ended).toEqual({ ended: [{ outcome: "exited", exit: 7 }], kept: true })
      }
      if (point === "launched") {
        for (const outcome of outcomes) expect(outcome.ended).toEqual({ ended: [{ outcome: "exited", exit: 7 }], kept: true })
      }
    }),
    timeoutFor(3, 240_000)
  )
})

describe("a watcher started again for a run whose watcher was killed while it ran", () => {
  it.live("finds the run's lock free and answers it lost itself, in Life.decide's words", () => Effect.gen(function*() {
    const run = yield* Effect.promise(() => world.post(countingRun("crash-again")))
    expect((yield* Effect.promise(() => world.watch(run, { OCX2_CRASH_AT: "running" }))).signal).toBe("SIGKILL")
    expect(yield* Effect.promise(() => world.watch(run))).toEqual({ code: 0, signal: null })
    const log = Fs.readFileSync(Path.join(world.root, "care", `${run}.log`), "utf8")
    expect(log).toMatch(/started counts and no watcher holds the run: answering lost/)
    const ended = (yield* Effect.promise(() => world.thread(run))).flatMap((post) => {
      const reading = readMessage(post.text)
      return reading._tag === "Message" && reading.re === run && reading.kind === "ended" ? [reading.content] : []
    })
    expect(ended).toEqual([{ outcome: "lost", note: "its watcher ended without writing ended" }])
    expect((yield* Effect.promise(() => reports(run))).sort()).toEqual(["ended", "started"])
    // killed "running", the watcher may take its sandbox down before the shell's first line (as
    // the other kills at that point allow); never launched twice: the second watcher launches nothing
    expect(launches(run)).toBeLessThanOrEqual(1)
  }), 120_000)
})

describe("a build whose watcher was killed after its process exited", () => {
  it.live("is answered with its exit, its kept logs and its ci verdict on the check-in, once", () => Effect.gen(function*() {
    const run = yield* Effect.promise(() => world.post(shellRun(world, "echo building; exit 3", { user: "crash-verdict", verdict: true, cwd: "$$workspace$$" })))
    expect((yield* Effect.promise(() => world.watch(run, { OCX2_CRASH_AT: "before-ended" }))).signal).toBe("SIGKILL")
    expect(yield* recoverFully(run)).toBe("exit-kept")
    expect((yield* Effect.promise(() => endedOf(run))).ended).toEqual([{ outcome: "exited", exit: 3 }])
    expect((yield* Effect.promise(() => world.thread(run))).some((post) => post.sender === users.node.login && post.text.includes("building"))).toBe(true)
    const tags = yield* Effect.promise(() => fossil(["tag", "list", "--raw", world.trunk, "-R", world.repository]))
    expect(tags).toContain(`ci=fail: exit 3 (against ${run})`)
    // a second recovery finds it ended and writes nothing
    expect(yield* recoverFully(run)).toBe("ended")
    expect((yield* Effect.promise(() => reports(run))).sort()).toEqual(["ended", "started"])
  }), 120_000)
})
