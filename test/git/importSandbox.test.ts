/**
 * What import asks the sandbox for, and how it words a step that failed there: with the test
 * launcher, so no upstream is cloned and no bubblewrap runs (test/git/import.test.ts does, end to end).
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestSandboxLauncher from "../../layers/TestSandboxLauncher.js"
import { importInSandbox } from "../../src/git/ImportSandbox.js"
import type { ScriptedLaunch } from "../../layers/TestSandboxLauncher.js"

const top = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-import-sandbox-"))
afterAll(() => Fs.rmSync(top, { recursive: true, force: true }))
const work = Path.join(top, "work")
// the launcher resolves every path it is given, as the live one does: the upstream must exist
const local = Path.join(top, "upstream.git")
Fs.mkdirSync(work)
Fs.mkdirSync(local)

const importWith = (launch: ScriptedLaunch, localUpstream: string | undefined, capabilities = {}) => {
  const { launcher, layer } = TestSandboxLauncher.layer({ launches: [launch], capabilities })
  const upstream = localUpstream ?? "https://example.org/upstream.git"
  return importInSandbox({ upstream, localUpstream, admin: "admin", work, ownPaths: ["/srv/ocx2/care"] }).pipe(
    Effect.flip,
    Effect.map((failure) => ({ failure, launched: launcher.launched })),
    Effect.provide(layer)
  )
}

describe("importInSandbox", () => {
  it.effect("a local upstream: read-only in a sandbox with no network, git limited to file://; a failing step says its last lines", () =>
    Effect.gen(function*() {
      const said = "Cloning...\nthe password is hunter2\nthe upstream has a branch master besides its own branch main: fossil import would make both trunk\n"
      const { failure, launched } = yield* importWith({ ending: { exit: 3 }, stderr: said }, local)
      expect(failure.message).toBe(
        `the import of ${local} exited 3: Cloning...; the upstream has a branch master besides its own branch main: fossil import would make both trunk`
      )
      // the second step never ran
      expect(launched).toHaveLength(1)
      const spec = launched[0]!.spec
      expect(spec.command.slice(0, 2)).toEqual(["/bin/sh", "-c"])
      expect(spec.command.slice(3)).toEqual(["ocx2-import", local, work])
      expect(spec.env["GIT_ALLOW_PROTOCOL"]).toBe("file")
      expect(spec.sandbox).toMatchObject({ network: false, readWrite: [work], ownPaths: ["/srv/ocx2/care"], linuxCapabilities: [] })
      expect(spec.sandbox?.readOnly).toContain(local)
      expect(spec.limits).toEqual({ wallSeconds: 3600 })
    }))

  it.effect("a remote upstream gets the network and git's network transports only; a limit passed is named", () =>
    Effect.gen(function*() {
      const { failure, launched } = yield* importWith({ ending: { limit: "wall" } }, undefined)
      expect(failure.message).toBe("the import of https://example.org/upstream.git ran out of wall")
      expect(launched[0]!.spec.env["GIT_ALLOW_PROTOCOL"]).toBe("http:https:git")
      expect(launched[0]!.spec.sandbox?.network).toBe(true)
    }))

  it.effect("a host that cannot sandbox refuses the import before anything runs", () =>
    Effect.gen(function*() {
      const { failure, launched } = yield* importWith({}, undefined, { sandbox: false, notes: ["sandbox: no bwrap"] })
      expect(failure.message).toBe("the import's sandbox: this host cannot provide sandbox: sandbox: no bwrap")
      expect(launched).toEqual([])
    }))
})
