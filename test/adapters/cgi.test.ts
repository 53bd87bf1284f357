import BetterSqlite3 from "better-sqlite3"
import * as Effect from "effect/Effect"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { vi } from "vitest"
import { tools } from "../../src/tools/Registry.js"
import { runTool } from "../../src/tools/RunTool.js"
import { type Caller, notOfferedMessage, offeredBy } from "../../src/tools/Tool.js"
import { builtProgram, bundle, startExtServer, type ExtServer, type TestUser } from "./extServer.js"
import { makeGuarded } from "./fixtures/guarded.js"

// each test asks Fossil for pages, each a CGI process of ours: a loaded machine takes seconds
vi.setConfig({ testTimeout: 60_000 })

// The CGI as Fossil runs it: bundled, in a real `fossil server --extroot`, the viewer logged in
// through Fossil's own login form.

const alice: TestUser = { login: "alice", password: "alice-secret-1", capabilities: "s" }
const bob: TestUser = { login: "bob", password: "bob-secret-1", capabilities: "hio" }
// the node a run is for, and the user its process runs as
const lab: TestUser = { login: "lab", password: "lab-secret-1", capabilities: "" }
const builder: TestUser = { login: "builder", password: "builder-secret-1", capabilities: "oi" }

let server: ExtServer
let build: string
let marks: string
let aliceCookie: string
let bobCookie: string

const real = "/ext/ocx2-cgi"
const test = "/ext/ocx2-cgi-test"

beforeAll(async () => {
  build = mkdtempSync(join(tmpdir(), "ocx2-cgi-build-"))
  marks = join(build, "marks.log")
  // the page program as the build ships it (dist, with its code cache), as Fossil runs it installed
  const cgi = await builtProgram("ocx2-cgi", build)
  const cgiTest = await bundle(join(import.meta.dirname, "fixtures/ocx2-cgi-test.ts"), build, "ocx2-cgi-test")
  server = await startExtServer([alice, bob, lab, builder], { "ocx2-cgi": cgi, "ocx2-cgi-test": cgiTest })
  aliceCookie = await server.login(alice)
  bobCookie = await server.login(bob)
}, 120_000)

afterAll(async () => {
  await server?.stop()
  rmSync(build, { recursive: true, force: true })
})

const get = (path: string, cookie?: string) =>
  fetch(`${server.base}${path}`, { headers: cookie !== undefined ? { cookie } : {} })

const post = (path: string, body: Record<string, string>, options: { cookie?: string; referer?: string | null } = {}) => {
  const headers: Record<string, string> = { "content-type": "application/x-www-form-urlencoded" }
  if (options.cookie !== undefined) headers.cookie = options.cookie
  const referer = options.referer === undefined ? `${server.base}${path.split("?")[0]}` : options.referer
  if (referer !== null) headers.referer = referer
  return fetch(`${server.base}${path}`, { method: "POST", headers, body: new URLSearchParams(body).toString() })
}

const escape = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;")
const marked = () => (existsSync(marks) ? readFileSync(marks, "utf8") : "")
// Only guarded's rule reads capabilities, and it reads Setup (s) alone.
const callerOf = (login: string | undefined): Caller => ({ user: login, capabilities: login === "alice" ? "s" : "", sandboxed: false })
const guarded = () => makeGuarded(marks)
const expected = (tool: (typeof tools)[number], raw: unknown, caller: Caller, dryRun = false) =>
  runTool(tool, raw, { caller, dryRun, repository: undefined, entryPoint: "cgi" })
const echo = tools.find((t) => t.name === "echo")!
const named = (name: string) => tools.find((t) => t.name === name)!
const webTools = offeredBy("cgi", tools)
/** anything the repository receives changes this */
const state = () => {
  const db = new BetterSqlite3(server.repository, { readonly: true })
  try {
    return JSON.stringify(db.prepare("SELECT (SELECT count(*) FROM blob) AS blobs, (SELECT coalesce(max(rcvid), 0) FROM rcvfrom) AS rcvid").get())
  } finally {
    db.close()
  }
}

