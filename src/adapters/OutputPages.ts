// The outputs that read better as a page of their own than as label and value: the runs list, a
// table one line a run, as a CI's list of builds is; a run's page; read's records; create's answer.
// Plain HTML in Fossil's skin; the runs list and a run's page have a small script each to stay live.

import type { PostOut, ReadOutput } from "../tools/read.js"
import { stateWords as wordsOf } from "../runs/RunWords.js"
import type { RunRow, RunsOutput } from "../tools/runs.js"
import type { WatchOutput } from "../tools/watch.js"
import type { CreateOutput } from "../tools/create.js"
import type { Caller } from "../tools/Tool.js"
import { hasCapability } from "../tools/support/Permissions.js"
import { markdownHtml } from "./Markdown.js"

const escape = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)

/** The repository's own pages' top path: the extension's path without its /ext/NAME. */
export const topOf = (base: string): string => base.replace(/\/ext(\/.*)?$/, "")

/** The run page (the watch tool's page) of a run. */
export const runPageHref = (base: string, run: string): string => `${base}/watch?run=${encodeURIComponent(run)}`

/** Where a run is in Fossil's own pages: its thread, or its ticket. */
export const placeHref = (base: string, row: { readonly thread?: string; readonly ticket?: string; readonly run: string }): string =>
  row.ticket !== undefined ? `${topOf(base)}/tktview/${row.ticket}` : `${topOf(base)}/forumpost/${row.run}`

/** The state in words, with its outcome: `exited 0`, `refused: refusal 4: ...`, `waiting (manual)`. */
export const stateWords = (r: RunRow): string => wordsOf(r)

/** A class for the state's colour: passed and failed for the ended ones. */
export const stateClass = (r: RunRow): string =>
  r.state === "ended" ? (r.outcome === "exited" && r.exit === 0 ? "passed" : "failed") : r.state

const when = (iso: string | undefined): string => (iso === undefined ? "" : escape(iso.replace("T", " ").replace("Z", "")))

const took = (seconds: number | undefined): string => {
  if (seconds === undefined) return ""
  if (seconds < 60) return `${seconds} s`
  const m = Math.floor(seconds / 60)
  return m < 60 ? `${m} min ${Math.round(seconds % 60)} s` : `${Math.floor(m / 60)} h ${m % 60} min`
}

/**
 * The runs page's own script (issue 40): "Took" of the running runs counts on each second, from
 * what the page was given and the time since; every 5 s the page asks its own JSON form (the runs
 * tool with the same filters) and sets each row's state and time from it, so a run that starts or
 * ends shows it without a reload. When that answer holds a run the table has not, the page asks
 * its own HTML (the same filters) and takes that page's rows and count in place of its own: a new
 * run is added, rendered by the same code as every row, and the oldest leaves as the list's limit
 * says, without a reload. The words and classes are this module's own functions, sent as they
 * are. Fossil's Content-Security-Policy lets it run by its nonce.
 */
