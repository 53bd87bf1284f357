import * as Schema from "effect/Schema"
import { describe, expect, it } from "@effect/vitest"
import { makeCgi, requestFromEnv } from "../../src/adapters/Cgi.js"
import { escapeHtml, form } from "../../src/adapters/Html.js"
import { fromForm, fromObject } from "../../src/adapters/Input.js"
import { inputJsonSchema } from "../../src/adapters/JsonSchema.js"
import * as Effect from "effect/Effect"
import { tools } from "../../src/tools/Registry.js"
import { runTool } from "../../src/tools/RunTool.js"
import { type EntryPoint, notOfferedMessage, offeredBy, offers } from "../../src/tools/Tool.js"
import { makeGuarded } from "./fixtures/guarded.js"

// The adapters' pure parts: how a form and an object become a tool's raw input, how pages are
// escaped, how the JSON Schema is derived, and how the CGI reads its environment.

const guarded = makeGuarded("/nonexistent/marks.log")

describe("fromForm", () => {
  it("encodes each kind of field as its control sends it; empty optional controls are not given", () => {
    const params = new URLSearchParams({ word: "w", color: "", times: "3", extra: `{"a":[1]}`, loud: "on", dry_run: "on" })
    expect(fromForm(guarded, params)).toEqual({ _tag: "Input", raw: { word: "w", times: 3, extra: { a: [1] }, loud: true }, dryRun: true })
    expect(fromForm(guarded, new URLSearchParams({ word: "", loud: "off" }))).toEqual({ _tag: "Input", raw: { word: "" }, dryRun: false })
  })

  it("passes what it cannot encode to the tool's schema, which names it", () => {
    expect(fromForm(guarded, new URLSearchParams({ word: "w", times: "x", stray: "1", format: "json" }))).toEqual({
      _tag: "Input",
      raw: { word: "w", times: "x", stray: "1" },
      dryRun: false
    })
    // a JSON field that does not parse is said where, as the command line says it (issue 40)
    expect(fromForm(guarded, new URLSearchParams({ word: "w", extra: "{\"a\": [1,]}" }))).toEqual({
      _tag: "Problem",
      message: "bad argument: extra: not JSON at line 1, column 10 (position 9): Unexpected token ']', \"{\"a\": [1,]}\" is not valid JSON"
    })
    expect(fromForm(guarded, new URLSearchParams({ word: "w", dry_run: "perhaps" }))).toEqual({
      _tag: "Problem",
      message: `dry_run: expected on, true, 1, off, false or 0, not "perhaps"`
    })
  })
})

describe("fromObject", () => {
  it("takes dry_run out of the arguments, as a boolean only", () => {
    expect(fromObject({ word: "w", dry_run: true })).toEqual({ _tag: "Input", raw: { word: "w" }, dryRun: true })
    expect(fromObject(undefined)).toEqual({ _tag: "Input", raw: {}, dryRun: false })
    expect(fromObject({ dry_run: 1 })).toEqual({ _tag: "Problem", message: "dry_run: expected a boolean, not 1" })
    expect(fromObject([1])).toEqual({ _tag: "Problem", message: "the arguments must be a JSON object, not [1]" })
  })
})

describe("html", () => {
  it("escapes everything it is given", () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe("&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;")
    const html = form(guarded, "/ext/x/guarded", new URLSearchParams({ word: `"><script>`, extra: "</textarea><b>" }))
    expect(html).not.toContain("<script>")
    expect(html).not.toContain("</textarea><b>")
    expect(html).toContain(`value="&quot;&gt;&lt;script&gt;"`)
  })
})

describe("inputJsonSchema", () => {
  it("is an object schema with dry_run, also for an empty input and a named (referenced) one", () => {
    const empty = inputJsonSchema(tools.find((t) => t.name === "list")!)
    expect(empty.type).toBe("object")
    expect(empty.properties).toEqual({ dry_run: { type: "boolean", description: "say what would be done, and do nothing" } })
    const named = inputJsonSchema({
      ...guarded,
      input: Schema.Struct({ a: Schema.String }).annotations({ identifier: "Named" })
    })
    expect(named.type).toBe("object")
    expect(named.$ref).toBeUndefined()
    expect(Object.keys(named.properties)).toEqual(["a", "dry_run"])
    expect(named.additionalProperties).toBe(false)
  })
})

describe("the CGI's view of a request", () => {
  const env = {
    REQUEST_METHOD: "POST",
    SCRIPT_NAME: "/repo/ext/ocx2-cgi",
    PATH_INFO: "/echo",
    HTTP_HOST: "Example.org",
    HTTPS: "on",
    CONTENT_TYPE: "application/x-www-form-urlencoded",
    FOSSIL_USER: "alice",
    FOSSIL_CAPABILITIES: "s",
    FOSSIL_REPOSITORY: "rel/repo.fossil"
  }

  it("reads the origin, the caller and the repository from the environment", () => {
    const request = requestFromEnv(env, "word=w")
    expect(request.origin).toBe("https://example.org")
    expect(request.caller).toEqual({ user: "alice", capabilities: "s", sandboxed: false })
    expect(request.repository).toBe(`${process.cwd()}/rel/repo.fossil`)
    expect(requestFromEnv({ SERVER_NAME: "h", SERVER_PORT: "8080", FOSSIL_USER: "" }, "").origin).toBe("http://h:8080")
    expect(requestFromEnv({ SERVER_NAME: "h", SERVER_PORT: "80" }, "").caller.user).toBeUndefined()
  })

  it("takes a change only from the tool's own page on the same origin", async () => {
    const cgi = makeCgi(tools)
    const from = async (referer: string | undefined) =>
      (await cgi(requestFromEnv({ ...env, ...(referer !== undefined ? { HTTP_REFERER: referer } : {}) }, "word=w&format=json"))).status
    expect(await from("https://example.org/repo/ext/ocx2-cgi/echo")).toBe(200)
    expect(await from("https://example.org/repo/ext/ocx2-cgi/echo?word=w")).toBe(200)
    expect(await from("http://example.org/repo/ext/ocx2-cgi/echo")).toBe(403)
    expect(await from("https://example.org:444/repo/ext/ocx2-cgi/echo")).toBe(403)
    expect(await from("https://example.org/repo/ext/ocx2-cgi/echo/")).toBe(403)
    expect(await from("https://example.org/repo/ext/ocx2-cgi")).toBe(403)
    expect(await from("not a url")).toBe(403)
    expect(await from(undefined)).toBe(403)
  })

  it("answers other methods with 405 and runs nothing", async () => {
    const response = await makeCgi(tools)(requestFromEnv({ ...env, REQUEST_METHOD: "DELETE" }, ""))
    expect(response.status).toBe(405)
    expect(response.body).toContain("the method DELETE is not taken here")
  })
})