describe("the OCX page", () => {
  it("lists every tool the web offers with its summary and a link to its page, inside Fossil's skin", async () => {
    const response = await get(`${real}/tools`)
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toContain("text/html")
    const page = await response.text()
    // Fossil's skin: its header, main menu and footer around our fossil-doc div
    expect(page).toContain(`<div class="header">`)
    expect(page).toContain(`<div class="mainmenu">`)
    expect(page).toContain(`<div class="footer">`)
    expect(page).toMatch(/<title>[^<]*OCX\s*<\/title>/)
    for (const tool of webTools) {
      expect(page).toContain(`href="${real}/${tool.name}"`)
      expect(page).toContain(tool.summary)
    }
    // stage runs the checkout's own code, and people post in Fossil's own forum page
    for (const name of ["stage", "post"]) expect(page).not.toContain(`href="${real}/${name}"`)
    expect(webTools.map((t) => t.name)).toContain("hook")
    expect(page).toContain("<b>nobody</b>")
  })

  it("says who Fossil authenticated", async () => {
    const page = await (await get(`${real}/tools`, aliceCookie)).text()
    expect(page).toContain("You act as <b>alice</b>")
    expect(page).toMatch(/capabilities <code>[A-Za-z0-9]*s[A-Za-z0-9]*<\/code>/)
  })

  it.live("answers a JSON client with the list's answer, as a dry run since it is a GET", () =>
    Effect.gen(function*() {
      const response = yield* Effect.promise(() => get(`${real}?format=json`))
      expect(response.headers.get("content-type")).toContain("application/json")
      const list = tools.find((t) => t.name === "list")!
      expect(yield* Effect.promise(() => response.json())).toEqual(yield* expected(list, {}, callerOf(undefined), true))
    }))
})

describe("a tool's page", () => {
  it("shows the form derived from the tool's fields, with dry_run, and runs nothing on GET", async () => {
    const page = await (await get(`${real}/echo?word=%3Cb%3Ehi`, aliceCookie)).text()
    expect(page).toContain(`<form method="post" action="${real}/echo"`)
    expect(page).toContain(`<input type="text" name="word" id="f-word" value="&lt;b&gt;hi" required>`)
    expect(page).toContain(`<input type="text" name="option" id="f-option" value="">`)
    expect(page).toContain(`<input type="checkbox" name="flag" id="f-flag" value="on">`)
    expect(page).toContain(`<input type="checkbox" name="dry_run" id="f-dry_run" value="on">`)
    expect(page).not.toContain(`id="ocx-answer"`)
    expect(page).not.toContain("<b>hi")
  })

  it("has a select for a choice, a number for an integer and a textarea for JSON", async () => {
    const page = await (await get(`${test}/guarded`)).text()
    expect(page).toContain(`<select name="color" id="f-color"><option value=""></option><option value="red">red</option><option value="blue">blue</option></select>`)
    expect(page).toContain(`<input type="number" step="1" name="times" id="f-times" value="">`)
    expect(page).toContain(`<textarea name="extra" id="f-extra" placeholder="JSON"></textarea>`)
  })

  it("an unknown tool is a 404 naming the tools", async () => {
    const response = await get(`${real}/frobnicate`)
    expect(response.status).toBe(404)
    expect(await response.text()).toContain(`no tool named &quot;frobnicate&quot;; the tools are ${webTools.map((t) => t.name).join(", ")}`)
  })

  it("a tool the web does not offer is refused, naming where it is offered, and nothing runs", async () => {
    const before = state()
    expect(notOfferedMessage("cgi", named("stage"))).toBe(
      "stage is not offered by the OCX web page: it runs the checkout's own code; it is offered by the command line (ocx2) and MCP"
    )
    expect(notOfferedMessage("cgi", named("post"))).toBe(
      "post is not offered by the OCX web page: on the web, post in Fossil's own forum page; it is offered by the command line (ocx2) and MCP"
    )
    for (const name of ["stage", "post"]) {
      const message = notOfferedMessage("cgi", named(name))
      const page = await get(`${real}/${name}`, aliceCookie)
      expect(page.status).toBe(404)
      expect(await page.text()).toContain(escape(message))
      const formPost = await post(`${real}/${name}`, { checkout: "/", to: "abc", text: "hi" }, { cookie: aliceCookie })
      expect(formPost.status).toBe(404)
      expect(await formPost.text()).toContain(escape(message))
      const jsonPost = await fetch(`${server.base}${real}/${name}`, {
        method: "POST",
        headers: { "content-type": "application/json", cookie: aliceCookie, referer: `${server.base}${real}/${name}` },
        body: JSON.stringify({ to: "abc", text: "hi", checkout: "/" })
      })
      expect(jsonPost.status).toBe(404)
      expect(await jsonPost.json()).toEqual({ tool: name, operations: [], stopped: { reason: "refused", message } })
      const help: any = await (await get(`${real}/help?format=json&tool=${name}`, aliceCookie)).json()
      expect(help.stopped).toEqual({ reason: "refused", message })
    }
    const list: any = await (await get(`${real}/list?format=json`, aliceCookie)).json()
    expect(list.output.tools.map((t: { name: string }) => t.name)).toEqual(webTools.map((t) => t.name))
    expect(state()).toBe(before)
  })
})

