import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Ref from "effect/Ref"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { InvalidLaunchSpec, LaunchFailed, type LaunchError } from "../../services/SandboxLauncher.js"
import { readMessage } from "../../src/protocol/Envelope.js"
import { refusal } from "../../src/protocol/Refusals.js"
import { maxArgumentBytes } from "../../src/sandbox/SpecCheck.js"
import { launchOrRefuse, sortLaunchFailure } from "../../src/watcher/LaunchFailures.js"
import { makeNodeWorld, shellRun, users, type NodeWorld } from "../support/nodeWorld.js"

// A launch that fails ends its run (DECISIONS 17): a cause that will happen again is the run's
// refusal, at once and once; a cause that may pass is tried again, a bounded number of times, then
// refused with it. Before, such a run got neither started nor ended, and its watcher was started
// again about once a second for good.

describe("a launch's failure, sorted", () => {
  it("a cause that will happen again is the run's refusal; one that may pass is tried again", () => {
    expect(sortLaunchFailure(new LaunchFailed({ step: "spawn", reason: "spawn E2BIG", code: "E2BIG" })))
      .toEqual({ _tag: "Refuse", refusal: refusal(2, "process.command: its command and environment are more than Linux passes to a program (launch failed at spawn: spawn E2BIG)") })
    expect(sortLaunchFailure(new LaunchFailed({ step: "spawn", reason: "spawn ENOEXEC", code: "ENOEXEC" })))
      .toMatchObject({ _tag: "Refuse", refusal: { number: 6 } })
    expect(sortLaunchFailure(new InvalidLaunchSpec({ key: "cwd", reason: "is not absolute" })))
      .toEqual({ _tag: "Refuse", refusal: refusal(2, "cwd: is not absolute") })
    for (const code of ["EEXIST", "ENOSPC", "EAGAIN", "ENOMEM", "EMFILE", undefined]) {
      expect(sortLaunchFailure(new LaunchFailed({ step: "cgroups", reason: "no", ...(code === undefined ? {} : { code }) }))._tag).toBe("Again")
    }
  })

  const failing = (causes: ReadonlyArray<LaunchError | "ok">) =>
    Effect.gen(function*() {
      const tries = yield* Ref.make(0)
      const start = Effect.flatMap(Ref.getAndUpdate(tries, (n) => n + 1), (n) => {
        const cause = causes[Math.min(n, causes.length - 1)]!
        return cause === "ok" ? Effect.succeed("launched") : Effect.fail(cause)
      })
      const logged: Array<string> = []
      const result = yield* launchOrRefuse(start, (line) => Effect.sync(() => void logged.push(line)), { again: 3, firstPauseMs: 5 })
      return { result, tries: yield* Ref.get(tries), logged }
    })

  it.live("a cause that passes: launched on a later try, each failed try logged", () =>
    Effect.gen(function*() {
      const full = new LaunchFailed({ step: "created_files", reason: "ENOSPC: no space left on device", code: "ENOSPC" })
      const { result, tries, logged } = yield* failing([full, full, "ok"])
      expect(result).toEqual(Either.right("launched"))
      expect(tries).toBe(3)
      expect(logged).toEqual([
        "the launch failed and is tried again: launch failed at created_files: ENOSPC: no space left on device",
        "the launch failed and is tried again: launch failed at created_files: ENOSPC: no space left on device"
      ])
    }))

  it.live("a cause that never passes: refused after the bounded tries, naming it", () =>
    Effect.gen(function*() {
      const { result, tries } = yield* failing([new LaunchFailed({ step: "cgroups", reason: "EAGAIN", code: "EAGAIN" })])
      expect(tries).toBe(4)
      expect(result).toEqual(Either.left(refusal(6, "the launch: failed 4 times, the last: launch failed at cgroups: EAGAIN")))
    }))

  it.live("a cause that will happen again: refused at the first try", () =>
    Effect.gen(function*() {
      const { result, tries } = yield* failing([new LaunchFailed({ step: "spawn", reason: "spawn E2BIG", code: "E2BIG" }), "ok"])
      expect(tries).toBe(1)
      expect(Either.isLeft(result)).toBe(true)
    }))
})

