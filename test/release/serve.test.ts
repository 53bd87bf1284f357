import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { accept } from "../../src/tools/accept.js"
import { rollback } from "../../src/tools/rollback.js"
import { stage } from "../../src/tools/stage.js"
import type { Tool } from "../../src/tools/Tool.js"
import { call, commit, control, linkOf, listing, makeFakeCheckout, planOf, tempDir } from "./fakeCheckout.js"

let base: string
let checkout: string
beforeAll(() => {
  base = tempDir("ocx2-serve-")
  checkout = makeFakeCheckout(base)
})
afterAll(() => Fs.rmSync(base, { recursive: true, force: true }))

const freshRoot = () => Fs.mkdtempSync(Path.join(base, "root-"))

const stageCommit = async (root: string, message: string) => {
  const name = commit(checkout, message)
  const answer = await call(stage, { checkout, root })
  expect(answer.stopped).toEqual({ reason: "completed" })
  return name
}

/** What the root serves, read from its links. */
const links = (root: string) => ({
  next: linkOf(root, "next"),
  current: linkOf(root, "current"),
  previous: linkOf(root, "previous"),
  hook: linkOf(root, "ocx2-hook")
})

/** Which release's program the hook's link reaches, following every link. */
const hookRuns = (root: string) => Path.relative(root, Fs.realpathSync(Path.join(root, "ocx2-hook")))

