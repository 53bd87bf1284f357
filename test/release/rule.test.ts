import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as ReleaseRootFs from "../../layers/ReleaseRootFs.js"
import { makeCgi } from "../../src/adapters/Cgi.js"
import { releaseOfProgram } from "../../src/release/ReleasePaths.js"
import { releaseRule, type ServedNames, servingLine, servingOf } from "../../src/release/Served.js"
import { accept, acceptRelease } from "../../src/tools/accept.js"
import { rollback, rollbackRelease } from "../../src/tools/rollback.js"
import type { Handled } from "../../src/operations/Operations.js"
import type { EntryPoint, ToolContext } from "../../src/tools/Tool.js"
import { linkOf, listing, tempDir } from "./fakeCheckout.js"

// Seed 001, "Stage, accept or roll back a release": once a release is served, only the active
// release accepts; the pre-release candidate accepts only a node's first release (trusted on first
// use); either rolls back; a program of another release of the root is refused; a program released
// into no root may accept and roll back with --root from a terminal, but not through the web page,
// which takes the release root from its own program's real path, never from the request.

const A = "aaaaaaaaaaaa" // previous
const B = "bbbbbbbbbbbb" // current
const C = "cccccccccccc" // next
const S = "555555555555" // staged, stale: served as nothing

const at = (root: string, name: string, program = "ocx2") => ({ root, name, program })

describe("the release rule", () => {
  const served: ServedNames = { previous: A, current: B, next: C }

  it("once a release is served, only the active release accepts", () => {
    expect(releaseRule("accept", at("/r", B), served)).toBeUndefined()
    expect(releaseRule("accept", at("/r", C), served)).toBe(
      `this program (ocx2) is the pre-release candidate ${C} of /r (next): once a release is served, only the active release ` +
        `(current, ${B}) accepts, as /r/current/ocx2 accept; the pre-release candidate accepts only a node's first release, and ` +
        `another release of this root never; from a terminal, a checkout's ocx2 (released into no root) can accept with --root /r to recover`
    )
    expect(releaseRule("accept", at("/r", A), served)).toMatch(
      new RegExp(`^this program \\(ocx2\\) is release ${A} of /r, kept as previous \\(not the active release\\): once a release is served, only the active release`)
    )
    expect(releaseRule("accept", at("/r", S), served)).toMatch(
      new RegExp(`^this program \\(ocx2\\) is release ${S} of /r, staged but served as neither current nor next: `)
    )
  })

  it("the pre-release candidate accepts a node's first release (no current yet), and no other release does", () => {
    expect(releaseRule("accept", at("/r", C), { next: C })).toBeUndefined()
    expect(releaseRule("accept", at("/r", S), { next: C })).toBe(
      `this program (ocx2) is release ${S} of /r, staged but served as neither current nor next: no release is served yet, ` +
        `so only the pre-release candidate (next, ${C}) accepts this node's first release (trusted on first use); from a ` +
        `terminal, a checkout's ocx2 (released into no root) can accept with --root /r to recover`
    )
    // accepting what is already current is the active release's own call
    expect(releaseRule("accept", at("/r", B), { current: B, next: B })).toBeUndefined()
  })

  it("either the active release or the pre-release candidate rolls back; another release does not", () => {
    expect(releaseRule("rollback", at("/r", B), served)).toBeUndefined()
    expect(releaseRule("rollback", at("/r", C), served)).toBeUndefined()
    expect(releaseRule("rollback", at("/r", A), served)).toBe(
      `this program (ocx2) is release ${A} of /r, kept as previous (not the active release): only the active release ` +
        `(current, ${B}) or the pre-release candidate (next, ${C}) rolls back, as /r/current/ocx2 rollback; from a ` +
        `terminal, a checkout's ocx2 (released into no root) can roll back with --root /r to recover`
    )
    expect(releaseRule("rollback", at("/r", S), served)).toMatch(/^this program \(ocx2\) is release 555555555555 of \/r, staged/)
  })

  it("a page says so, and points at the active release's page", () => {
    expect(releaseRule("accept", at("/r", C, "ocx2-cgi"), served, "page")).toMatch(
      new RegExp(`^this page \\(ocx2-cgi\\) is the pre-release candidate ${C} of /r \\(next\\): .*accepts, on the active release's page \\(ocx2-cgi\\);`)
    )
  })

  it("which release a program is, is read off its real path", () => {
    expect(releaseOfProgram(`/r/staged/${C}/ocx2-cgi`)).toEqual({ root: "/r", name: C, program: "ocx2-cgi" })
    expect(releaseOfProgram("/work/main/dist/ocx2.mjs")).toBeUndefined()
  })
})

