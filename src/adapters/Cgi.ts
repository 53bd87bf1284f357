// The CGI adapter, run by Fossil from its extension root: Fossil authenticates the viewer and
// passes FOSSIL_USER and FOSSIL_CAPABILITIES. It encodes requests and answers; runTool decides.
//
// Rules of this entry point:
// - A tool runs for real only from a POST whose Referer is that tool's own page (same origin,
//   same path), as Fossil demands of its own forms: another site cannot make a viewer's browser
//   act for it. A POST without it is refused and nothing runs. The one other page taken is the run
//   page (watch) for its stop, start and run-again buttons (stop, run, create): same origin, that page's path.
// - Server paths (ROOT, the repository's file) are shown to setup users only (Redact.ts).
// - The landing page is the runs list; the tools' list is BASE/tools.
// - A GET never changes anything: it shows the form, refilled from the query string. A JSON
//   client may GET a tool's page with ?format=json and the tool's arguments: the tool then runs
//   as a dry run, which by its contract performs nothing, and the answer says so ("dry_run"). A tool
//   that only reads (runs, read, watch) runs on a GET, its page's form too, since it changes nothing.
// - The pages offer the tools the web offers (seed 001's table): not stage, which runs the
//   checkout's own code, nor post (people post in Fossil's own forum page), nor node. A call for
//   one of those is refused, naming where it is offered.
// - JSON (the exact answer of runTool, as `ocx2 --json` prints it) is chosen by ?format=json, a
//   `format=json` form field, a JSON body (application/json, the tool's arguments and dry_run as
//   one object), or an Accept header naming application/json (Fossil 2.21's own server does not
//   pass Accept on to an extension, so clients should use format=json).
// - The release root is the server's (seed 001): accept, rollback, hook, unhook and status act on
//   (or show) the root the page's
//   own program was released into (its real path, every link followed: ocx2-cgi -> ROOT/current/
//   ocx2-cgi, ocx2-cgi-next -> ROOT/next/ocx2-cgi), never on one from the request. Their forms do
//   not offer `root`, and the tools refuse one sent in a form, a query or a JSON body. Each page
//   says which release serves it: the active release, or the pre-release candidate (ocx2-cgi-next).

import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import { resolve } from "node:path"
import type { ReleaseRoot } from "../../services/ReleaseRoot.js"
import { type ServingRelease, servingLine, servingOf } from "../release/Served.js"
import { runTool } from "../tools/RunTool.js"
import { type Answer, type Caller, notOfferedMessage, offeredBy, type Tool } from "../tools/Tool.js"
import { leadHtml, ocxPage, problemPage, TOOLS, toolPage } from "./Html.js"
import { fieldsOf } from "../tools/Fields.js"
import { FORMAT, fromForm, fromObject, type Decoded } from "./Input.js"
import { answerFor, redactText, seesServerPaths } from "./Redact.js"
import { isNoRun } from "../follow/Follow.js"
import { isNothingNamed } from "../tools/support/NothingNamed.js"

export interface CgiRequest {
  readonly method: string
  /** The extension's own path, such as /ext/ocx2-cgi (Fossil puts its top path before /ext). */
  readonly scriptName: string
  readonly pathInfo: string
  readonly query: string
  /** This server's origin as the browser sees it, such as http://127.0.0.1:8080. */
  readonly origin: string
  readonly referer: string | undefined
  readonly accept: string | undefined
  readonly contentType: string | undefined
  readonly body: string
  readonly caller: Caller
  readonly repository: string | undefined
  /** Fossil's nonce for this page's scripts (its Content-Security-Policy allows no other inline script) */
  readonly nonce?: string | undefined
}

export interface CgiResponse {
  readonly status: number
  /** text/html and application/json; a document tool's own type (metrics: text/plain; version=0.0.4) */
  readonly contentType: string
  readonly body: string
  readonly headers?: Readonly<Record<string, string>>
}

