import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as ReleaseRootFs from "../../layers/ReleaseRootFs.js"
import { ReleaseRoot } from "../../services/ReleaseRoot.js"
import { tempDir } from "./fakeCheckout.js"

// The service itself, on the real file system: what the tools rely on of it.

const withRoot = <A, E>(body: (root: string) => Effect.Effect<A, E, ReleaseRoot>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => tempDir("ocx2-release-root-")),
    (root) => body(root).pipe(Effect.provide(ReleaseRootFs.layer)),
    (root) => Effect.sync(() => Fs.rmSync(root, { recursive: true, force: true }))
  )

const makeRelease = (root: string, name: string) => {
  Fs.mkdirSync(Path.join(root, "staged", name), { recursive: true })
  Fs.writeFileSync(Path.join(root, "staged", name, "ocx2-hook"), `${name}\n`)
}

/** A separate process reading ROOT/ocx2-hook (through current) as fast as it can, for `ms`. */
const reader = (root: string, ms: number) =>
  Effect.async<{ ok: number; missing: number; seen: Array<string> }>((resume) => {
    const script = `
      const fs = require("node:fs"); const seen = new Set(); let ok = 0, missing = 0; const end = Date.now() + ${ms}
      process.stdout.write("reading\\n")
      while (Date.now() < end) {
        try { seen.add(fs.readFileSync(${JSON.stringify(Path.join(root, "ocx2-hook"))}, "utf8").trim()); ok++ } catch { missing++ }
      }
      process.stdout.write(JSON.stringify({ ok, missing, seen: [...seen].sort() }))`
    const child = spawn("node", ["-e", script], { stdio: ["ignore", "pipe", "inherit"] })
    let out = ""
    child.stdout.on("data", (chunk) => (out += chunk))
    child.on("close", () => resume(Effect.succeed(JSON.parse(out.slice(out.indexOf("\n") + 1)))))
  })

describe("ReleaseRootFs", () => {
  it.live("switching current never leaves a moment with no release, seen from another process", () =>
    withRoot((root) =>
      Effect.gen(function*() {
        const releases = yield* ReleaseRoot
        makeRelease(root, "aaaaaaaaaaaa")
        makeRelease(root, "bbbbbbbbbbbb")
        yield* releases.switchLink(root, "current", "staged/aaaaaaaaaaaa")
        yield* releases.switchLink(root, "ocx2-hook", "current/ocx2-hook")
        const reading = yield* Effect.fork(reader(root, 1500))
        yield* Effect.sleep("200 millis")
        for (let i = 0; i < 2000; i++) {
          yield* releases.switchLink(root, "current", i % 2 === 0 ? "staged/bbbbbbbbbbbb" : "staged/aaaaaaaaaaaa")
        }
        const seen = yield* reading
        expect(seen.missing).toBe(0)
        expect(seen.ok).toBeGreaterThan(100)
        expect(seen.seen).toEqual(["aaaaaaaaaaaa", "bbbbbbbbbbbb"])
        expect(Fs.readdirSync(root).sort()).toEqual(["current", "ocx2-hook", "staged"])
      })))

  it.live("reads what each link serves, and whether its release is there", () =>
    withRoot((root) =>
      Effect.gen(function*() {
        const releases = yield* ReleaseRoot
        makeRelease(root, "aaaaaaaaaaaa")
        yield* releases.switchLink(root, "current", "staged/aaaaaaaaaaaa")
        yield* releases.switchLink(root, "previous", "staged/cccccccccccc")
        expect(yield* releases.read(root)).toEqual({
          root,
          current: { name: "aaaaaaaaaaaa", present: true },
          previous: { name: "cccccccccccc", present: false }
        })
      })))

  it.live("the root's lock is held for the scope and refuses a second holder at once", () =>
    withRoot((root) =>
      Effect.gen(function*() {
        const releases = yield* ReleaseRoot
        const second = yield* Effect.scoped(Effect.gen(function*() {
          yield* releases.lock(root)
          return yield* Effect.exit(Effect.scoped(releases.lock(root)))
        }))
        expect(Exit.isFailure(second) && JSON.stringify(second.cause)).toContain("RootBusy")
        // released with its scope: taken again at once
        expect(Exit.isSuccess(yield* Effect.exit(Effect.scoped(releases.lock(root))))).toBe(true)
      })))

  it.live("the default root is read off the program's real path, through links", () =>
    withRoot((root) =>
      Effect.gen(function*() {
        const releases = yield* ReleaseRoot
        makeRelease(root, "aaaaaaaaaaaa")
        Fs.writeFileSync(Path.join(root, "staged", "aaaaaaaaaaaa", "ocx2"), "")
        yield* releases.switchLink(root, "current", "staged/aaaaaaaaaaaa")
        expect(yield* releases.rootOfProgram(Path.join(root, "current", "ocx2"))).toBe(root)
        expect(yield* releases.rootOfProgram(Path.join(root, "current", "missing"))).toBeUndefined()
        expect(yield* releases.rootOfProgram(undefined)).toBeUndefined()
      })))
})