const runsScript = (): string => `(function () {
  var table = document.getElementById("ocx-runs");
  if (!table) return;
  var words = (${wordsOf.toString()});
  var stateClass = (${stateClass.toString()});
  var took = (${took.toString()});
  var loaded = Date.now();
  var tick = function () {
    Array.prototype.forEach.call(table.querySelectorAll("td.ocx-took"), function (td) {
      if (td.dataset.seconds === undefined || td.dataset.seconds === "") { td.textContent = ""; return; }
      var s = Number(td.dataset.seconds);
      if (td.dataset.running === "1") { s += (Date.now() - Number(td.dataset.at || loaded)) / 1000; }
      td.textContent = took(Math.floor(s));
    });
  };
  setInterval(tick, 1000);
  var note = document.getElementById("ocx-runs-note");
  var poll = function () {
    fetch(table.dataset.poll, { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (a) {
        var runs = a && a.output && a.output.runs;
        if (!runs) { return; }
        var fresh = 0;
        runs.forEach(function (r) {
          var tr = table.querySelector('tr[data-run="' + r.run + '"]');
          if (!tr) { fresh++; return; }
          tr.dataset.state = r.state;
          var state = tr.querySelector("td.ocx-state");
          if (state) { state.textContent = words(r); state.className = "ocx-state ocx-state-" + stateClass(r); }
          var td = tr.querySelector("td.ocx-took");
          if (td) {
            td.dataset.seconds = r.seconds === undefined ? "" : String(r.seconds);
            td.dataset.at = String(Date.now());
            td.dataset.running = r.state === "started" ? "1" : "0";
          }
        });
        tick();
        return fresh > 0 ? added() : undefined;
      })
      .catch(function () {})
      .then(function () { setTimeout(poll, 5000); });
  };
  // the page itself, as the server renders it now: its rows and count in place of these
  var added = function () {
    return fetch(table.dataset.page, { credentials: "same-origin" })
      .then(function (r) { return r.text(); })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, "text/html");
        var body = doc.querySelector("#ocx-runs tbody");
        var count = doc.getElementById("ocx-runs-count");
        if (!body) { throw new Error("no runs table"); }
        var had = {};
        Array.prototype.forEach.call(table.querySelectorAll("tbody tr[data-run]"), function (tr) { had[tr.dataset.run] = true; });
        var now = String(Date.now());
        Array.prototype.forEach.call(body.querySelectorAll("tr[data-run]"), function (tr) {
          if (!had[tr.dataset.run]) { tr.classList.add("ocx-new"); }
          var td = tr.querySelector("td.ocx-took");
          if (td) { td.dataset.at = now; }
        });
        table.tBodies[0].replaceWith(document.adoptNode(body));
        var shown = document.getElementById("ocx-runs-count");
        if (count && shown) { shown.textContent = count.textContent; }
        if (note) { note.textContent = ""; }
        tick();
      })
      .catch(function () {
        if (note) { note.textContent = "A run was posted since this page was loaded, and cannot be shown here just now: reload to see it."; }
      });
  };
  setTimeout(poll, 5000);
})();`

/** The runs tool's JSON form for the same filters: what the runs page asks to stay live. */
const runsPoll = (base: string, filters: URLSearchParams): string => {
  const query = new URLSearchParams(filters)
  query.set("format", "json")
  return `${base}/runs?${query.toString()}`
}

/** The runs page itself for the same filters: where the page takes a new run's row from. */
const runsPageHref = (base: string, filters: URLSearchParams): string => {
  const query = new URLSearchParams(filters)
  query.delete("format")
  const rest = query.toString()
  return `${base}/runs${rest === "" ? "" : `?${rest}`}`
}

const runsPage = (output: RunsOutput, base: string, nonce: string | undefined, filters: URLSearchParams = new URLSearchParams()): string => {
  const rows = output.runs.map((r) =>
    `<tr data-run="${escape(r.run)}" data-state="${escape(r.state)}">` +
    `<td class="ocx-run"><a href="${escape(runPageHref(base, r.run))}"><code>${escape(r.run.slice(0, 10))}</code></a></td>` +
    `<td class="ocx-state ocx-state-${escape(stateClass(r))}">${escape(stateWords(r))}</td>` +
    `<td>${escape(r.objective ?? "")}<br><small><a href="${escape(placeHref(base, r))}">${escape(r.title ?? (r.ticket !== undefined ? `ticket ${r.ticket.slice(0, 10)}` : "its thread"))}</a></small></td>` +
    `<td class="ocx-wide">${escape(r.node)}</td>` +
    `<td class="ocx-wide">${escape(r.sender ?? "")}</td>` +
    `<td>${when(r.posted)}</td>` +
    `<td class="ocx-wide ocx-took"${r.seconds !== undefined ? ` data-seconds="${r.seconds}"` : ""} data-running="${r.state === "started" ? "1" : "0"}">${took(r.seconds === undefined ? undefined : Math.floor(r.seconds))}</td>` +
    `</tr>`)
  const senders = output.senders === "receipts" ? "" : "<p>Read from a clone: who sent each run is the user its artifact names.</p>"
  return [
    `<p id="ocx-runs-count">${output.runs.length} of ${output.total} run${output.total === 1 ? "" : "s"}, newest first.</p>`,
    senders,
    `<p id="ocx-runs-note" class="ocx-note"></p>`,
    `<table class="ocx-runs" id="ocx-runs" data-poll="${escape(runsPoll(base, filters))}" data-page="${escape(runsPageHref(base, filters))}"><thead><tr><th>Run</th><th>State</th><th>Objective</th><th class="ocx-wide">Node</th>` +
    `<th class="ocx-wide">Sender</th><th>Posted (UTC)</th><th class="ocx-wide">Took</th></tr></thead>`,
    `<tbody>${rows.join("\n")}</tbody></table>`,
    `<script${nonce !== undefined ? ` nonce="${escape(nonce)}"` : ""}>${runsScript()}</script>`
  ].filter((p) => p.length > 0).join("\n")
}