describe("pages made for people (issue 40)", () => {
  const runs = named("runs")
  it("the CLI's help and the did: lines are under a details fold, after the answer", async () => {
    const page = await (await get(`${real}/runs?limit=5`, aliceCookie)).text()
    const fold = page.indexOf(`<details class="ocx-details ocx-did"><summary>details</summary>`)
    expect(fold).toBeGreaterThan(page.indexOf(`id="ocx-answer"`))
    expect(page.indexOf(`<ul class="ocx-operations"><li>did: read`)).toBeGreaterThan(fold)
    const help = page.indexOf(`<details class="ocx-details ocx-help-fold"><summary>details</summary>`)
    expect(help).toBeGreaterThan(0)
    expect(page.indexOf(escape(runs.description))).toBeGreaterThan(help)
    expect(page.indexOf("<code>ocx2 runs")).toBeGreaterThan(help)
    expect(page.indexOf(escape(runs.description))).toBeGreaterThan(page.indexOf(`id="ocx-answer"`))
  })

  it("server paths are shown to setup users only: anonymous and bob see them redacted, in the page and its JSON", async () => {
    const forAlice = await (await get(`${real}/runs`, aliceCookie)).text()
    expect(forAlice).toContain(escape(server.repository))
    for (const cookie of [undefined, bobCookie]) {
      const page = await (await get(`${real}/runs`, cookie)).text()
      expect(page).toContain(`data-reason="completed"`)
      expect(page).not.toContain(server.repository)
      expect(page).toContain("[server path]")
      const answer: any = await (await get(`${real}/runs?format=json`, cookie)).json()
      expect(JSON.stringify(answer)).not.toContain(server.repository)
      expect(answer.output.repository).toBe("[server path]")
    }
    const answer: any = await (await get(`${real}/runs?format=json`, aliceCookie)).json()
    expect(answer.output.repository).toBe(server.repository)
  })

  it("the landing page is the runs list, of the whole width, with its filters as a form, who acts, and a link to the tools", async () => {
    const response = await get(real, aliceCookie)
    expect(response.status).toBe(200)
    const page = await response.text()
    expect(page).toMatch(/<title>[^<]*OCX runs\s*<\/title>/)
    expect(page).toContain(`<div class="ocx ocx-full">`)
    expect(page).toContain(`<table class="ocx-runs" id="ocx-runs" data-poll="${escape(`${real}/runs?format=json`)}" data-page="${real}/runs">`)
    expect(page).toContain(`<form method="get" action="${real}" class="ocx-form ocx-filters">`)
    expect(page).toContain(`<select name="state" id="f-state">`)
    expect(page).toContain(`href="${real}/tools"`)
    expect(page).toContain("You act as <b>alice</b>")
    // a filter keeps to the landing page, and its live JSON asks the same
    const filtered = await (await get(`${real}?state=open&node=lab`, aliceCookie)).text()
    expect(filtered).toContain(`data-poll="${escape(`${real}/runs?state=open&node=lab&format=json`)}"`)
    // and a new run's row comes from the page itself, with the same filters
    expect(filtered).toContain(`data-page="${escape(`${real}/runs?state=open&node=lab`)}"`)
  })

  it("a run that does not exist is a 404 page saying so, and 404 in JSON", async () => {
    const response = await get(`${real}/watch?run=0123456789abcdef`, aliceCookie)
    expect(response.status).toBe(404)
    expect(await response.text()).toContain("0123456789abcdef names no run")
    const json = await get(`${real}/watch?run=0123456789abcdef&format=json`, aliceCookie)
    expect(json.status).toBe(404)
    expect(((await json.json()) as any).stopped.message).toContain("names no run")
  })
})

