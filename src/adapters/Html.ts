// The CGI's pages. Fossil wraps text/html in its skin only when the whole body is one
// <div class='fossil-doc' data-title='...'>, so every page is exactly that: the body content,
// Fossil's own classes where they fit, and a small style block that keeps forms usable on a phone.
// Links are absolute paths: Fossil's skin sets <base href> to the extension's own URL.

import { fieldsOf, usage, type Field } from "../tools/Fields.js"
import type { Answer, Caller, Tool } from "../tools/Tool.js"
import { DRY_RUN } from "./Input.js"
import { outputPages } from "./OutputPages.js"

export const escapeHtml = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)

const style = `<style>
.ocx { max-width: 48em; overflow-wrap: anywhere; }
.ocx.ocx-full { max-width: none; }
.ocx .ocx-lead { display: flex; flex-wrap: wrap; gap: 0.3em 1.5em; align-items: baseline; }
.ocx .ocx-lead p { margin: 0.3em 0; }
.ocx form.ocx-filters { display: flex; flex-wrap: wrap; gap: 0 1em; align-items: flex-end; }
.ocx form.ocx-filters .ocx-field { margin: 0.3em 0; }
.ocx form.ocx-filters .ocx-field .ocx-help { display: none; }
.ocx form.ocx-filters input[type=text], .ocx form.ocx-filters input[type=number], .ocx form.ocx-filters select { width: 10em; }
.ocx form.ocx-filters button { margin: 0.3em 0; padding: 0.35em 1.2em; }
.ocx.ocx-full .ocx-answer.ocx-completed { border: none; padding-left: 0; }
.ocx table.ocx-runs td.ocx-run, .ocx table.ocx-runs td.ocx-run code { white-space: nowrap; overflow-wrap: normal; }
.ocx .ocx-details { margin: 1em 0; }
.ocx .ocx-buttons { display: flex; flex-wrap: wrap; gap: 0.5em 1em; margin: 1em 0; }
.ocx .ocx-buttons form { margin: 0; }
.ocx .ocx-markdown pre { background: rgba(128,128,128,0.08); padding: 0.4em; }
.ocx .ocx-markdown blockquote { border-left: 3px solid rgba(128,128,128,0.4); margin: 0.5em 0; padding-left: 0.8em; }
.ocx .ocx-details > summary { cursor: pointer; opacity: 0.8; }
.ocx form { margin: 1em 0; }
.ocx .ocx-field { margin: 0.8em 0; }
.ocx .ocx-field > label { display: block; font-weight: bold; }
.ocx .ocx-field .ocx-help { display: block; font-size: 0.9em; opacity: 0.8; }
.ocx input[type=text], .ocx input[type=number], .ocx select, .ocx textarea {
  box-sizing: border-box; width: 100%; max-width: 40em; font-size: 1rem; padding: 0.35em; }
.ocx textarea { min-height: 6em; font-family: monospace; }
.ocx .ocx-check label { font-weight: normal; display: inline; }
.ocx input[type=checkbox] { width: 1.2em; height: 1.2em; vertical-align: middle; }
.ocx button { font-size: 1rem; padding: 0.5em 1.5em; margin-top: 0.5em; }
.ocx pre, .ocx code { white-space: pre-wrap; overflow-wrap: anywhere; }
.ocx table.label-value th { text-align: left; vertical-align: top; padding-right: 1em; }
.ocx .ocx-answer { border-left: 4px solid #888; padding: 0.2em 0 0.2em 0.8em; margin: 1em 0; }
.ocx .ocx-answer.ocx-completed { border-color: #2a2; }
.ocx .ocx-answer.ocx-dry_run { border-color: #36c; }
.ocx .ocx-answer.ocx-refused, .ocx .ocx-answer.ocx-failed { border-color: #c22; }
.ocx ul.ocx-tools li { margin: 0.6em 0; }
.ocx table.ocx-runs { border-collapse: collapse; width: 100%; overflow-wrap: break-word; }
.ocx table.ocx-runs td.ocx-took, .ocx table.ocx-runs td.ocx-when { white-space: nowrap; }
.ocx table.ocx-runs tr.ocx-new td { background: rgba(51,102,204,0.08); }
.ocx table.ocx-runs th, .ocx table.ocx-runs td { text-align: left; padding: 0.3em 0.6em 0.3em 0; vertical-align: top; border-bottom: 1px solid rgba(128,128,128,0.3); }
.ocx .ocx-state { font-weight: bold; white-space: nowrap; }
.ocx .ocx-state-started { color: #36c; } .ocx .ocx-state-waiting { color: #888; }
.ocx .ocx-state-refused, .ocx .ocx-state-lost, .ocx .ocx-state-failed { color: #c22; } .ocx .ocx-state-passed { color: #2a2; }
.ocx pre.ocx-stream { max-height: 40em; overflow: auto; background: rgba(128,128,128,0.1); padding: 0.5em; }
.ocx .ocx-stream .ocx-stderr { color: #c22; }
.ocx .ocx-stream .ocx-delivery, .ocx .ocx-stream .ocx-missed { color: #36c; }
.ocx .ocx-post { margin: 0.8em 0; border-left: 3px solid rgba(128,128,128,0.4); padding-left: 0.6em; }
.ocx .ocx-post-head { margin: 0.2em 0; }
.ocx .ocx-post pre, .ocx pre.ocx-file { background: rgba(128,128,128,0.08); padding: 0.4em; }
@media (max-width: 40em) { .ocx table.ocx-runs .ocx-wide { display: none; } }
</style>`