// A root on disk: staged A, B, C and S, each with the programs; previous A, current B, next C.
let base: string
beforeAll(() => {
  base = Fs.realpathSync(tempDir("ocx2-rule-"))
})
afterAll(() => Fs.rmSync(base, { recursive: true, force: true }))

const makeRoot = (links: { readonly previous?: string; readonly current?: string; readonly next?: string }): string => {
  const root = Fs.mkdtempSync(Path.join(base, "root-"))
  for (const name of [A, B, C, S]) {
    const release = Path.join(root, "staged", name)
    Fs.mkdirSync(release, { recursive: true })
    for (const program of ["ocx2", "ocx2-cgi", "ocx2-hook"]) Fs.writeFileSync(Path.join(release, program), "")
  }
  for (const [link, name] of Object.entries(links)) Fs.symlinkSync(`staged/${name}`, Path.join(root, link))
  return root
}

const context = (entryPoint: EntryPoint, dryRun = false): ToolContext => ({
  caller: { user: "maintainer", capabilities: "s", sandboxed: false },
  dryRun,
  repository: undefined,
  entryPoint
})

/** The handler's answer as runTool completes it: a call that ran to the end is completed or a dry run. */
const answered = <O>(handled: Handled<O>, dryRun: boolean) => ({
  ...handled,
  stopped: handled.stopped ?? { reason: dryRun ? "dry_run" : "completed" }
})
const acceptAs = (program: string | undefined, input: { root?: string }, entryPoint: EntryPoint = "cli", dryRun = false) =>
  acceptRelease(input, context(entryPoint, dryRun), program).pipe(Effect.provide(ReleaseRootFs.layer), Effect.map((handled) => answered(handled, dryRun)))
const rollbackAs = (program: string | undefined, input: { root?: string }, entryPoint: EntryPoint = "cli", dryRun = false) =>
  rollbackRelease(input, context(entryPoint, dryRun), program).pipe(Effect.provide(ReleaseRootFs.layer), Effect.map((handled) => answered(handled, dryRun)))
const servingAt = (program: string) => servingOf(program).pipe(Effect.provide(ReleaseRootFs.layer))

const links = (root: string) => ({ previous: linkOf(root, "previous"), current: linkOf(root, "current"), next: linkOf(root, "next") })