const reasons: Record<number, string> = { 200: "OK", 401: "Unauthorized", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 500: "Internal Server Error" }

/**
 * Fossil (2.21, extcgi.c and doc.c's document_render) keeps only the media type of an extension's
 * answer, and puts an answer of exactly `text/plain` inside its skin as an HTML page; any type it
 * does not render it passes on as it is. Media types are case-insensitive (RFC 9110 8.3.1), so
 * plain text is written `Text/Plain`: Fossil passes it on, and a client (a Prometheus scrape)
 * reads it as text/plain.
 */
const fossilPassesOn = (contentType: string): string => contentType.replace(/^text\/plain\b/i, "Text/Plain")

/** The CGI reply as Fossil reads it: header lines, a blank line, the body. */
export const formatCgiResponse = (response: CgiResponse): string =>
  `Status: ${response.status} ${reasons[response.status] ?? ""}\r\nContent-Type: ${fossilPassesOn(response.contentType)}; charset=utf-8\r\n${
    Object.entries(response.headers ?? {}).map(([name, value]) => `${name}: ${value}\r\n`).join("")
  }\r\n${response.body}`

const wantsJson = (request: CgiRequest, params: URLSearchParams | undefined): boolean =>
  new URLSearchParams(request.query).get(FORMAT) === "json" ||
  params?.get(FORMAT) === "json" ||
  (request.accept !== undefined && /\bapplication\/json\b/.test(request.accept))

const json = (status: number, value: unknown): CgiResponse => ({ status, contentType: "application/json", body: JSON.stringify(value) })
const html = (status: number, body: string): CgiResponse => ({ status, contentType: "text/html", body })

/** A refusal made here (not by a tool) keeps the answer's one shape for JSON clients. */
const refusal = (tool: string, message: string): Answer<never> => ({ tool, operations: [], stopped: { reason: "refused", message } })

/** The form or JSON body of a POST; a problem names what could not be read. */
const postParams = (request: CgiRequest): { params: URLSearchParams; object?: unknown } | { problem: string } => {
  const type = (request.contentType ?? "").split(";")[0]!.trim().toLowerCase()
  if (type === "application/json") {
    try {
      return { params: new URLSearchParams(), object: request.body.trim() === "" ? {} : JSON.parse(request.body) }
    } catch (error) {
      return { problem: `the body is not valid JSON: ${(error as Error).message}` }
    }
  }
  if (type === "application/x-www-form-urlencoded" || (type === "" && request.body === "")) {
    return { params: new URLSearchParams(request.body) }
  }
  return { problem: `a POST must be sent as application/x-www-form-urlencoded or application/json, not ${type || "untyped content"}` }
}

/** The page the form is on; a change is taken only when the Referer is exactly that page. */
const refererProblem = (request: CgiRequest, page: string): string | undefined => {
  const expected = `${request.origin}${page}`
  if (request.referer === undefined || request.referer === "") {
    return `a change is taken only from its own page, ${expected}: this request has no Referer, so nothing was done`
  }
  let referer: URL
  try {
    referer = new URL(request.referer)
  } catch {
    return `a change is taken only from its own page, ${expected}: the Referer "${request.referer}" is not a URL, so nothing was done`
  }
  return referer.origin === request.origin && referer.pathname === page
    ? undefined
    : `a change is taken only from its own page, ${expected}: this request came from ${referer.origin}${referer.pathname}, so nothing was done`
}

/** The pages, besides a tool's own, whose forms post to it: the run page's stop, start and run-again buttons. */
const fromRunPage: Readonly<Record<string, ReadonlyArray<string>>> = { stop: ["watch"], run: ["watch"], create: ["watch"] }

export type Cgi = (request: CgiRequest) => Promise<CgiResponse>

export interface CgiOptions {
  /** The release serving these pages (undefined: a program in no release root); not known when absent. */
  readonly release?: { readonly serving: ServingRelease | undefined }
}