/** One page: the only outermost element is the fossil-doc div, so Fossil adds its skin. */
export const page = (title: string, body: string, full = false): string =>
  `<div class='fossil-doc' data-title='${escapeHtml(title)}'>\n${style}\n<div class="ocx${full ? " ocx-full" : ""}">\n${body}\n</div>\n</div>\n`

const who = (caller: Caller): string =>
  caller.user === undefined
    ? `<p>You are not logged in: you act as <b>nobody</b>, with capabilities <code>${escapeHtml(caller.capabilities || "(none)")}</code>.</p>`
    : `<p>You act as <b>${escapeHtml(caller.user)}</b>, with capabilities <code>${escapeHtml(caller.capabilities || "(none)")}</code>.</p>`

/** Which release serves the pages (seed 001: the web page shows the release root as the server's). */
const releaseLine = (release: string | undefined): string =>
  release === undefined ? "" : `<p class="ocx-release">${escapeHtml(release)}</p>`

export const ocxPage = (tools: ReadonlyArray<Tool>, base: string, caller: Caller, release?: string): string =>
  page(
    "OCX",
    [
      releaseLine(release),
      who(caller),
      `<ul class="ocx-tools">`,
      ...tools.map((tool) =>
        `<li><a href="${escapeHtml(`${base}/${tool.name}`)}">${escapeHtml(tool.name)}</a>: ${escapeHtml(tool.summary)}<br><code>${escapeHtml(usage(tool))}</code></li>`),
      `</ul>`
    ].filter((part) => part.length > 0).join("\n")
  )

/** The tools' list, once the landing page: now BASE/tools, the landing page is the runs list. */
export const TOOLS = "tools"

/** The top of the landing page: who acts, which release serves, and the other pages. */
export const leadHtml = (base: string, caller: Caller, release: string | undefined): string =>
  [
    `<div class="ocx-lead">`,
    who(caller).replace(/, with capabilities <code>[^<]*<\/code>/, ""),
    `<p><a href="${escapeHtml(`${base}/create`)}">New run</a> · <a href="${escapeHtml(`${base}/${TOOLS}`)}">All tools</a></p>`,
    `</div>`,
    releaseLine(release)
  ].filter((part) => part.length > 0).join("\n")