const readHref = (base: string, what: string, at?: string) =>
  `${base}/read?what=${encodeURIComponent(what)}${at !== undefined ? `&at=${encodeURIComponent(at)}` : ""}`

/** One post or ticket change: who, when, what kind, and its text as it was written. */
export const postHtml = (p: PostOut, base: string): string =>
  `<div class="ocx-post ocx-post-${escape(p.kind.replace(/\s+/g, "-"))}" id="p-${escape(p.hash.slice(0, 16))}">` +
  `<p class="ocx-post-head"><b>${escape(p.kind)}</b> by ${escape(p.sender ?? p.user)} at ${when(p.time)} ` +
  `<a href="${escape(readHref(base, p.hash))}"><code>${escape(p.hash.slice(0, 12))}</code></a>${p.title !== undefined ? `: ${escape(p.title)}` : ""}</p>` +
  (/markdown/i.test(p.mimetype) ? `<div class="ocx-markdown">${markdownHtml(p.text)}</div>` : `<pre>${escape(p.text)}</pre>`) + `</div>`

/** A run's state, times, verdicts and published files: the top of its run page. */
export const runSummaryHtml = (run: NonNullable<ReadOutput["run"]>, base: string): string => {
  const r = run.summary
  const rows: Array<[string, string]> = [
    ["State", `<span class="ocx-state ocx-state-${escape(stateClass(r))}" id="ocx-run-state">${escape(stateWords(r))}</span>`],
    ["Objective", escape(r.objective ?? "")],
    ["Node", escape(r.node)],
    ["Sent by", escape(r.sender ?? "")],
    ["Where", `<a href="${escape(placeHref(base, r))}">${escape(r.title ?? (r.ticket !== undefined ? `ticket ${r.ticket}` : "its thread"))}</a>`],
    ["Posted", when(r.posted)],
    ["Started", when(r.started)],
    ["Ended", when(r.ended)],
    ["Took", r.seconds === undefined ? "" : `<span id="ocx-run-took" data-seconds="${r.seconds}" data-running="${r.state === "started" ? "1" : "0"}">${took(Math.floor(r.seconds))}</span>`],
    ...run.verdicts.map((v): [string, string] => ["Verdict", `${escape(v.value)} on <a href="${escape(readHref(base, v.checkin))}"><code>${escape(v.checkin.slice(0, 12))}</code></a>`]),
    ...run.published.map((f): [string, string] => ["Published", f.hash !== undefined
      ? `<a href="${escape(`${topOf(base)}/uv/${f.as}`)}">${escape(f.as)}</a> <code>${escape(f.hash.slice(0, 12))}</code>`
      : `${escape(f.as)} (not in the repository)`])
  ]
  return `<table class="label-value ocx-run">${rows.filter(([, v]) => v !== "").map(([k, v]) => `<tr><th>${k}</th><td>${v}</td></tr>`).join("")}</table>`
}