/** The tools whose release root is the page's own, never the request's (seed 001). */
const releaseTools: ReadonlyArray<string> = ["accept", "rollback", "hook", "unhook", "status", "metrics"]

/**
 * A document tool's GET (metrics): its document as it is, in its own type, for a program that
 * reads it (a Prometheus scrape); a refusal is plain text, 401 when the request brought neither a
 * login nor a token, 403 when what it brought may not read it.
 */
const documentAnswer = (tool: Tool, answer: Answer<unknown>, caller: Caller): CgiResponse => {
  const text = (status: number, body: string, headers?: Record<string, string>): CgiResponse =>
    ({ status, contentType: "text/plain", body: `${body}\n`, ...(headers !== undefined ? { headers } : {}) })
  if (answer.stopped.reason === "completed" && answer.output !== undefined) {
    return { status: 200, contentType: tool.document!.contentType, body: tool.document!.body(answer.output) }
  }
  const message = answer.stopped.message ?? answer.stopped.reason
  if (answer.stopped.reason === "failed") return text(500, message)
  return caller.user === undefined && caller.token === undefined
    ? text(401, message, { "WWW-Authenticate": 'Bearer realm="ocx2"' })
    : text(403, message)
}

/** The CGI as a function of the tool list: one request in, one response out, never a throw. */
export const makeCgi = (allTools: ReadonlyArray<Tool>, options: CgiOptions = {}): Cgi => async (request) => {
  const tools = offeredBy("cgi", allTools)
  // every answer as the caller may see it: server paths for setup users only
  const ask = async (tool: Tool, raw: unknown, dryRun: boolean): Promise<Answer<unknown>> =>
    answerFor(await Effect.runPromise(runTool(tool, raw, { caller: request.caller, dryRun, repository: request.repository, entryPoint: "cgi", origin: request.origin })), request.caller)
  // which release serves the pages: on every page when it is a release, else on the release tools' pages
  // it names ROOT: a server path, for setup users only
  const release = options.release === undefined ? undefined
    : seesServerPaths(request.caller) ? servingLine(options.release.serving) : redactText(servingLine(options.release.serving))
  const inRoot = options.release?.serving !== undefined
  const base = request.scriptName
  const query = new URLSearchParams(request.query)
  const name = request.pathInfo.replace(/^\/+/, "").replace(/\/+$/, "")
  const method = request.method.toUpperCase()

  if (method !== "GET" && method !== "HEAD" && method !== "POST") {
    const message = `the method ${method} is not taken here: GET shows a page, POST runs a tool`
    return wantsJson(request, undefined) ? json(405, refusal(name || "ocx", message)) : html(405, problemPage("Not allowed", message, base))
  }

  if (name === "") {
    if (method === "POST") {
      const message = "POST to a tool's own page, such as " + `${base}/${tools[0]?.name ?? "TOOL"}`
      return wantsJson(request, undefined) ? json(405, refusal("ocx", message)) : html(405, problemPage("Not allowed", message, base))
    }
    if (wantsJson(request, undefined)) {
      const list = tools.find((t) => t.name === "list")
      if (list === undefined) return json(404, refusal("list", "this OCX offers no list tool"))
      return json(200, answerFor(await Effect.runPromise(runTool(list, {}, { caller: request.caller, dryRun: true, repository: request.repository, entryPoint: "cgi" })), request.caller))
    }
    // the landing page is the runs list (issue 40), with who acts, which release and the tools' list above it
    const runs = tools.find((t) => t.name === "runs")
    if (runs === undefined) return html(200, ocxPage(tools, base, request.caller, inRoot ? release : undefined))
    const decoded = fromForm(runs, withoutFormat(query))
    if (decoded._tag === "Problem") return html(400, problemPage("Bad request", decoded.message, base))
    const answer = await ask(runs, decoded.raw, false)
    return html(200, toolPage(runs, base, query, answer, request.caller, {
      base, nonce: request.nonce, title: "OCX runs", release: inRoot ? release : undefined,
      lead: leadHtml(base, request.caller, inRoot ? release : undefined)
    }))
  }
  // the list of the tools, once the landing page
  if (name === TOOLS && !tools.some((t) => t.name === TOOLS)) {
    return html(200, ocxPage(tools, base, request.caller, inRoot ? release : undefined))
  }

  const jsonBody = (request.contentType ?? "").split(";")[0]!.trim().toLowerCase() === "application/json"
  const elsewhere = allTools.find((t) => t.name === name && !tools.includes(t))
  if (elsewhere !== undefined) {
    const message = notOfferedMessage("cgi", elsewhere)
    return jsonBody || wantsJson(request, undefined) ? json(404, refusal(name, message)) : html(404, problemPage("Not offered here", message, base))
  }
  const tool = tools.find((t) => t.name === name)
  if (tool === undefined) {
    const message = `no tool named "${name}"; the tools are ${tools.map((t) => t.name).join(", ")}`
    return jsonBody || wantsJson(request, undefined) ? json(404, refusal(name, message)) : html(404, problemPage("No such tool", message, base))
  }
  const page = `${base}/${tool.name}`
  const context = (dryRun: boolean) => ({ caller: request.caller, dryRun, repository: request.repository, entryPoint: "cgi" as const, origin: request.origin })
  const isReleaseTool = releaseTools.includes(tool.name)
  const pageOptions = {
    release: inRoot || isReleaseTool ? release : undefined,
    hidden: isReleaseTool ? ["root"] : []
  }

  if (method !== "POST") {
    // a reading tool runs on a GET once its required fields are given (its form is a GET too)
    const reads = tool.readOnly === true && fieldsOf(tool).every((f) => f.optional || f.kind === "boolean" || (query.get(f.name) ?? "") !== "")
    if (tool.document !== undefined && reads && !wantsJson(request, undefined)) {
      const decoded = fromForm(tool, withoutFormat(query))
      if (decoded._tag === "Problem") return { status: 400, contentType: "text/plain", body: `${decoded.message}\n` }
      return documentAnswer(tool, await Effect.runPromise(runTool(tool, decoded.raw, context(false))), request.caller)
    }
    if (!wantsJson(request, undefined)) {
      if (!reads) return html(200, toolPage(tool, page, query, undefined, request.caller, pageOptions))
      const decoded = fromForm(tool, withoutFormat(query))
      if (decoded._tag === "Problem") return html(400, problemPage("Bad request", decoded.message, page))
      const answer = await ask(tool, decoded.raw, decoded.dryRun)
      // a page opened with nothing asked shows its form, not a refusal of nothing (receipt needs an artifact or a user)
      const asked = fieldsOf(tool).some((f) => query.has(f.name))
      const shown = !asked && answer.stopped.reason === "refused" ? undefined : answer
      return html(statusOf(answer), toolPage(tool, page, query, shown, request.caller, { ...pageOptions, base, nonce: request.nonce }))
    }
    const decoded = fromForm(tool, withoutFormat(query))
    if (decoded._tag === "Problem") return json(400, refusal(tool.name, decoded.message))
    // A GET only ever runs a dry run, or a tool that only reads: see the rules at the top of this file.
    const answer = await ask(tool, decoded.raw, tool.readOnly === true ? decoded.dryRun : true)
    return json(statusOf(answer), answer)
  }

  const body = postParams(request)
  const asJson = jsonBody || wantsJson(request, "params" in body ? body.params : undefined)
  if ("problem" in body) return asJson ? json(400, refusal(tool.name, body.problem)) : html(400, problemPage("Bad request", body.problem, page))
  // a run page's buttons post to stop and run: taken from that page too (same origin, a known page)
  const notFromItsPage = (fromRunPage[tool.name] ?? []).some((other) => refererProblem(request, `${base}/${other}`) === undefined)
    ? undefined
    : refererProblem(request, page)
  if (notFromItsPage !== undefined) {
    return asJson ? json(403, refusal(tool.name, notFromItsPage)) : html(403, problemPage("Refused", notFromItsPage, page))
  }
  const decoded: Decoded = body.object !== undefined ? fromJsonBody(body.object) : fromForm(tool, body.params)
  if (decoded._tag === "Problem") {
    return asJson ? json(400, refusal(tool.name, decoded.message)) : html(400, problemPage("Bad request", decoded.message, page))
  }
  const answer = await ask(tool, decoded.raw, decoded.dryRun)
  return asJson ? json(200, answer) : html(200, toolPage(tool, page, body.params, answer, request.caller, { ...pageOptions, base, nonce: request.nonce }))
}

