import * as Schema from "effect/Schema"
import { describe, expect, it } from "vitest"
import { makeCgi, requestFromEnv } from "../../src/adapters/Cgi.js"
import { escapeHtml, form } from "../../src/adapters/html.js"
import { fromForm, fromObject } from "../../src/adapters/input.js"
import { inputJsonSchema } from "../../src/adapters/jsonSchema.js"
import { tools } from "../../src/tools/registry.js"
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
    expect(fromForm(guarded, new URLSearchParams({ word: "w", times: "x", extra: "{", stray: "1", format: "json" }))).toEqual({
      _tag: "Input",
      raw: { word: "w", times: "x", extra: "{", stray: "1" },
      dryRun: false
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