describe("a POST from the tool's own page", () => {
  it.live("runs echo and shows its answer; its JSON is runTool's answer", () =>
    Effect.gen(function*() {
      const response = yield* Effect.promise(() => post(`${real}/echo`, { word: "hello", option: "x", flag: "on" }, { cookie: aliceCookie }))
      expect(response.status).toBe(200)
      const page = yield* Effect.promise(() => response.text())
      expect(page).toContain(`data-reason="completed"`)
      expect(page).toContain("<tr><th>word</th><td>hello</td></tr>")
      const json = yield* Effect.promise(() => post(`${real}/echo?format=json`, { word: "hello", option: "x", flag: "on" }, { cookie: aliceCookie }))
      expect(json.headers.get("content-type")).toContain("application/json")
      expect(yield* Effect.promise(() => json.json())).toEqual(yield* expected(echo, { word: "hello", option: "x", flag: true }, callerOf("alice")))
    }))

  it.live("a format=json field and a JSON body are answered in JSON too", () =>
    Effect.gen(function*() {
      const field = yield* Effect.promise(() => post(`${real}/echo`, { word: "w", format: "json", dry_run: "on" }))
      expect(yield* Effect.promise(() => field.json())).toEqual(yield* expected(echo, { word: "w" }, callerOf(undefined), true))
      const body = yield* Effect.promise(() => fetch(`${server.base}${real}/echo`, {
        method: "POST",
        headers: { "content-type": "application/json", referer: `${server.base}${real}/echo` },
        body: JSON.stringify({ word: "j", flag: true, dry_run: false })
      }))
      expect(yield* Effect.promise(() => body.json())).toEqual(yield* expected(echo, { word: "j", flag: true }, callerOf(undefined)))
    }))

  it.live("a tool with an effect does it for a user it allows; a dry run only says it would", () =>
    Effect.gen(function*() {
      const dry = yield* Effect.promise(() => post(`${test}/guarded?format=json`, { word: "dry", dry_run: "on" }, { cookie: aliceCookie }))
      expect(yield* Effect.promise(() => dry.json())).toEqual(yield* expected(guarded(), { word: "dry" }, callerOf("alice"), true))
      expect(marked()).toBe("")
      const done = yield* Effect.promise(() => post(`${test}/guarded?format=json`, { word: "first", color: "red", times: "2", extra: `{"a":1}` }, { cookie: aliceCookie }))
      expect(yield* Effect.promise(() => done.json())).toEqual({
        tool: "guarded",
        operations: [{ op: "mark", detail: `first in ${marks}`, done: true }],
        output: { marked: "first" },
        stopped: { reason: "completed" }
      })
      expect(marked()).toBe("first\n")
    }))

  it.live("refuses a tool to a user it does not allow, in runTool's words", () =>
    Effect.gen(function*() {
      const before = marked()
      const json = yield* Effect.promise(() => post(`${test}/guarded?format=json`, { word: "bob" }, { cookie: bobCookie }))
      const answer: any = yield* Effect.promise(() => json.json())
      expect(answer).toEqual(yield* expected(guarded(), { word: "bob" }, callerOf("bob")))
      expect(answer.stopped).toEqual({ reason: "refused", message: "guarded is for a user with Setup (s)" })
      const page = yield* Effect.promise(async () => (await post(`${test}/guarded`, { word: "bob" }, { cookie: bobCookie })).text())
      expect(page).toContain(`<p class="generalError ocx-stopped">Refused: guarded is for a user with Setup (s)</p>`)
      const anonymous: any = yield* Effect.promise(async () => (await post(`${test}/guarded?format=json`, { word: "anon" })).json())
      expect(anonymous.stopped.reason).toBe("refused")
      expect(marked()).toBe(before)
    }))

  it.live("a bad argument is refused by the tool's schema, naming the field", () =>
    Effect.gen(function*() {
      const answer: any = yield* Effect.promise(async () => (await post(`${test}/guarded?format=json`, { word: "w", times: "many" }, { cookie: aliceCookie })).json())
      expect(answer).toEqual(yield* expected(guarded(), { word: "w", times: "many" }, callerOf("alice")))
      expect(answer.stopped.message).toContain("times")
    }))
})