describe("which entry points offer a tool", () => {
  const names = (entryPoint: EntryPoint) => offeredBy(entryPoint, tools).map((t) => t.name)
  const listed = (entryPoint: EntryPoint | undefined) =>
    runTool(tools[0]!, {}, {
      caller: { user: "a", capabilities: "", sandboxed: false }, dryRun: false, repository: undefined,
      ...(entryPoint !== undefined ? { entryPoint } : {})
    }).pipe(Effect.map((answer) => answer.output.tools.map((t: { name: string }) => t.name)))

  it.effect("follows seed 001's table: stage, post and node not on the web, node, hook, unhook, export, import and metrics not on MCP, attach, containers and supervise on the command line alone, all on the command line", () =>
    Effect.gen(function*() {
      const all = tools.map((t) => t.name)
      const without = (...out: Array<string>) => all.filter((n) => !out.includes(n))
      expect(names("cli")).toEqual(all)
      // node is in the registry once its helper's work lands; it is offered by the command line alone
      expect(names("cgi")).toEqual(without("stage", "post", "node", "init", "attach", "containers", "supervise"))
      expect(names("mcp")).toEqual(without("node", "init", "hook", "unhook", "attach", "export", "import", "containers", "supervise", "metrics"))
      expect(yield* listed("cli")).toEqual(all)
      expect(yield* listed("cgi")).toEqual(names("cgi"))
      expect(yield* listed("mcp")).toEqual(names("mcp"))
      expect(yield* listed(undefined)).toEqual(all)
    }))

  it.effect("help of a tool not offered where it is asked says where it is; the refusal names why", () =>
    Effect.gen(function*() {
      const help = tools.find((t) => t.name === "help")!
      const stage = tools.find((t) => t.name === "stage")!
      const context = { caller: { user: "a", capabilities: "s", sandboxed: false }, dryRun: false, repository: undefined }
      expect((yield* runTool(help, { tool: "stage" }, { ...context, entryPoint: "cgi" })).stopped).toEqual({
        reason: "refused",
        message: "stage is not offered by the OCX web page: it runs the checkout's own code; it is offered by the command line (ocx2) and MCP"
      })
      expect((yield* runTool(help, { tool: "stage" }, { ...context, entryPoint: "mcp" })).output.name).toBe("stage")
      expect((yield* runTool(help, { tool: "nope" }, { ...context, entryPoint: "mcp" })).stopped.message)
        .toBe(`no tool named "nope"; the tools are ${names("mcp").join(", ")}`)
      expect(offers("cli", stage)).toBe(true)
      expect(notOfferedMessage("cli", { ...guarded, offeredBy: ["mcp"] })).toBe("guarded is not offered by the command line (ocx2); it is offered by MCP")
    }))

  it("the CGI refuses a tool offered elsewhere before reading its input, even from its own page", async () => {
    const mcpOnly = { ...guarded, offeredBy: ["mcp"] as const }
    const cgi = makeCgi([...tools, mcpOnly])
    const env = {
      REQUEST_METHOD: "POST", SCRIPT_NAME: "/ext/ocx2-cgi", PATH_INFO: "/guarded", HTTP_HOST: "h", CONTENT_TYPE: "application/json",
      HTTP_REFERER: "http://h/ext/ocx2-cgi/guarded", FOSSIL_USER: "alice", FOSSIL_CAPABILITIES: "s"
    }
    const response = await cgi(requestFromEnv(env, `{"word": "w"}`))
    expect(response.status).toBe(404)
    expect(JSON.parse(response.body)).toEqual({
      tool: "guarded", operations: [], stopped: { reason: "refused", message: "guarded is not offered by the OCX web page; it is offered by MCP" }
    })
    const page = await cgi(requestFromEnv({ ...env, REQUEST_METHOD: "GET", CONTENT_TYPE: "" }, ""))
    expect(page.status).toBe(404)
    expect(page.body).toContain("guarded is not offered by the OCX web page; it is offered by MCP")
    // the tools' list (the landing page is the runs list)
    const ocx = await cgi(requestFromEnv({ ...env, REQUEST_METHOD: "GET", PATH_INFO: "/tools", CONTENT_TYPE: "" }, ""))
    expect(ocx.body).not.toContain("/ext/ocx2-cgi/guarded")
    expect(ocx.body).toContain("/ext/ocx2-cgi/echo")
  })
})