describe("accept and rollback keep the rule", () => {
  it.live("a program of the root: current accepts; next, previous and a stale release are refused, and nothing changes", () =>
    Effect.gen(function*() {
      const root = makeRoot({ previous: A, current: B, next: C })
      const before = listing(root)
      for (const [link, name] of [["next", C], ["previous", A]] as const) {
        const answer = yield* acceptAs(Path.join(root, link, "ocx2"), {})
        expect(answer.stopped.reason).toBe("refused")
        expect(answer.stopped.message).toContain(`this program (ocx2) is ${name === C ? "the pre-release candidate" : "release"} ${name} of ${root}`)
        expect(answer.stopped.message).toContain(`only the active release (current, ${B}) accepts, as ${root}/current/ocx2 accept`)
        expect(answer.operations).toEqual([])
      }
      // --root naming its own root changes nothing: it is still a program of this root
      const stale = yield* acceptAs(Path.join(root, "staged", S, "ocx2"), { root })
      expect(stale.stopped.message).toContain(`is release ${S} of ${root}, staged but served as neither current nor next`)
      const { staged: _staged, ...rest } = listing(root) // the lock, taken to read the links, touches staged/
      const { staged: _before, ...restBefore } = before
      expect(rest).toEqual({ ...restBefore, "staged/release.lock": expect.stringMatching(/^file 0 /) })

      const dry = yield* acceptAs(Path.join(root, "current", "ocx2"), {}, "cli", true)
      expect(dry.stopped).toEqual({ reason: "dry_run" })
      expect(dry.operations[0]).toEqual({ op: "release", detail: `ocx2 is the active release ${B} of ${root} (current): it may accept`, done: true })
      const real = yield* acceptAs(Path.join(root, "current", "ocx2"), {})
      expect(real.stopped).toEqual({ reason: "completed" })
      expect(links(root)).toEqual({ previous: `staged/${B}`, current: `staged/${C}`, next: `staged/${C}` })
    }))

  it.live("with no release served yet, the pre-release candidate accepts the first (trusted on first use)", () =>
    Effect.gen(function*() {
      const root = makeRoot({ next: C })
      const refused = yield* acceptAs(Path.join(root, "staged", S, "ocx2"), {})
      expect(refused.stopped.message).toContain(`no release is served yet, so only the pre-release candidate (next, ${C}) accepts`)
      const first = yield* acceptAs(Path.join(root, "next", "ocx2"), {})
      expect(first.stopped).toEqual({ reason: "completed" })
      expect(links(root)).toEqual({ previous: undefined, current: `staged/${C}`, next: `staged/${C}` })
    }))

  it.live("either current or next rolls back; previous is refused, while a program of no root (or another) recovers with --root", () =>
    Effect.gen(function*() {
      const root = makeRoot({ previous: A, current: B, next: C })
      const refused = yield* rollbackAs(Path.join(root, "previous", "ocx2"), {})
      expect(refused.stopped.reason).toBe("refused")
      expect(refused.stopped.message).toContain(`only the active release (current, ${B}) or the pre-release candidate (next, ${C}) rolls back`)
      // from a terminal (or MCP), a checkout's program, or another root's, is not a release of this root: it may
      const other = makeRoot({ current: A, next: A })
      for (const program of [Path.join(base, "checkout", "dist", "ocx2.mjs"), Path.join(other, "current", "ocx2")]) {
        expect((yield* rollbackAs(program, { root }, "cli", true)).stopped).toEqual({ reason: "dry_run" })
        expect((yield* acceptAs(program, { root }, "mcp", true)).stopped).toEqual({ reason: "dry_run" })
      }
      expect((yield* rollbackAs(Path.join(root, "next", "ocx2"), {}, "cli", true)).stopped).toEqual({ reason: "dry_run" })
      const back = yield* rollbackAs(Path.join(root, "current", "ocx2"), {})
      expect(back.stopped).toEqual({ reason: "completed" })
      expect(links(root)).toEqual({ previous: `staged/${B}`, current: `staged/${A}`, next: `staged/${C}` })
      // now A is current: it may roll back (to B), and so may next
      expect((yield* rollbackAs(Path.join(root, "next", "ocx2"), {})).stopped).toEqual({ reason: "completed" })
      expect(links(root)).toEqual({ previous: `staged/${A}`, current: `staged/${B}`, next: `staged/${C}` })
    }))
})