/**
 * A run that does not exist is not found (404), as a page that does not exist is: on the run page
 * (watch) and where read reads it, a name that names nothing the viewer may read.
 */
const statusOf = (answer: Answer<unknown>): number =>
  answer.stopped.reason === "refused" && (isNoRun(answer.stopped.message) || isNothingNamed(answer.stopped.message)) ? 404 : 200

const withoutFormat = (params: URLSearchParams): URLSearchParams => {
  const copy = new URLSearchParams(params)
  copy.delete(FORMAT)
  return copy
}

const fromJsonBody = (object: unknown): Decoded => {
  const decoded = fromObject(object)
  if (decoded._tag === "Input" && FORMAT in decoded.raw) {
    const { [FORMAT]: _format, ...raw } = decoded.raw
    return { ...decoded, raw }
  }
  return decoded
}

/** What the CGI environment says about the request; Fossil clears every other variable. */
export const requestFromEnv = (env: NodeJS.ProcessEnv, body: string): CgiRequest => {
  const https = (env.HTTPS ?? "").toLowerCase() === "on" || env.REQUEST_SCHEME === "https"
  const scheme = https ? "https" : "http"
  const defaultPort = https ? "443" : "80"
  const host = env.HTTP_HOST ??
    `${env.SERVER_NAME ?? "localhost"}${env.SERVER_PORT !== undefined && env.SERVER_PORT !== defaultPort ? `:${env.SERVER_PORT}` : ""}`
  const user = env.FOSSIL_USER !== undefined && env.FOSSIL_USER !== "" ? env.FOSSIL_USER : undefined
  const token = tokenOf(env)
  return {
    method: env.REQUEST_METHOD ?? "GET",
    scriptName: env.SCRIPT_NAME ?? "",
    pathInfo: env.PATH_INFO ?? "",
    query: env.QUERY_STRING ?? "",
    origin: originOf(`${scheme}://${host}`),
    referer: env.HTTP_REFERER,
    accept: env.HTTP_ACCEPT,
    contentType: env.CONTENT_TYPE,
    body,
    caller: { user, capabilities: env.FOSSIL_CAPABILITIES ?? "", sandboxed: false, ...(token !== undefined ? { token } : {}) },
    // relative when the server was started with a relative path; the CGI runs in the server's directory
    repository: env.FOSSIL_REPOSITORY !== undefined && env.FOSSIL_REPOSITORY !== "" ? resolve(env.FOSSIL_REPOSITORY) : undefined,
    nonce: env.FOSSIL_NONCE !== undefined && env.FOSSIL_NONCE !== "" ? env.FOSSIL_NONCE : undefined
  }
}