describe("a POST that is not from the tool's own page", () => {
  it("without a Referer, from another site, or from another page is refused and nothing runs", async () => {
    const before = marked()
    const cases: Array<[string | null, string]> = [
      [null, "this request has no Referer"],
      ["http://evil.example/ext/ocx2-cgi-test/guarded", "this request came from http://evil.example/ext/ocx2-cgi-test/guarded"],
      [`${server.base}${test}/echo`, `this request came from ${server.base}${test}/echo`]
    ]
    for (const [referer, words] of cases) {
      const response = await post(`${test}/guarded`, { word: "csrf" }, { cookie: aliceCookie, referer })
      expect(response.status).toBe(403)
      const page = await response.text()
      expect(page).toContain(`a change is taken only from its own page, ${server.base}${test}/guarded`)
      expect(page).toContain(words)
      expect(page).toContain(`<div class="header">`)
      const json = await post(`${test}/guarded?format=json`, { word: "csrf" }, { cookie: aliceCookie, referer })
      expect(json.status).toBe(403)
      expect(((await json.json()) as any).stopped.reason).toBe("refused")
    }
    expect(marked()).toBe(before)
  })

  it("a forged create, from another site or with no Referer, writes no run", async () => {
    const before = state()
    const run = { title: "forged", node: "lab", objective: "x", user: "builder", fields: JSON.stringify({ process: { command: ["true"] } }) }
    for (const referer of [null, "http://evil.example/ext/ocx2-cgi/create", `${server.base}${real}/echo`]) {
      const response = await post(`${real}/create`, run, { cookie: aliceCookie, referer })
      expect(response.status).toBe(403)
      expect(await response.text()).toContain(`a change is taken only from its own page, ${server.base}${real}/create`)
    }
    expect(state()).toBe(before)
    // the same form from its own page writes the run: the refusal above was the Referer's alone
    const done: any = await (await post(`${real}/create?format=json`, run, { cookie: aliceCookie })).json()
    expect(done.stopped).toEqual({ reason: "completed" })
    expect(done.output.run).toMatch(/^[0-9a-f]{64}$/)
    expect(state()).not.toBe(before)
  })
})

describe("bad requests", () => {
  it("are 400 pages naming what is wrong, never a crash", async () => {
    const multipart = await fetch(`${server.base}${real}/echo`, {
      method: "POST",
      headers: { "content-type": "multipart/form-data; boundary=x", referer: `${server.base}${real}/echo` },
      body: "--x--"
    })
    expect(multipart.status).toBe(400)
    expect(await multipart.text()).toContain("a POST must be sent as application/x-www-form-urlencoded or application/json, not multipart/form-data")
    const badJson = await fetch(`${server.base}${real}/echo?format=json`, {
      method: "POST",
      headers: { "content-type": "application/json", referer: `${server.base}${real}/echo` },
      body: "{nope"
    })
    expect(badJson.status).toBe(400)
    expect(((await badJson.json()) as any).stopped.message).toContain("the body is not valid JSON")
    const badDryRun = await post(`${real}/echo`, { word: "w", dry_run: "maybe" })
    expect(badDryRun.status).toBe(400)
    expect(await badDryRun.text()).toContain("dry_run: expected on, true, 1, off, false or 0, not &quot;maybe&quot;")
  })

  it.live("a JSON GET of a tool runs it only as a dry run", () =>
    Effect.gen(function*() {
      const before = marked()
      const answer: any = yield* Effect.promise(async () => (await get(`${test}/guarded?format=json&word=viaget`, aliceCookie)).json())
      expect(answer).toEqual(yield* expected(guarded(), { word: "viaget" }, callerOf("alice"), true))
      expect(answer.operations).toEqual([{ op: "mark", detail: `viaget in ${marks}`, done: false }])
      expect(marked()).toBe(before)
    }))
})