const control = (field: Field, value: string | undefined): string => {
  const id = `f-${field.name}`
  const name = `name="${escapeHtml(field.name)}" id="${escapeHtml(id)}"`
  const required = field.optional ? "" : " required"
  const help = field.description ? `<span class="ocx-help">${escapeHtml(field.description)}</span>` : ""
  const label = `<label for="${escapeHtml(id)}">${escapeHtml(field.name)}${field.optional ? " (optional)" : ""}</label>`
  switch (field.kind) {
    case "boolean": {
      const checked = value !== undefined && ["on", "true", "1", "yes"].includes(value.toLowerCase()) ? " checked" : ""
      return `<div class="ocx-field ocx-check"><input type="checkbox" ${name} value="on"${checked}> <label for="${escapeHtml(id)}">${escapeHtml(field.name)}</label>${help}</div>`
    }
    case "choice": {
      const options = [
        ...(field.optional ? [`<option value=""></option>`] : []),
        ...field.choices.map((choice) =>
          `<option value="${escapeHtml(choice)}"${choice === value ? " selected" : ""}>${escapeHtml(choice)}</option>`)
      ]
      return `<div class="ocx-field">${label}<select ${name}${required}>${options.join("")}</select>${help}</div>`
    }
    case "json":
      return `<div class="ocx-field">${label}<textarea ${name}${required} placeholder="JSON">${escapeHtml(value ?? "")}</textarea>${help}</div>`
    case "integer":
    case "number": {
      const step = field.kind === "integer" ? "1" : "any"
      return `<div class="ocx-field">${label}<input type="number" step="${step}" ${name} value="${escapeHtml(value ?? "")}"${required}>${help}</div>`
    }
    case "list":
      return `<div class="ocx-field">${label}<input type="text" ${name} value="${escapeHtml(value ?? "")}" placeholder="separated by spaces"${required}>${help}</div>`
    default:
      return `<div class="ocx-field">${label}<input type="text" ${name} value="${escapeHtml(value ?? "")}"${required}>${help}</div>`
  }
}

/**
 * The tool's form, derived from its fields, posting to the tool's own page; values refill it.
 * `hidden` names fields the page decides itself (the release tools' root): they are not offered.
 */
export const form = (tool: Tool, action: string, values: URLSearchParams, hidden: ReadonlyArray<string> = []): string =>
  [
    // a tool that only reads is asked with a GET: its answer is a page one can link to and reload
    `<form method="${tool.readOnly === true ? "get" : "post"}" action="${escapeHtml(action)}" class="ocx-form">`,
    ...fieldsOf(tool).filter((field) => !hidden.includes(field.name)).map((field) => control(field, values.get(field.name) ?? undefined)),
    tool.readOnly === true ? "" : `<div class="ocx-field ocx-check"><input type="checkbox" name="${DRY_RUN}" id="f-${DRY_RUN}" value="on"${values.get(DRY_RUN) !== null && values.get(DRY_RUN) !== "" ? " checked" : ""}> <label for="f-${DRY_RUN}">${DRY_RUN}</label><span class="ocx-help">say what would be done, and do nothing</span></div>`,
    `<button type="submit">${escapeHtml(tool.name)}</button>`,
    `</form>`
  ].join("\n")

const value = (v: unknown): string => {
  if (v === null || typeof v !== "object") return escapeHtml(String(v))
  if (Array.isArray(v)) return v.length === 0 ? "(none)" : `<ol>${v.map((item) => `<li>${value(item)}</li>`).join("")}</ol>`
  const rows = Object.entries(v).map(([key, item]) => `<tr><th>${escapeHtml(key)}</th><td>${value(item)}</td></tr>`)
  return `<table class="label-value">${rows.join("")}</table>`
}

/** A tool's output as its page shows it: a page of its own for the tools that have one, else label and value. */
const outputHtml = (answer: Answer<unknown>, base: string, nonce: string | undefined, values?: URLSearchParams, caller?: Caller): string => {
  const own = outputPages[answer.tool]
  return own !== undefined ? own(answer.output, base, nonce, values, caller) : value(answer.output)
}

const stoppedLine = (answer: Answer<unknown>): string => {
  const message = answer.stopped.message !== undefined ? `: ${escapeHtml(answer.stopped.message)}` : ""
  switch (answer.stopped.reason) {
    case "completed":
      // a page of its own (the runs list, a run's page) needs no "Done."
      return outputPages[answer.tool] !== undefined && message === "" ? "" : `<p class="ocx-stopped">Done${message}.</p>`
    case "dry_run":
      return `<p class="ocx-stopped">Dry run: nothing was done${message}.</p>`
    case "refused":
      return `<p class="generalError ocx-stopped">Refused${message}</p>`
    case "failed":
      return `<p class="generalError ocx-stopped">Failed${message}</p>`
  }
}