const readPage = (output: ReadOutput, base: string): string => {
  const parts: Array<string> = []
  if (output.run !== undefined) parts.push(runSummaryHtml(output.run, base), `<p><a href="${escape(runPageHref(base, output.name))}">The run page</a></p>`)
  if (output.file !== undefined) {
    const f = output.file
    parts.push(`<p><b>${escape(f.path)}</b> at <a href="${escape(readHref(base, f.checkin))}"><code>${escape(f.checkin.slice(0, 12))}</code></a>, ${f.size} bytes</p>`)
    parts.push(f.binary ? "<p>A binary file.</p>" : `<pre class="ocx-file">${escape(f.text ?? "")}</pre>${f.cut === true ? "<p>Its first 1 MiB.</p>" : ""}`)
  }
  if (output.checkin !== undefined) {
    const c = output.checkin
    parts.push(`<p>Check-in <code>${escape(c.hash)}</code>${c.branch !== undefined ? ` on <b>${escape(c.branch)}</b>` : ""} by ${escape(c.user)} at ${when(c.time)}</p>`,
      `<pre>${escape(c.comment)}</pre>`,
      `<ul class="ocx-files">${c.files.map((f) => `<li><a href="${escape(readHref(base, f.path, c.hash))}">${escape(f.path)}</a></li>`).join("")}</ul>`)
  }
  if (output.ticket !== undefined) {
    const t = output.ticket
    parts.push(`<p>Ticket <a href="${escape(`${topOf(base)}/tktview/${t.id}`)}"><code>${escape(t.id)}</code></a>${t.fields.title !== undefined ? `: ${escape(t.fields.title)}` : ""}</p>`,
      ...t.changes.map((p) => postHtml(p, base)))
  }
  for (const p of output.posts ?? []) parts.push(postHtml(p, base))
  return parts.join("\n")
}

/**
 * The page's own script: it follows the run from the node's stream server (server-sent events),
 * appending what the process prints and the state as it changes, without a reload. No framework:
 * EventSource, fetch and a few DOM calls. Fossil's Content-Security-Policy lets it run by its
 * nonce, and lets it reach the stream server when its default-csp allows that origin in
 * connect-src. When the stream server cannot be reached from the page at all (Fossil's default
 * policy, which allows the page's own site only; a firewall), the page follows the run through
 * its own site instead: it asks this page for what came after its offset (format=json), each
 * answer holding for up to 3 s, so the output still arrives without a reload, in bigger steps.
 * The stream's token is good for one connection: a stream cut after it opened goes on with a fresh
 * one from this page, from the offset the stream last gave.
 */