/**
 * The token the request carried for a tool that takes one (metrics): `Authorization: Bearer TOKEN`
 * where the server passes it on (AUTH_TYPE and AUTH_CONTENT, as later Fossils hand an extension the
 * header, or HTTP_AUTHORIZATION), else the cookie `ocx2-metrics-token`: Fossil 2.21 passes an
 * extension no Authorization header at all, but the request's cookies (HTTP_COOKIE) it does.
 */
const tokenOf = (env: NodeJS.ProcessEnv): string | undefined => {
  const whole = env.AUTH_TYPE !== undefined && env.AUTH_TYPE !== "" ? `${env.AUTH_TYPE} ${env.AUTH_CONTENT ?? ""}` : env.HTTP_AUTHORIZATION
  const bearer = /^\s*Bearer\s+(\S+)\s*$/i.exec(whole ?? "")?.[1]
  if (bearer !== undefined) return bearer
  for (const part of (env.HTTP_COOKIE ?? "").split(";")) {
    const m = /^\s*ocx2-metrics-token=(\S+?)\s*$/.exec(part)
    if (m !== null) return m[1]
  }
  return undefined
}

/** The origin as URL normalizes it (lower-case host, default port dropped), as a Referer's is. */
const originOf = (url: string): string => {
  try {
    return new URL(url).origin
  } catch {
    return url
  }
}