let world: NodeWorld
beforeAll(async () => {
  world = await makeNodeWorld()
}, 120_000)
afterAll(async () => {
  await world?.close()
})

/** the node user's messages in the run's thread, each kind with its content */
const answers = async (run: string) =>
  (await world.thread(run)).flatMap((post) => {
    const reading = readMessage(post.text)
    return reading._tag === "Message" && reading.re === run && post.sender === users.node.login ? [{ kind: reading.kind, content: reading.content }] : []
  })

const launchedAt = (run: string) => Fs.existsSync(Path.join(world.root, "work", run, "launched"))

describe("a run the kernel will never launch, through the real watcher and sandbox", () => {
  it("an argument past what Linux passes in one (900 KB) is refused naming it, once, and nothing runs", async () => {
    const big = "x".repeat(900 * 1024)
    const run = await world.post(shellRun(world, "", { command: ["sh", "-c", 'touch "$0/launched"', "$$workspace$$", big] }))
    expect(await world.watch(run)).toEqual({ code: 0, signal: null })
    expect(await answers(run)).toEqual([{
      kind: "ended",
      content: { outcome: "refused", note: `refusal 2: process.command[4]: is ${900 * 1024} bytes, more than the ${maxArgumentBytes} bytes Linux passes to a program in one argument (MAX_ARG_STRLEN)` }
    }])
    expect(launchedAt(run)).toBe(false)
    // a watcher started again for it finds it ended: nothing more is written
    expect(await world.watch(run)).toEqual({ code: 0, signal: null })
    expect((await answers(run)).length).toBe(1)
  }, 120_000)

  it("arguments each within the bound but more than Linux passes in all (spawn E2BIG) are refused naming process.command, once", async () => {
    const piece = "y".repeat(120 * 1024)
    const run = await world.post(shellRun(world, "", { command: ["sh", "-c", 'touch "$0/launched"', "$$workspace$$", ...Array.from({ length: 20 }, () => piece)] }))
    expect(await world.watch(run)).toEqual({ code: 0, signal: null })
    const answered = await answers(run)
    expect(answered.map((a) => a.kind)).toEqual(["ended"])
    expect(answered[0]!.content).toMatchObject({ outcome: "refused" })
    expect(String((answered[0]!.content as { note?: unknown }).note)).toMatch(/^refusal 2: process\.command: its command and environment are more than Linux passes to a program \(launch failed at spawn: .*E2BIG\)$/)
    expect(launchedAt(run)).toBe(false)
  }, 120_000)
})

describe("a run handed to a watcher while ROOT is short of room", () => {
  it("waits, holding it, with nothing of it made, and starts once there is room, answered once", async () => {
    const setting = Path.join(world.root, "settings", "min-free-space")
    Fs.mkdirSync(Path.dirname(setting), { recursive: true })
    // more than any disk here: ROOT is "low" for the watcher
    Fs.writeFileSync(setting, "1024T\n")
    try {
      const run = await world.post(shellRun(world, 'touch "$$workspace$$/launched"'))
      const watched = world.watch(run)
      const log = Path.join(world.root, "care", `${run}.log`)
      const held = () => (Fs.existsSync(log) && Fs.readFileSync(log, "utf8").includes("held back before its workspace is made: ")) || undefined
      const deadline = Date.now() + 90_000
      while (held() === undefined && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
      expect(held(), Fs.existsSync(log) ? Fs.readFileSync(log, "utf8") : "no log").toBe(true)
      expect(await answers(run)).toEqual([])
      expect(Fs.existsSync(Path.join(world.root, "work", run))).toBe(false)
      // room again: the same watcher goes on
      Fs.writeFileSync(setting, "0\n")
      expect(await watched).toEqual({ code: 0, signal: null })
      expect((await answers(run)).map((a) => [a.kind, (a.content as { outcome?: string }).outcome])).toEqual([["started", undefined], ["ended", "exited"]])
      expect(launchedAt(run)).toBe(true)
      expect(Fs.readFileSync(log, "utf8")).toMatch(/room on ROOT again: /)
    } finally {
      Fs.rmSync(setting, { force: true })
    }
  }, 150_000)
})