const liveScript = (): string => `(function () {
  var out = document.getElementById("ocx-stream");
  var state = document.getElementById("ocx-run-state");
  var note = document.getElementById("ocx-live");
  if (!out || !out.dataset.live) return;
  var live = JSON.parse(out.dataset.live);
  var offset = Number(out.dataset.offset || "0");
  var over = false;
  // Took counts on while the run runs, from what the page was given and the time since
  var tookNode = document.getElementById("ocx-run-took");
  var took = (${took.toString()});
  var loaded = Date.now();
  var ticking = tookNode ? setInterval(function () {
    if (tookNode.dataset.running !== "1") { return; }
    tookNode.textContent = took(Math.floor(Number(tookNode.dataset.seconds) + (Date.now() - loaded) / 1000));
  }, 1000) : undefined;
  var add = function (className, text) {
    var span = document.createElement("span");
    span.className = className;
    span.textContent = text;
    out.appendChild(span);
    out.scrollTop = out.scrollHeight;
  };
  var on = {
    state: function (d) { if (state && d.state) { state.textContent = d.state; } },
    output: function (d) { add("ocx-" + d.stream, d.text); },
    delivery: function (d) { add("ocx-delivery", "[delivered " + d.hash.slice(0, 12) + "] " + d.line + "\\n"); },
    missed: function (d) { add("ocx-missed", "[" + d.text + "]\\n"); },
    end: function (d) {
      on.state(d);
      over = true;
      if (ticking !== undefined) { clearInterval(ticking); }
      if (note) { note.textContent = "The run is over: reload the page for its reports."; }
    }
  };
  var poll = function () {
    if (note) { note.textContent = "Following the run through this site (the node's stream server is not reachable from this page)."; }
    var ask = function () {
      fetch(out.dataset.poll + "&format=json&seconds=3&offset=" + offset, { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (a) {
          var w = a && a.output;
          if (!w) { throw new Error("no answer"); }
          w.events.forEach(function (d) { if (on[d.type]) { on[d.type](d); } });
          offset = w.offset;
          if (w.over) { on.end({ state: null }); } else { setTimeout(ask, 100); }
        })
        .catch(function () {
          if (note) { note.textContent = "The run cannot be followed from this page just now; trying again."; }
          setTimeout(ask, 5000);
        });
    };
    ask();
  };
  // A token is good for one connection: a stream that was cut goes on with a fresh one from this
  // page, from the offset the stream last said, and live again where the page gives one.
  var resume = function () {
    fetch(out.dataset.poll + "&format=json&seconds=0&offset=" + offset, { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (a) {
        var w = a && a.output;
        if (!w) { throw new Error("no answer"); }
        w.events.forEach(function (d) { if (on[d.type]) { on[d.type](d); } });
        offset = w.offset;
        if (w.over) { on.end({ state: null }); } else if (w.live) { connect(w.live); } else { poll(); }
      })
      .catch(function () {
        if (note) { note.textContent = "The run cannot be followed from this page just now; trying again."; }
        setTimeout(resume, 5000);
      });
  };
  var connect = function (grant) {
    var url = grant.url.charAt(0) === ":" ? location.protocol + "//" + location.hostname + grant.url : grant.url;
    // EventSource cannot send a header: the token goes in the URL, spent by this one connection
    var events = new EventSource(url + (url.indexOf("?") < 0 ? "?" : "&") + "token=" + encodeURIComponent(grant.token));
    var opened = false;
    events.onopen = function () {
      opened = true;
      if (note) { note.textContent = "Following the run as its process prints."; }
    };
    ["state", "output", "delivery", "missed", "end"].forEach(function (type) {
      events.addEventListener(type, function (e) {
        on[type](JSON.parse(e.data));
        if (type === "end") { events.close(); }
      });
    });
    events.addEventListener("offset", function (e) { offset = JSON.parse(e.data).offset; });
    events.addEventListener("refused", function (e) {
      over = true;
      events.close();
      if (note) { note.textContent = "No longer followed: " + JSON.parse(e.data).text; }
    });
    events.onerror = function () {
      events.close();
      if (over) return;
      // never reached: follow it through this site; reached once: again with a fresh token
      if (!opened) { poll(); return; }
      if (note) { note.textContent = "The live stream was cut; reconnecting."; }
      setTimeout(resume, 1000);
    };
  };
  connect(live);
})();`

/**
 * Stop, start and run-again buttons, for those the tools allow (stop, run and create need admin
 * or setup): each a POST to the tool's own page, which checks it as the tool does (the CGI takes
 * it from the run page). Run again is create's `again`: the run's fields read from the record
 * again, never from this page (whose server paths are redacted for anyone without setup).
 */
const runButtons = (run: RunRow, base: string, caller: Caller | undefined): string => {
  if (caller === undefined || !hasCapability(caller, "as")) return ""
  const button = (tool: string, field: string, words: string, name: string = tool) =>
    `<form method="post" action="${escape(`${base}/${tool}`)}" class="ocx-button-form">` +
    `<input type="hidden" name="${field}" value="${escape(run.run)}"><button type="submit" class="ocx-${name}">${escape(words)}</button></form>`
  const going = run.state === "waiting" || run.state === "started"
  const buttons = [
    going ? button("stop", "run", "Stop this run") : "",
    run.state === "waiting" && run.manual ? button("run", "run", "Start this manual run") : "",
    going ? "" : button("create", "again", "Run again", "again")
  ].filter((b) => b !== "")
  return buttons.length === 0 ? "" : `<div class="ocx-buttons">${buttons.join("")}</div>`
}