/** Reads exactly CONTENT_LENGTH bytes: Fossil keeps the CGI's stdin open, so it never ends. */
export const readBody = (input: NodeJS.ReadableStream, length: number): Promise<Buffer> =>
  new Promise((resolveBody, reject) => {
    if (!(length > 0)) return resolveBody(Buffer.alloc(0))
    const chunks: Array<Buffer> = []
    let size = 0
    const onData = (chunk: Buffer) => {
      chunks.push(chunk)
      size += chunk.length
      if (size >= length) done()
    }
    const done = () => {
      input.off("data", onData)
      input.off("end", done)
      input.off("error", reject)
      input.pause()
      if ("destroy" in input && typeof input.destroy === "function") input.destroy()
      resolveBody(Buffer.concat(chunks).subarray(0, length))
    }
    input.on("data", onData)
    input.on("end", done)
    input.on("error", reject)
  })

/** A body larger than this is refused before it is read: no tool takes megabytes from a form. */
export const MAX_BODY = 1 << 20

/**
 * The whole CGI process: environment and stdin in, one reply on stdout; nothing escapes as a crash.
 * `program` is the CGI's own path as run (process.argv[1]): its real path says which release serves.
 */
export const runCgi = async (
  tools: ReadonlyArray<Tool>,
  /** the release roots as the host keeps them (bin/ gives the live layer) */
  releaseRoots: Layer.Layer<ReleaseRoot>,
  env: NodeJS.ProcessEnv = process.env,
  program: string | undefined = process.argv[1]
): Promise<void> => {
  // stdout is the reply: a tool that logs (console, or Effect's Console) writes to stderr instead
  for (const method of ["log", "info", "debug", "warn", "trace", "dir", "table"] as const) {
    console[method] = (...args: Array<unknown>) => console.error(...args)
  }
  // The request is read from `env`; a `fossil` a tool runs must not take itself for a CGI too,
  // which Fossil does whenever GATEWAY_INTERFACE is set (it then ignores its command line).
  delete process.env.GATEWAY_INTERFACE
  let response: CgiResponse
  try {
    const length = Number(env.CONTENT_LENGTH ?? "0")
    if (!Number.isFinite(length) || length < 0 || length > MAX_BODY) {
      response = html(400, problemPage("Bad request", `the body is ${env.CONTENT_LENGTH} bytes; at most ${MAX_BODY} are taken`, env.SCRIPT_NAME ?? "/"))
    } else {
      const body = (await readBody(process.stdin, length)).toString("utf8")
      const serving = await Effect.runPromise(servingOf(program).pipe(Effect.provide(releaseRoots)))
      response = await makeCgi(tools, { release: { serving } })(requestFromEnv(env, body))
    }
  } catch (error) {
    response = html(500, problemPage("Failed", `the OCX page failed: ${String((error as Error)?.message ?? error)}`, env.SCRIPT_NAME ?? "/"))
  }
  await new Promise<void>((done) => process.stdout.write(formatCgiResponse(response), () => done()))
}