/** The answer, in the one shape: what was (or would be) done, the output, why it stopped. */
export const answerHtml = (answer: Answer<unknown>, base = "", nonce?: string, values?: URLSearchParams, caller?: Caller): string =>
  [
    `<div class="ocx-answer ocx-${escapeHtml(answer.stopped.reason)}" id="ocx-answer" data-reason="${escapeHtml(answer.stopped.reason)}">`,
    stoppedLine(answer),
    answer.output !== undefined ? `<div class="ocx-output">${outputHtml(answer, base, nonce, values, caller)}</div>` : "",
    // what was done, step by step, and the answer as JSON: for whoever wants them, folded
    `<details class="ocx-details ocx-did"><summary>details</summary>`,
    answer.operations.length > 0
      ? `<ul class="ocx-operations">${answer.operations.map((op) =>
        `<li>${op.done ? "did" : "would"}: ${escapeHtml(op.op)} ${escapeHtml(op.detail)}</li>`).join("")}</ul>`
      : "",
    `<details><summary>JSON</summary><pre class="ocx-json">${escapeHtml(JSON.stringify(answer, null, 2))}</pre></details>`,
    `</details>`,
    `</div>`
  ].filter((part) => part.length > 0).join("\n")

export interface ToolPageOptions {
  /** Which release serves the page, in one line. */
  readonly release?: string | undefined
  /** Fields the page does not offer (see form). */
  readonly hidden?: ReadonlyArray<string>
  /** The pages' own path (such as /ext/ocx2-cgi), for links between them. */
  readonly base?: string
  /** Fossil's nonce for the page's own script (the run page's live stream) */
  readonly nonce?: string | undefined
  /** Shown first, as it is (the landing page: who acts, which release, the other pages) */
  readonly lead?: string
  /** The page's title, when not "OCX: TOOL" */
  readonly title?: string
}

/** A run's page is named by its run; any other by its tool. */
const titleOf = (tool: Tool, answer: Answer<unknown> | undefined): string => {
  const run = tool.name === "watch" && answer?.stopped.reason === "completed" ? (answer.output as { run?: unknown } | undefined)?.run : undefined
  return typeof run === "string" ? `OCX run ${run.slice(0, 10)}` : `OCX: ${tool.name}`
}

/** Pages of the window's whole width, their form (filters) first: the runs list and a run's page. */
const fullPages: ReadonlyArray<string> = ["runs", "watch"]

export const toolPage = (
  tool: Tool,
  action: string,
  values: URLSearchParams,
  answer: Answer<unknown> | undefined,
  caller: Caller,
  options: ToolPageOptions = {}
): string =>
  page(
    options.title ?? titleOf(tool, answer),
    [
      options.lead ?? "",
      `<p class="ocx-summary">${escapeHtml(tool.summary)}.</p>`,
      fullPages.includes(tool.name) && tool.name === "runs" ? form(tool, action, values, options.hidden).replace(`class="ocx-form"`, `class="ocx-form ocx-filters"`) : "",
      answer !== undefined ? answerHtml(answer, options.base, options.nonce, values, caller) : "",
      // a run's page shown, its form (which run, from where) is for whoever wants it, folded
      tool.name === "runs" ? ""
      : tool.name === "watch" && answer !== undefined ? `<details class="ocx-details ocx-form-fold"><summary>watch another run</summary>${form(tool, action, values, options.hidden)}</details>`
      : form(tool, action, values, options.hidden),
      // the CLI's help, who acts and which release serves: folded, for whoever wants them
      `<details class="ocx-details ocx-help-fold"><summary>details</summary>`,
      `<p>${escapeHtml(tool.description)}</p>`,
      `<p><code>${escapeHtml(usage(tool))}</code></p>`,
      releaseLine(options.release),
      who(caller),
      `</details>`
    ].filter((part) => part.length > 0).join("\n"),
    fullPages.includes(tool.name)
  )

/** A request the CGI could not take: says what is wrong, and where to go from here. */
export const problemPage = (title: string, message: string, back: string): string =>
  page(title, `<p class="generalError">${escapeHtml(message)}</p>\n<p><a href="${escapeHtml(back)}">Back to OCX</a></p>`)