const watchPage = (output: WatchOutput, base: string, nonce: string | undefined, _values?: URLSearchParams, caller?: Caller): string => {
  const parts: Array<string> = []
  if (output.record !== undefined) parts.push(runSummaryHtml(output.record, base))
  if (output.held !== undefined) parts.push(`<p class="ocx-held" id="ocx-held"><strong>Held back:</strong> ${escape(output.held)}</p>`)
  const printed = output.events.filter((e) => e.type === "output" || e.type === "delivery" || e.type === "missed").map((e) =>
    e.type === "output" ? `<span class="ocx-${escape(e.stream ?? "stdout")}">${escape(e.text ?? "")}</span>`
    : e.type === "delivery" ? `<span class="ocx-delivery">[delivered ${escape((e.hash ?? "").slice(0, 12))}] ${escape(e.line ?? "")}\n</span>`
    : `<span class="ocx-missed">[${escape(e.text ?? "")}]\n</span>`).join("")
  const words = output.live !== undefined ? "Following the run as its process prints."
    : output.over ? (output.followed === "care directory" ? "What its process printed, as its node's host kept it." : "The run is over; its kept logs are among its reports below.")
    : output.followed === "record" ? "Its output is followed on its node's host; this page shows its state as the record holds it." : ""
  // why its output is not shown, when this host's node has it and the page may not read it
  const recordOnly = output.record_only !== undefined
    ? `<p class="generalError ocx-record-only" id="ocx-record-only">${escape(output.record_only.charAt(0).toUpperCase() + output.record_only.slice(1))}.</p>`
    : ""
  parts.push(`<h3>Output</h3>`, `<p id="ocx-live">${escape(words)}</p>`, ...(recordOnly !== "" ? [recordOnly] : []),
    `<pre class="ocx-stream" id="ocx-stream"${output.live !== undefined
      ? ` data-live="${escape(JSON.stringify(output.live))}" data-offset="${output.offset}" data-poll="${escape(runPageHref(base, output.run))}"`
      : ""}>${printed}</pre>`)
  if (output.reports.length > 0) parts.push(`<h3>Reports</h3>`, ...output.reports.map((p) => postHtml(p, base)))
  if (output.record !== undefined) parts.push(runButtons(output.record.summary, base, caller))
  if (output.live !== undefined) parts.push(`<script${nonce !== undefined ? ` nonce="${escape(nonce)}"` : ""}>${liveScript()}</script>`)
  return parts.join("\n")
}

/** create's answer: a link to the run it made (its run page), then where it was written. */
const createPage = (output: CreateOutput, base: string): string => {
  const rows: Array<[string, string]> = [
    ["For", escape(output.to)],
    ["Written as", escape(output.place)],
    ...(output.thread !== undefined ? [["Thread", `<a href="${escape(`${topOf(base)}/forumpost/${output.thread}`)}"><code>${escape(output.thread.slice(0, 12))}</code></a>`] as [string, string]] : []),
    ...(output.ticket !== undefined ? [["Ticket", `<a href="${escape(`${topOf(base)}/tktview/${output.ticket}`)}"><code>${escape(output.ticket.slice(0, 12))}</code></a>`] as [string, string]] : []),
    ...(output.pattern !== undefined ? [["Pattern", escape(output.pattern)] as [string, string]] : []),
    ...(output.acted !== undefined ? [["Its node", escape(output.acted)] as [string, string]] : [])
  ]
  const lead = output.run !== undefined
    ? `<p class="ocx-created">Run <a class="ocx-run-link" href="${escape(runPageHref(base, output.run))}"><code>${escape(output.run.slice(0, 12))}</code></a> was written: <a href="${escape(runPageHref(base, output.run))}">follow it on its run page</a>.</p>`
    : `<p class="ocx-created">No run was written (a dry run): the message it would write is in the details below.</p>`
  return `${lead}\n<table class="label-value">${rows.map(([k, v]) => `<tr><th>${k}</th><td>${v}</td></tr>`).join("")}</table>`
}

/** By tool name. */
export const outputPages: Readonly<Record<string, (output: any, base: string, nonce: string | undefined, values?: URLSearchParams, caller?: Caller) => string>> = {
  runs: runsPage,
  read: readPage,
  watch: watchPage,
  create: createPage
}
