/**
 * stage, accept and rollback refuse what they cannot do, with the words they give, and change
 * nothing: against the in-memory release root, so each refusal needs no checkout built and no
 * link on disk (test/release/stage.test.ts and rule.test.ts run them on the real thing).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestReleaseRoot from "../../layers/TestReleaseRoot.js"
import { acceptRelease } from "../../src/tools/accept.js"
import { rollbackRelease } from "../../src/tools/rollback.js"
import { stageRelease } from "../../src/tools/stage.js"
import type { ToolContext } from "../../src/tools/Tool.js"

const root = "/srv/ocx2"
const context: ToolContext = { caller: { user: "maintainer", capabilities: "s", sandboxed: false }, dryRun: false, repository: undefined }
const a = "aaaaaaaaaaaa"
const b = "bbbbbbbbbbbb"
const programs = ["ocx2", "ocx2-cgi", "ocx2-hook"]
/** a program released into no root: the tools need --root */
const checkoutProgram = "/home/me/ocx2/dist/ocx2.mjs"

const called = <O, R>(options: TestReleaseRoot.TestReleaseRootOptions, call: Effect.Effect<O, never, R>) => {
  const { releaseRoot, layer } = TestReleaseRoot.layer(options)
  const before = new Map(releaseRoot.links)
  return Effect.provide(call, layer).pipe(
    Effect.map((handled) => ({ handled, releaseRoot, unchanged: JSON.stringify([...releaseRoot.links]) === JSON.stringify([...before]) }))
  )
}

/** each root refused with its message, nothing switched */
const refusesEach = <R>(cases: ReadonlyArray<[TestReleaseRoot.TestRoot, string]>, call: Effect.Effect<{ readonly stopped?: unknown }, never, R>) =>
  Effect.forEach(cases, ([rootTable, message]) =>
    Effect.map(called({ roots: { [root]: rootTable } }, call), ({ handled, unchanged }) => {
      expect(handled.stopped).toEqual({ reason: "refused", message })
      expect(unchanged).toBe(true)
    }), { discard: true })

describe("rollback's refusals", () => {
  it.effect("no previous release, its release gone, or nothing current", () =>
    Effect.gen(function*() {
      const cases: Array<[TestReleaseRoot.TestRoot, string]> = [
        [{ staged: { [a]: programs }, links: { current: `staged/${a}` } }, `there is no previous release to roll back to (${root}/previous)`],
        [
          { staged: { [a]: programs }, links: { current: `staged/${a}`, previous: `staged/${b}` } },
          `previous names ${b}, but ${root}/staged/${b} is gone: there is nothing to roll back to`
        ],
        [{ staged: { [b]: programs }, links: { previous: `staged/${b}` } }, `${root}/current serves no release to roll back from: accept one instead`]
      ]
      yield* refusesEach(cases, rollbackRelease({ root }, context, checkoutProgram))
    }))

  it.effect("rolls back when it can: current and previous trade places, the hook follows", () =>
    Effect.gen(function*() {
      const { handled, releaseRoot } = yield* called(
        { roots: { [root]: { staged: { [a]: programs, [b]: programs }, links: { current: `staged/${b}`, previous: `staged/${a}` } } } },
        rollbackRelease({ root }, context, checkoutProgram)
      )
      expect(handled.output).toEqual({ root, current: a, previous: b, hook: { link: `${root}/ocx2-hook`, target: "current/ocx2-hook", present: true } })
      expect(Object.fromEntries(releaseRoot.links)).toEqual({
        [`${root}/current`]: `staged/${a}`,
        [`${root}/previous`]: `staged/${b}`,
        [`${root}/ocx2-hook`]: "current/ocx2-hook"
      })
      expect(releaseRoot.held.size).toBe(0)
    }))
})

