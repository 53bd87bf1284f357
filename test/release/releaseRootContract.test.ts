/**
 * The ReleaseRoot's contract, held by both layers: the live one on a root in a temporary directory
 * and the in-memory one on the same root as a table, so the two cannot drift.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as ReleaseRootFs from "../../layers/ReleaseRootFs.js"
import * as TestReleaseRoot from "../../layers/TestReleaseRoot.js"
import { ReleaseRoot, type ReleaseRootService } from "../../services/ReleaseRoot.js"
import { tempDir } from "./fakeCheckout.js"

const a = "aaaaaaaaaaaa"
const b = "bbbbbbbbbbbb"
const made: Array<string> = []
afterAll(() => made.forEach((dir) => Fs.rmSync(dir, { recursive: true, force: true })))

const live = Effect.runSync(Effect.provide(ReleaseRoot, ReleaseRootFs.layer))

/** a root holding `table`, and the service over it */
const layers: Record<string, (table: TestReleaseRoot.TestRoot) => { root: string; releases: ReleaseRootService }> = {
  live: (table) => {
    const root = Fs.realpathSync(tempDir("ocx2-release-contract-"))
    made.push(root)
    for (const [name, programs] of Object.entries(table.staged ?? {})) {
      Fs.mkdirSync(Path.join(root, "staged", name), { recursive: true })
      for (const program of programs) Fs.writeFileSync(Path.join(root, "staged", name, program), "")
    }
    for (const [link, target] of Object.entries(table.links ?? {})) Fs.symlinkSync(target, Path.join(root, link))
    return { root, releases: live }
  },
  test: (table) => {
    const root = "/srv/ocx2-contract"
    return { root, releases: TestReleaseRoot.make({ roots: { [root]: table } }) }
  }
}

describe.each(Object.keys(layers))("the %s ReleaseRoot", (name) => {
  const at = layers[name]!

  it.effect("reads what each link serves, and whether its release is there; a switch is read back", () =>
    Effect.gen(function*() {
      const { root, releases } = at({ staged: { [a]: ["ocx2", "ocx2-hook"] }, links: { current: `staged/${a}`, previous: `staged/${b}` } })
      expect(yield* releases.read(root)).toEqual({ root, current: { name: a, present: true }, previous: { name: b, present: false } })
      yield* releases.switchLink(root, "next", `staged/${a}`)
      yield* releases.switchLink(root, "ocx2-hook", "current/ocx2-hook")
      expect(yield* releases.read(root)).toEqual({
        root, next: { name: a, present: true }, current: { name: a, present: true }, previous: { name: b, present: false }, hookLink: "current/ocx2-hook"
      })
      expect([yield* releases.hasProgram(root, a, "ocx2-hook"), yield* releases.hasProgram(root, a, "ocx2-cgi"), yield* releases.hasProgram(root, b, "ocx2")])
        .toEqual([true, false, false])
    }))

  it.effect("a link that names no staged release is an error naming it", () =>
    Effect.gen(function*() {
      const { root, releases } = at({ links: { next: "elsewhere" } })
      const error = yield* releases.read(root).pipe(Effect.flip)
      expect(error._tag).toBe("ReleaseRootError")
      expect(error.reason).toContain(`${root}/next links to elsewhere, which is no release staged in ${root}/staged`)
    }))

  it.effect("the lock is held for the scope and refuses a second holder at once", () =>
    Effect.gen(function*() {
      const { root, releases } = at({})
      const second = yield* Effect.scoped(Effect.zipRight(releases.lock(root), Effect.flip(Effect.scoped(releases.lock(root)))))
      expect(second).toMatchObject({ _tag: "RootBusy", lock: `${root}/staged/release.lock` })
      expect(Exit.isSuccess(yield* Effect.exit(Effect.scoped(releases.lock(root))))).toBe(true)
    }))

  it.effect("a program's release is read off its real path, through links; a root must be there", () =>
    Effect.gen(function*() {
      const { root, releases } = at({ staged: { [a]: ["ocx2"] }, links: { current: `staged/${a}` } })
      expect(yield* releases.releaseOfProgram(`${root}/current/ocx2`)).toEqual({ root, name: a, program: "ocx2" })
      expect(yield* releases.rootOfProgram(`${root}/current/missing`)).toBeUndefined()
      expect(yield* releases.rootOfProgram(undefined)).toBeUndefined()
      expect(yield* releases.resolveRoot(root)).toBe(root)
      expect((yield* releases.resolveRoot(`${root}/nowhere`).pipe(Effect.flip)).reason).toBe("no such directory")
    }))
})
