import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { make } from "../../layers/BwrapSandbox.js"
import type { LaunchResult } from "../../services/SandboxLauncher.js"
import { decode, makeRoot, shellSpec } from "./support.js"

const { root, ws, care } = makeRoot("limits")
afterAll(() => Fs.rmSync(root, { recursive: true, force: true }))
const launcher = make()
const elapsed = (r: LaunchResult) => (r.endedAt - r.startedAt) / 1000

describe("limits end a real process with budget naming the limit (processes ends none)", () => {
  it.live("the host provides every limit here", () =>
    Effect.gen(function*() {
      const caps = yield* launcher.capabilities
      expect(caps).toMatchObject({ sandbox: true, wall: true, cpu: true, file_size: true, processes: true, memory: true })
    }))

  it.live("cpu, processes, file_size, memory and wall, all at once, while a normal run beside them finishes", () =>
    Effect.gen(function*() {
      const [cpu, processes, fileSize, memory, wall, normal] = yield* Effect.all([
        launcher.run(shellSpec(ws, care, "while :; do :; done", { limits: { cpuSeconds: 1, wallSeconds: 20 } })),
        launcher.run(shellSpec(ws, care, "for i in $(seq 40); do sleep 30 & done; wait", { limits: { processes: 8, wallSeconds: 20 } })),
        launcher.run(shellSpec(ws, care, "exec head -c 5000000 /dev/zero > big", { limits: { fileSizeBytes: 1 << 20, wallSeconds: 20 } })),
        launcher.run(shellSpec(ws, care, "python3 -c 'b = b\"x\" * (256 << 20); print(len(b))'", {
          limits: { memoryBytes: 48 << 20, wallSeconds: 20 }
        })),
        launcher.run(shellSpec(ws, care, "sleep 30", { limits: { wallSeconds: 1 } })),
        launcher.run(shellSpec(ws, care, "for i in 1 2 3 4 5; do echo $i; done; sleep 1.5; echo done", {
          limits: { wallSeconds: 20, processes: 10, memoryBytes: 64 << 20, cpuSeconds: 5, fileSizeBytes: 1 << 20 }
        }))
      ], { concurrency: "unbounded" })

      expect(cpu.ending).toEqual({ outcome: "budget", limit: "cpu", exit: 128 + 24 })
      expect(elapsed(cpu)).toBeLessThan(10)

      // past processes the shell's fork fails and dash gives up: it ends as dash ends, well before wall
      expect(processes.ending).toEqual({ outcome: "exited", exit: 2 })
      expect(decode(processes.stderr.tail)).toMatch(/fork/i)
      expect(elapsed(processes)).toBeLessThan(10)

      expect(fileSize.ending).toEqual({ outcome: "budget", limit: "file_size", exit: 128 + 25 })
      expect(Fs.statSync(Path.join(ws, "big")).size).toBe(1 << 20)

      expect(memory.ending).toEqual({ outcome: "budget", limit: "memory", exit: 128 + 9 })

      expect(wall.ending).toMatchObject({ outcome: "budget", limit: "wall" })
      expect(elapsed(wall)).toBeGreaterThanOrEqual(1)
      expect(elapsed(wall)).toBeLessThan(5)

      expect(normal.ending).toEqual({ outcome: "exited", exit: 0 })
      expect(decode(normal.stdout.tail)).toBe("1\n2\n3\n4\n5\ndone\n")
    }))

  it.live("a limit the host cannot provide is refused before launch (refusal 6)", () =>
    Effect.gen(function*() {
      const noMemory = make({ prlimit: "/nonexistent/prlimit" })
      const e = yield* noMemory.check(shellSpec(ws, care, "true", { limits: { cpuSeconds: 1 } })).pipe(Effect.flip)
      expect(e._tag).toBe("LimitUnavailable")
      if (e._tag === "LimitUnavailable") expect(e.which).toBe("cpu")
    }))
})