describe("accept's refusals", () => {
  it.effect("nothing staged as next, or its release gone", () =>
    Effect.gen(function*() {
      const cases: Array<[TestReleaseRoot.TestRoot, string]> = [
        [{ staged: { [a]: programs }, links: { current: `staged/${a}` } }, `nothing is staged as next (${root}/next): stage a checkout first`],
        [{ links: { next: `staged/${b}` } }, `next names ${b}, but ${root}/staged/${b} is gone: stage it again`]
      ]
      yield* refusesEach(cases, acceptRelease({ root }, context, checkoutProgram))
    }))

  it.effect("a root another call holds, and a root that is not there", () =>
    Effect.gen(function*() {
      const busy = yield* called(
        { roots: { [root]: { staged: { [a]: programs }, links: { next: `staged/${a}` }, busy: true } } },
        acceptRelease({ root }, context, checkoutProgram)
      )
      expect(busy.handled.stopped).toEqual({
        reason: "refused",
        message: `another stage, accept or rollback is changing this root (it holds ${root}/staged/release.lock); try again when it is done`
      })
      expect(busy.unchanged).toBe(true)
      const missing = yield* called({}, acceptRelease({ root }, context, checkoutProgram))
      expect(missing.handled.stopped).toEqual({ reason: "refused", message: `the release root ${root} cannot be used: no such directory` })
    }))

  it.effect("without --root, a program released into no root is refused", () =>
    Effect.gen(function*() {
      const { handled } = yield* called({ roots: { [root]: {} } }, acceptRelease({}, context, checkoutProgram))
      expect(handled.stopped).toEqual({
        reason: "refused",
        message: `accept needs --root ROOT: this program (${checkoutProgram}) was not released into a root (ROOT/staged/NAME/PROGRAM)`
      })
    }))
})

describe("stage's refusals", () => {
  const checkout = "/home/me/ocx2"
  const checkin = { vcs: "git" as const, hash: `${a}${"0".repeat(28)}`, modified: false }

  it.effect("a release served as current or previous is never replaced; nothing is built", () =>
    Effect.gen(function*() {
      for (const link of ["current", "previous"] as const) {
        const { handled, releaseRoot, unchanged } = yield* called(
          { roots: { [root]: { staged: { [a]: programs }, links: { [link]: `staged/${a}` } } }, checkouts: { [checkout]: { checkin } } },
          stageRelease({ checkout, root }, context, checkoutProgram)
        )
        expect(handled.stopped).toEqual({ reason: "refused", message: `${a} is served as ${link} (${root}/staged/${a}); a served release is never replaced` })
        expect(releaseRoot.steps).toEqual([])
        expect(unchanged).toBe(true)
      }
    }))

  it.effect("a directory that is no checkout, and one unfit to stage", () =>
    Effect.gen(function*() {
      const none = yield* called({ roots: { [root]: {} } }, stageRelease({ checkout, root }, context, checkoutProgram))
      expect(none.handled.stopped).toEqual({ reason: "refused", message: `${checkout} is neither a git nor a Fossil checkout` })
      const unfit = yield* called(
        { roots: { [root]: {} }, checkouts: { [checkout]: { checkin, plan: `its package.json has no "gate" script` } } },
        stageRelease({ checkout, root }, context, checkoutProgram)
      )
      expect(unfit.handled.stopped).toEqual({ reason: "refused", message: `${checkout} cannot be staged: its package.json has no "gate" script` })
    }))

  it.effect("a failing build leaves next as it was and names its log; a passing one is offered as next", () =>
    Effect.gen(function*() {
      const failing = yield* called(
        { roots: { [root]: { staged: { [b]: programs }, links: { next: `staged/${b}` } } }, checkouts: { [checkout]: { checkin, fails: { build: "exit 2" } } } },
        stageRelease({ checkout, root }, context, checkoutProgram)
      )
      expect(failing.handled.stopped).toEqual({ reason: "failed", message: `the build failed (exit 2); its log is ${root}/staged/build.log` })
      expect(failing.unchanged).toBe(true)
      const passing = yield* called({ roots: { [root]: {} }, checkouts: { [checkout]: { checkin } } }, stageRelease({ checkout, root }, context, checkoutProgram))
      expect(passing.handled.output).toMatchObject({ root, next: a, staged: a, programs })
      expect(passing.releaseRoot.steps).toEqual([`gate ${checkout}`, `build ${checkout}`, `smoke ${root}/staged/${a}.partial`])
      expect([...passing.releaseRoot.directories.keys()]).toEqual([`${root}/staged/${a}`])
    }))
})
