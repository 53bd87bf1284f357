/**
 * The SandboxLauncher's contract, held by both layers: the live one (bubblewrap, its behaviour
 * written as a shell script) and the test one (the same behaviour scripted), so the two cannot drift.
 */
import * as Fs from "node:fs"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as BwrapSandbox from "../../layers/BwrapSandbox.js"
import * as TestSandboxLauncher from "../../layers/TestSandboxLauncher.js"
import type { LaunchSpec, SandboxLauncherService } from "../../services/SandboxLauncher.js"
import { decode, makeRoot, shellSpec } from "./support.js"

const { root, ws, care } = makeRoot("launcher-contract")
afterAll(() => Fs.rmSync(root, { recursive: true, force: true }))

/** each case: the live layer runs `script`; the test layer ends as `scripted` says */
const cases = {
  "exit 3": { script: "printf abcdefgh; printf 12345 >&2; exit 3", scripted: { ending: { exit: 3 }, stdout: "abcdefgh", stderr: "12345" } },
  "signal": { script: "kill -TERM $$", scripted: { ending: { signal: 15 } } },
  "session": { script: "cat >/dev/null; exit 5", scripted: { runs: "stdin closed", ending: { exit: 5 } } },
  "forever": { script: "echo ran; sleep 100", scripted: { runs: "stopped", stdout: "ran\n" } }
} satisfies Record<string, { script: string; scripted: TestSandboxLauncher.ScriptedLaunch }>
type Case = keyof typeof cases

const layers: Record<string, (which: Case) => SandboxLauncherService> = {
  live: () => BwrapSandbox.make(),
  test: (which) => TestSandboxLauncher.make({ launches: [cases[which].scripted] })
}
const spec = (which: Case, extra: Partial<LaunchSpec> = {}) => shellSpec(ws, care, cases[which].script, extra)

describe.each(Object.keys(layers))("the %s SandboxLauncher", (name) => {
  const launcher = layers[name]!

  it.live("ends with the exit code, 128+N for signal N, keeping the last `keep` bytes of each stream", () =>
    Effect.gen(function*() {
      const three = yield* launcher("exit 3").run(spec("exit 3", { keep: { stdout: 3, stderr: 100 } }))
      expect(three.ending).toEqual({ outcome: "exited", exit: 3 })
      expect([decode(three.stdout.tail), three.stdout.totalBytes]).toEqual(["fgh", 8])
      expect([decode(three.stderr.tail), three.stderr.totalBytes]).toEqual(["12345", 5])
      expect((yield* launcher("signal").run(spec("signal"))).ending).toEqual({ outcome: "exited", exit: 143 })
    }))

  it.live("a session ends once its stdin is closed; a line written after is refused", () =>
    Effect.scoped(Effect.gen(function*() {
      const running = yield* launcher("session").start(spec("session", { stdin: { lines: ["first"], keepOpen: true } }))
      yield* running.writeLine("second")
      yield* running.closeStdin
      expect((yield* running.result).ending).toEqual({ outcome: "exited", exit: 5 })
      expect((yield* running.writeLine("late").pipe(Effect.flip))._tag).toBe("StdinClosed")
      expect(yield* running.processIds).toEqual([])
    })))

  it.live("a gated launch runs nothing until released; stopped before, it printed nothing", () =>
    Effect.scoped(Effect.gen(function*() {
      const gated = yield* launcher("forever").start(spec("forever", { gated: true }))
      yield* gated.stop
      const result = yield* gated.result
      expect(result.ending.outcome).toBe("stopped")
      expect(result.stdout.totalBytes).toBe(0)
    })))

  it.live("released, it runs until stopped, and ends as stopped", () =>
    Effect.scoped(Effect.gen(function*() {
      const running = yield* launcher("forever").start(spec("forever", { gated: true }))
      yield* running.release
      yield* running.stop
      const result = yield* running.result
      expect(result.ending.outcome).toBe("stopped")
    })))

  it.live("check refuses a path of OCX's own (refusal 7) and a malformed spec, launching nothing", () =>
    Effect.gen(function*() {
      const l = launcher("exit 3")
      const base = spec("exit 3")
      const own = yield* l.check({ ...base, sandbox: { ...base.sandbox!, readWrite: [care] } }).pipe(Effect.flip)
      expect(own._tag).toBe("SandboxPathRefused")
      const form = yield* l.run({ ...base, command: [] }).pipe(Effect.flip)
      expect(form).toMatchObject({ _tag: "InvalidLaunchSpec", key: "command" })
    }))
})

describe("the test SandboxLauncher", () => {
  it.live("records every spec it was given, and refuses a limit the scripted host lacks", () =>
    Effect.gen(function*() {
      const launcher = TestSandboxLauncher.make({
        capabilities: { memory: false, notes: ["memory: no memory controller"] },
        launches: [{ ending: { limit: "wall" } }]
      })
      const budget = yield* launcher.run(spec("exit 3", { limits: { wallSeconds: 1 } }))
      expect(budget.ending).toEqual({ outcome: "budget", limit: "wall", exit: undefined })
      const refused = yield* launcher.run(spec("exit 3", { limits: { memoryBytes: 1 << 20 } })).pipe(Effect.flip)
      expect(refused.message).toBe("this host cannot provide memory: memory: no memory controller")
      expect(launcher.launched.map((l) => l.spec.limits)).toEqual([{ wallSeconds: 1 }])
    }))
})