describe("on the web, the release root is the page's own", () => {
  it.live("a root in the request is refused, whichever release the page is", () =>
    Effect.gen(function*() {
      const root = makeRoot({ previous: A, current: B, next: C })
      const before = listing(root)
      for (const program of [Path.join(root, "current", "ocx2-cgi"), Path.join(base, "checkout", "dist", "ocx2-cgi.mjs")]) {
        for (const answer of [yield* acceptAs(program, { root }, "cgi"), yield* rollbackAs(program, { root }, "cgi", true)]) {
          expect(answer.stopped.reason).toBe("refused")
          expect(answer.stopped.message).toMatch(new RegExp(`^the web page takes no release root from the request \\(root "${root}"\\)`))
        }
      }
      expect(listing(root)).toEqual(before)
    }))

  it.live("a page whose program is in no release root accepts and rolls back nothing", () =>
    Effect.gen(function*() {
      const answer = yield* acceptAs(Path.join(base, "checkout", "dist", "ocx2-cgi.mjs"), {}, "cgi")
      expect(answer.stopped).toEqual({
        reason: "refused",
        message: "this page's program is not inside a release root (ROOT/staged/NAME/ocx2-cgi, reached through ocx2-cgi -> " +
          "ROOT/current/ocx2-cgi), so it accepts nothing; from a terminal, ocx2 accept --root ROOT"
      })
      expect((yield* rollbackAs(undefined, {}, "cgi")).stopped.message).toMatch(/^this page's program is not inside a release root .* so it rolls back nothing/)
    }))

  it.live("the root comes from the page's real path through a chain of links; ocx2-cgi-next accepts only a first release", () =>
    Effect.gen(function*() {
      const root = makeRoot({ previous: A, current: B, next: C })
      const ext = Fs.mkdtempSync(Path.join(base, "ext-"))
      const hop = Path.join(base, "hop-next")
      Fs.symlinkSync(Path.join(root, "next", "ocx2-cgi"), hop)
      Fs.symlinkSync(hop, Path.join(ext, "ocx2-cgi-next")) // ext/ocx2-cgi-next -> hop -> ROOT/next/ocx2-cgi -> staged/C
      Fs.symlinkSync(Path.join(root, "current", "ocx2-cgi"), Path.join(ext, "ocx2-cgi"))
      const next = yield* acceptAs(Path.join(ext, "ocx2-cgi-next"), {}, "cgi")
      expect(next.stopped.reason).toBe("refused")
      expect(next.stopped.message).toContain(`this page (ocx2-cgi) is the pre-release candidate ${C} of ${root} (next): once a release is served`)
      expect((yield* rollbackAs(Path.join(ext, "ocx2-cgi-next"), {}, "cgi", true)).stopped).toEqual({ reason: "dry_run" })
      const current = yield* acceptAs(Path.join(ext, "ocx2-cgi"), {}, "cgi")
      expect(current.stopped).toEqual({ reason: "completed" })
      expect(current.output).toMatchObject({ root, current: C, previous: B })

      // a node's first release: the pre-release candidate's page accepts it
      const fresh = makeRoot({ next: C })
      Fs.symlinkSync(Path.join(fresh, "next", "ocx2-cgi"), Path.join(ext, "fresh-next"))
      expect((yield* acceptAs(Path.join(ext, "fresh-next"), {}, "cgi")).stopped).toEqual({ reason: "completed" })
      expect(links(fresh).current).toBe(`staged/${C}`)
    }))

  it.live("each page says which release serves it, and the release tools' forms offer no root", () =>
    Effect.gen(function*() {
      const root = makeRoot({ previous: A, current: B, next: C })
      const ext = Fs.mkdtempSync(Path.join(base, "ext-"))
      Fs.symlinkSync(Path.join(root, "next", "ocx2-cgi"), Path.join(ext, "ocx2-cgi-next"))
      Fs.symlinkSync(Path.join(root, "current", "ocx2-cgi"), Path.join(ext, "ocx2-cgi"))
      const serving = (link: string) => servingAt(Path.join(ext, link))
      const nextServing = yield* serving("ocx2-cgi-next")
      expect(nextServing).toEqual({ root, name: C, program: "ocx2-cgi", served: { previous: A, current: B, next: C } })
      expect(servingLine(nextServing)).toBe(
        `This page is the pre-release candidate ${C} of ${root}, the server's release root; the active release is ${B}, and only it accepts.`
      )
      expect(servingLine(yield* serving("ocx2-cgi"))).toBe(`This page is the active release ${B} of ${root}, the server's release root.`)
      expect(servingLine(yield* servingAt(Path.join(base, "nowhere")))).toMatch(
        /not inside a release root/
      )

      const cgi = makeCgi([accept, rollback], { release: { serving: nextServing } })
      const request = (path: string) => ({
        method: "GET", scriptName: "/ext/ocx2-cgi-next", pathInfo: path, query: "", origin: "http://h", referer: undefined,
        accept: undefined, contentType: undefined, body: "", caller: { user: "admin", capabilities: "s", sandboxed: false }, repository: undefined
      })
      const home = yield* Effect.promise(() => cgi(request("")))
      expect(home.body).toContain(`pre-release candidate ${C} of ${root}`)
      const page = yield* Effect.promise(() => cgi(request("/accept")))
      expect(page.body).toContain(`pre-release candidate ${C} of ${root}`)
      expect(page.body).toContain(`<form method="post" action="/ext/ocx2-cgi-next/accept"`)
      expect(page.body).not.toContain(`name="root"`)
    }))
})
