import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { make } from "../../layers/BwrapSandbox.js"
import { makeRoot, shellSpec } from "./support.js"

// A gated launch prepares the sandbox but runs nothing until released: the watcher writes
// started meanwhile, and a launch never released (started not written) never runs its program.

const { root, ws, care } = makeRoot("gate")
afterAll(() => Fs.rmSync(root, { recursive: true, force: true }))
const launcher = make()

describe("a gated launch", () => {
  it.live("runs its program only once released, and then gets its first lines", () =>
    Effect.gen(function*() {
      const marker = Path.join(ws, "gated-ran")
      const result = yield* Effect.scoped(
        Effect.gen(function*() {
          const h = yield* launcher.start({
            ...shellSpec(ws, care, `read line; echo "$line" > ${marker}`),
            stdin: { lines: ['{"run":"r","objective":"o"}'], keepOpen: false },
            gated: true
          })
          yield* Effect.sleep("300 millis")
          expect(Fs.existsSync(marker)).toBe(false)
          yield* h.release
          return yield* h.result
        })
      )
      expect(result.ending).toEqual({ outcome: "exited", exit: 0 })
      expect(Fs.readFileSync(marker, "utf8")).toBe('{"run":"r","objective":"o"}\n')
    }))

  it.live("never runs its program when the launch ends unreleased", () =>
    Effect.gen(function*() {
      const marker = Path.join(ws, "never-ran")
      const result = yield* Effect.scoped(
        Effect.gen(function*() {
          const h = yield* launcher.start({ ...shellSpec(ws, care, `touch ${marker}`), gated: true })
          yield* Effect.sleep("200 millis")
          yield* h.stop
          return yield* h.result
        })
      )
      expect(result.ending.outcome).toBe("stopped")
      expect(Fs.existsSync(marker)).toBe(false)
    }))
})
