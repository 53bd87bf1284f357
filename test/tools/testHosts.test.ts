/**
 * The test Hosts gives each kind of host from the test layers, as code that learns its host only
 * as it runs asks for it: the record of the file named, the one launcher, the release table, and
 * a care directory only when the test gave one.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestHosts from "../../layers/TestHosts.js"
import * as TestRepository from "../../layers/TestRepository.js"
import { Hosts } from "../../services/Hosts.js"
import { Receipts } from "../../services/Receipts.js"
import { ReleaseRoot } from "../../services/ReleaseRoot.js"
import { Repository } from "../../services/Repository.js"
import { SandboxLauncher } from "../../services/SandboxLauncher.js"

const served = "/srv/project.fossil"
const root = "/srv/ocx2"

describe("TestHosts", () => {
  it.effect("a record is the test's repository and receipts of that file; the release roots are its table", () =>
    Effect.gen(function*() {
      const { layer } = TestHosts.layer({
        records: { [served]: { repository: TestRepository.make({ users: { builder: "i" } }), receipts: { users: { builder: "io" } } } }
      })
      const answer = yield* Effect.flatMap(Hosts, (hosts) =>
        Effect.all([Effect.flatMap(Repository, (r) => r.user("builder")), Effect.flatMap(Receipts, (r) => r.capabilitiesOf("builder"))]).pipe(
          Effect.provide(hosts.record(served))
        )).pipe(Effect.provide(layer))
      expect(answer[0]).toMatchObject({ login: "builder" })
      expect(answer[1]).toBe("io")
      expect(yield* Effect.flatMap(ReleaseRoot, (r) => r.read(root)).pipe(Effect.provide(layer))).toEqual({ root })
    }))

  it.effect("every host's sandbox is the one test launcher; a served host without a care directory fails to open it", () =>
    Effect.gen(function*() {
      const { layer, launcher } = TestHosts.layer({ records: { [served]: { repository: TestRepository.make() } } })
      const capabilities = yield* Effect.flatMap(Hosts, (hosts) =>
        Effect.flatMap(SandboxLauncher, (s) => s.capabilities).pipe(Effect.provide(hosts.sandbox(root)))).pipe(Effect.provide(layer))
      expect(capabilities.sandbox).toBe(true)
      const spec = { command: ["true"], env: {}, cwd: "/", limits: {}, stdin: { lines: [], keepOpen: false }, keep: { stdout: 0, stderr: 0 } }
      yield* Effect.flatMap(Hosts, (hosts) =>
        Effect.flatMap(SandboxLauncher, (s) => s.run(spec)).pipe(Effect.provide(hosts.sandbox()))).pipe(Effect.provide(layer))
      expect(launcher.launched.map((l) => l.spec.command)).toEqual([["true"]])
      const care = yield* Effect.flatMap(Hosts, (hosts) =>
        Effect.flatMap(SandboxLauncher, (s) => s.capabilities).pipe(Effect.provide(hosts.served({ repository: served, root })))).pipe(
          Effect.provide(layer),
          Effect.flip
        )
      expect(care.message).toBe(`care directory: open ${root}/care: the test gave no care directory`)
    }))
})
