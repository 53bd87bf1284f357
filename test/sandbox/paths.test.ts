import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { make } from "../../layers/BwrapSandbox.js"
import type { LaunchSpec, SandboxSpec } from "../../services/SandboxLauncher.js"
import { baseSandbox, gid, makeRoot, uid } from "./support.js"

// ROOT holds care, settings, the release root (its releases and every workspace), a clone, a passwords file
const { root, care } = makeRoot("paths")
const settings = Path.join(root, "settings")
const releaseRoot = Path.join(root, "release")
const release = Path.join(releaseRoot, "releases", "v1")
const ws = Path.join(releaseRoot, "workspaces", "run1")
const clone = Path.join(root, "clone.fossil")
const passwords = Path.join(root, "passwords")
const outside = Path.join(root, "outside")
for (const d of [settings, release, ws, outside, Path.join(ws, "sub"), Path.join(care, "sub")]) Fs.mkdirSync(d, { recursive: true })
for (const d of [releaseRoot, Path.join(releaseRoot, "workspaces"), Path.join(releaseRoot, "releases"), release]) Fs.chmodSync(d, 0o755)
Fs.chownSync(ws, uid, gid)
Fs.writeFileSync(clone, "")
Fs.writeFileSync(passwords, "")
Fs.symlinkSync(care, Path.join(outside, "to-care"))
Fs.symlinkSync(settings, Path.join(ws, "to-settings"))
Fs.symlinkSync(passwords, Path.join(outside, "to-passwords"))
afterAll(() => Fs.rmSync(root, { recursive: true, force: true }))

const launcher = make()
const spec = (sandbox: Partial<SandboxSpec>): LaunchSpec => ({
  command: ["sh", "-c", "touch launched"],
  env: { PATH: "/usr/bin:/bin" },
  cwd: ws,
  sandbox: {
    ...baseSandbox(ws, care),
    release,
    ownPaths: [care, settings, releaseRoot, clone, passwords],
    ...sandbox
  },
  limits: {},
  stdin: { lines: [], keepOpen: false },
  keep: { stdout: 1024, stderr: 1024 }
})

const refusal = (sandbox: Partial<SandboxSpec>) => launcher.check(spec(sandbox)).pipe(Effect.flip)

describe("refusal 7: sandbox paths against OCX's own paths, links followed", () => {
  it.live("refuses a path that is, holds or lies within an own path, naming it", () =>
    Effect.gen(function*() {
      const cases: Array<[Partial<SandboxSpec>, string, RegExp]> = [
        [{ readOnly: [care] }, care, /is OCX's own/],
        [{ readOnly: [root] }, root, /holds OCX's own/],
        [{ readWrite: [Path.join(care, "sub")] }, Path.join(care, "sub"), /lies within OCX's own/],
        [{ readOnly: [Path.join(outside, "to-care")] }, Path.join(outside, "to-care"), /is OCX's own/],
        [{ homes: [Path.join(outside, "to-passwords")] }, Path.join(outside, "to-passwords"), /is OCX's own/],
        [{ readOnly: [Path.join(ws, "to-settings")] }, Path.join(ws, "to-settings"), /is OCX's own/],
        [{ readOnly: [clone] }, clone, /is OCX's own/],
        [{ readWrite: [release] }, release, /lies within OCX's own/],
        [{ homes: [release] }, release, /lies within OCX's own/],
        [{ readOnly: [Path.join(releaseRoot, "workspaces")] }, Path.join(releaseRoot, "workspaces"), /lies within/],
        [{ readOnly: ["/proc"] }, "/proc", /\/proc/],
        [{ readOnly: ["/proc/self"] }, "/proc/self", /\/proc/],
        [{ readOnly: [Path.join(outside, "missing")] }, Path.join(outside, "missing"), /does not exist/]
      ]
      for (const [sandbox, path, reason] of cases) {
        const e = yield* refusal(sandbox)
        expect([path, e._tag]).toEqual([path, "SandboxPathRefused"])
        if (e._tag === "SandboxPathRefused") {
          expect(e.path).toBe(path)
          expect([path, e.message]).toEqual([path, expect.stringMatching(reason)])
        }
      }
    }))

  it.live("allows the workspace (and what it holds) anywhere, and the release directory read-only", () =>
    Effect.gen(function*() {
      for (const sandbox of [
        { readOnly: [ws] }, { readWrite: [ws, Path.join(ws, "sub")] }, { readOnly: [release] },
        { readOnly: [release], readWrite: [outside] }, { readOnly: ["/usr", "/bin", "/lib", "/lib64", release] }
      ]) {
        expect(yield* launcher.check(spec(sandbox)).pipe(Effect.as("ok"), Effect.catchAll((e) => Effect.succeed(e.message)))).toBe("ok")
      }
      const relative = yield* refusal({ readOnly: ["usr"] })
      expect(relative._tag).toBe("InvalidLaunchSpec")
    }))

  it.live("a refused path is never launched", () =>
    Effect.gen(function*() {
      const e = yield* launcher.run(spec({ readOnly: ["/usr", "/bin", "/lib", "/lib64", Path.join(outside, "to-care")] })).pipe(Effect.flip)
      expect(e._tag).toBe("SandboxPathRefused")
      yield* Effect.sleep("100 millis")
      expect(Fs.existsSync(Path.join(ws, "launched"))).toBe(false)
      // the same spec without it does launch, so the refusal is what kept it from running
      const r = yield* launcher.run(spec({ readOnly: ["/usr", "/bin", "/lib", "/lib64"] }))
      expect(r.ending).toEqual({ outcome: "exited", exit: 0 })
      expect(Fs.existsSync(Path.join(ws, "launched"))).toBe(true)
    }))
})