describe("accept and rollback", { timeout: 60_000 }, () => {
  it("accept serves next as current, keeps what it replaces as previous, and the hook follows", async () => {
    const root = freshRoot()
    const a = await stageCommit(root, "release a")
    const first = await call(accept, { root })
    expect(first.stopped).toEqual({ reason: "completed" })
    expect(first.output).toEqual({
      root,
      current: a,
      next: a,
      hook: { link: Path.join(root, "ocx2-hook"), target: "current/ocx2-hook", present: true }
    })
    expect(first.operations).toEqual([
      { op: "link", detail: `${root}/current -> staged/${a} (the first release this root serves)`, done: true },
      { op: "link", detail: `${root}/ocx2-hook -> current/ocx2-hook`, done: true },
      { op: "hook", detail: `current (${a}) holds ocx2-hook: the hook runs it`, done: true }
    ])
    expect(links(root)).toEqual({ next: `staged/${a}`, current: `staged/${a}`, previous: undefined, hook: "current/ocx2-hook" })
    expect(hookRuns(root)).toBe(`staged/${a}/ocx2-hook`)

    const b = await stageCommit(root, "release b")
    expect(links(root)).toMatchObject({ next: `staged/${b}`, current: `staged/${a}` })
    const second = await call(accept, { root })
    expect(second.stopped).toEqual({ reason: "completed" })
    expect(second.output).toMatchObject({ current: b, previous: a, next: b })
    expect(second.operations.map((o) => o.detail)).toContain(`${root}/ocx2-hook already links to current/ocx2-hook`)
    expect(links(root)).toEqual({ next: `staged/${b}`, current: `staged/${b}`, previous: `staged/${a}`, hook: "current/ocx2-hook" })
    expect(hookRuns(root)).toBe(`staged/${b}/ocx2-hook`)

    // accepting what is already current changes nothing
    const again = await call(accept, { root })
    expect(again.stopped).toEqual({ reason: "completed" })
    expect(again.operations[0]).toEqual({ op: "accept", detail: `${b} is already served as current: nothing to switch`, done: true })
    expect(again.output).toMatchObject({ current: b, previous: a })

    // rollback trades current and previous; a second rollback undoes the first
    const back = await call(rollback, { root })
    expect(back.stopped).toEqual({ reason: "completed" })
    expect(back.output).toMatchObject({ current: a, previous: b, next: b })
    expect(links(root)).toEqual({ next: `staged/${b}`, current: `staged/${a}`, previous: `staged/${b}`, hook: "current/ocx2-hook" })
    expect(hookRuns(root)).toBe(`staged/${a}/ocx2-hook`)
    const forth = await call(rollback, { root })
    expect(forth.output).toMatchObject({ current: b, previous: a })
    expect(links(root)).toEqual({ next: `staged/${b}`, current: `staged/${b}`, previous: `staged/${a}`, hook: "current/ocx2-hook" })
    // every switch was a rename: no temporary links are left behind
    expect(Fs.readdirSync(root).sort()).toEqual(["current", "next", "ocx2-hook", "previous", "staged"])
  })

  it("dry runs change nothing and log exactly what the real calls do", async () => {
    const root = freshRoot()
    await stageCommit(root, "dry a")
    for (const step of ["accept a", "accept b", "rollback"] as const) {
      if (step === "accept b") await stageCommit(root, "dry b")
      const tool = step === "rollback" ? rollback : accept
      const before = listing(root)
      const dry = await call(tool, { root }, { dryRun: true })
      expect(dry.stopped).toEqual({ reason: "dry_run" })
      expect(listing(root)).toEqual(before)
      const real = await call(tool, { root })
      expect(real.stopped).toEqual({ reason: "completed" })
      expect(planOf(dry)).toEqual(planOf(real))
      expect(dry.output).toEqual(real.output)
      expect(dry.operations.some((o) => !o.done)).toBe(true)
    }
  })

  it("accept with nothing staged as next is refused, saying so", async () => {
    const root = freshRoot()
    const answer = await call(accept, { root })
    expect(answer.stopped).toEqual({ reason: "refused", message: `nothing is staged as next (${root}/next): stage a checkout first` })
    expect(listing(root)).toEqual({ staged: expect.stringMatching(/^dir /), "staged/release.lock": expect.stringMatching(/^file 0 /) })
  })

  it("rollback with no previous release is refused", async () => {
    const root = freshRoot()
    await stageCommit(root, "only one")
    expect((await call(accept, { root })).stopped.reason).toBe("completed")
    const before = listing(root)
    const answer = await call(rollback, { root })
    expect(answer.stopped).toEqual({ reason: "refused", message: `there is no previous release to roll back to (${root}/previous)` })
    expect(listing(root)).toEqual(before)
  })

  it("a release without ocx2-hook still gets the link, and the answer says it dangles", async () => {
    const root = freshRoot()
    control(checkout, "no-hook", true)
    try {
      const name = await stageCommit(root, "no hook yet")
      const answer = await call(accept, { root })
      expect(answer.stopped).toEqual({ reason: "completed" })
      expect(linkOf(root, "ocx2-hook")).toBe("current/ocx2-hook")
      expect(answer.output?.hook).toEqual({ link: Path.join(root, "ocx2-hook"), target: "current/ocx2-hook", present: false })
      expect(answer.operations.at(-1)).toEqual({
        op: "hook",
        detail: `current (${name}) holds no ocx2-hook: ${root}/ocx2-hook dangles until a release that has one is served`,
        done: true
      })
    } finally {
      control(checkout, "no-hook", false)
    }
  })

  it("a link that names no staged release is reported, not followed", async () => {
    const root = freshRoot()
    Fs.symlinkSync("/etc", Path.join(root, "next"))
    const answer = await call(accept, { root })
    expect(answer.stopped).toEqual({
      reason: "failed",
      message: `${root}: ${root}/next links to /etc, which is no release staged in ${root}/staged`
    })
  })

  it("each tool needs Fossil's setup capability, refused the same way otherwise", async () => {
    const root = freshRoot()
    const cases: Array<[Tool, unknown]> = [[stage, { checkout, root }], [accept, { root }], [rollback, { root }]]
    for (const [tool, input] of cases) {
      for (const capabilities of ["", "aio", "v"]) {
        const answer = await call(tool, input, { caller: { user: "someone", capabilities, sandboxed: false } })
        expect(answer).toEqual({
          tool: tool.name,
          operations: [],
          stopped: { reason: "refused", message: `${tool.name} needs Fossil's setup capability (s)` }
        })
      }
    }
    expect(listing(root)).toEqual({})
  })

  it("by default acts on the root this program was released into, and otherwise asks for --root", async () => {
    const root = freshRoot()
    const a = await stageCommit(root, "default root a")
    expect((await call(accept, { root })).stopped.reason).toBe("completed")
    await stageCommit(root, "default root b")
    const program = process.argv[1]
    try {
      // run as ROOT/current/ocx2, as a person runs the served release: its real path is ROOT/staged/A/ocx2
      process.argv[1] = Path.join(root, "current", "ocx2")
      const answer = await call(accept, {}, { dryRun: true })
      expect(answer.stopped).toEqual({ reason: "dry_run" })
      expect(answer.output).toMatchObject({ root: Fs.realpathSync(root), previous: a })
      process.argv[1] = Path.join(base, "checkout", "dist", "ocx2.mjs")
      const elsewhere = await call(rollback, {})
      expect(elsewhere.stopped).toEqual({
        reason: "refused",
        message: `rollback needs --root ROOT: this program (${process.argv[1]}) was not released into a root (ROOT/staged/NAME/PROGRAM)`
      })
    } finally {
      process.argv[1] = program
    }
  })
})
