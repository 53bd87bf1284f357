// metrics: the node's figures in Prometheus' text exposition format (version 0.0.4), for a
// monitoring system to scrape from BASE/ext/ocx2-cgi/metrics (issue 40). Everything is read where
// it is kept, nothing is counted in memory: the runs from the record (2.4's tally, as the runs tool
// reads them), the watchers from ROOT/care's locks in the kernel's table, the supervisors from
// their info files, the failed rounds from hook.log and supervisor.log.

import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { flockHeld } from "../care/FlockHeld.js"
import { CallRefused, finish, recording, refuse } from "../operations/Operations.js"
import { releasePaths, rootOfProgram } from "../release/ReleasePaths.js"
import { hookLogOf } from "../root/HookFiles.js"
import { readSupervisorInfo, stillRuns } from "../root/SupervisorFiles.js"
import { runStates, type RunSummary } from "../runs/RunStates.js"
import { readRuns } from "./runs.js"
import { hasCapability } from "./support/Permissions.js"
import { repositoryFile } from "./support/RepositoryFile.js"
import { defineTool, type ToolContext } from "./Tool.js"

export const MetricsInput = Schema.Struct({
  root: Schema.optionalWith(
    Schema.String.annotations({ description: "the release root (by default the root this program was released into; on the web always the page's own)" }),
    { exact: true }
  )
})
export type MetricsInput = typeof MetricsInput.Type

const Sample = Schema.Struct({
  labels: Schema.Record({ key: Schema.String, value: Schema.String }),
  value: Schema.Number,
  /** a histogram's series: _bucket, _sum or _count after the family's name */
  suffix: Schema.optionalWith(Schema.String, { exact: true })
})

const Family = Schema.Struct({
  name: Schema.String,
  help: Schema.String,
  type: Schema.Literal("gauge", "counter", "histogram"),
  samples: Schema.Array(Sample)
})
export type Family = typeof Family.Type

export const MetricsOutput = Schema.Struct({
  repository: Schema.String,
  root: Schema.optionalWith(Schema.String.annotations({ description: "the release root read (care, node); absent when there is none" }), { exact: true }),
  families: Schema.Array(Family).annotations({ description: "each metric with its samples" }),
  text: Schema.String.annotations({ description: "the same in Prometheus' text exposition format (version 0.0.4): what the page answers" })
})
export type MetricsOutput = typeof MetricsOutput.Type

/** Prometheus' content type for the text format. */
export const expositionType = "text/plain; version=0.0.4"

/** The token file a scraper's bearer token is compared with. */
export const metricsTokenOf = (root: string): string => Path.join(releasePaths(root).settings, "metrics-token")

/** Seconds from a run's post received to its started received. */
export const pickupBuckets: ReadonlyArray<number> = [0.25, 0.5, 1, 2, 5, 10, 30, 60, 300]
/** Seconds from a run's started received to its ended received. */
export const runBuckets: ReadonlyArray<number> = [1, 5, 15, 60, 300, 900, 3600, 14400, 86400]

const escapeLabel = (value: string): string => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"')
const number = (value: number): string => (value === Infinity ? "+Inf" : Number.isInteger(value) ? String(value) : String(Math.round(value * 1000) / 1000))

/** The text exposition format: # HELP, # TYPE, then `name{labels} value` a line. */
export const exposition = (families: ReadonlyArray<Family>): string =>
  families.map((family) => [
    `# HELP ${family.name} ${family.help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")}`,
    `# TYPE ${family.name} ${family.type}`,
    ...family.samples.map((s) => {
      const labels = Object.entries(s.labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")
      return `${family.name}${s.suffix ?? ""}${labels === "" ? "" : `{${labels}}`} ${number(s.value)}`
    })
  ].join("\n")).join("\n") + "\n"

/** One histogram's samples for each node: cumulative buckets, the sum and the count. */
const histogram = (byNode: ReadonlyMap<string, ReadonlyArray<number>>, buckets: ReadonlyArray<number>): Array<typeof Sample.Type> =>
  [...byNode.entries()].sort(([a], [b]) => a.localeCompare(b)).flatMap(([node, values]) => [
    ...[...buckets, Infinity].map((le) => ({
      labels: { node, le: le === Infinity ? "+Inf" : String(le) },
      value: values.filter((v) => v <= le).length,
      suffix: "_bucket"
    })),
    { labels: { node }, value: values.reduce((a, b) => a + b, 0), suffix: "_sum" },
    { labels: { node }, value: values.length, suffix: "_count" }
  ])

const pushTo = (map: Map<string, Array<number>>, key: string, value: number) => {
  const list = map.get(key)
  if (list === undefined) map.set(key, [value])
  else list.push(value)
}

/** The runs' families: by state and node, pickup and run durations. */
export const runFamilies = (runs: ReadonlyArray<RunSummary>): Array<Family> => {
  const nodes = [...new Set(runs.map((r) => r.node))].sort()
  const pickups = new Map<string, Array<number>>()
  const durations = new Map<string, Array<number>>()
  for (const run of runs) {
    if (run.startedAt !== undefined) pushTo(pickups, run.node, Math.max(0, (run.startedAt - run.posted) / 1000))
    if (run.startedAt !== undefined && run.endedAt !== undefined) pushTo(durations, run.node, Math.max(0, (run.endedAt - run.startedAt) / 1000))
  }
  return [
    {
      name: "ocx2_runs",
      help: "Runs in the record, by the node they are for and their state (waiting, started, ended, refused, lost).",
      type: "gauge",
      samples: nodes.flatMap((node) => runStates.map((state) => ({
        labels: { node, state },
        value: runs.filter((r) => r.node === node && r.state === state).length
      })))
    },
    {
      name: "ocx2_run_pickup_seconds",
      help: "From a run's post received by the server to its started received, for each run that started.",
      type: "histogram",
      samples: histogram(pickups, pickupBuckets)
    },
    {
      name: "ocx2_run_duration_seconds",
      help: "From a run's started received to its ended received, for each run that started and ended.",
      type: "histogram",
      samples: histogram(durations, runBuckets)
    }
  ]
}

const listDir = (dir: string): Array<string> => {
  try {
    return Fs.readdirSync(dir)
  } catch {
    return []
  }
}

/** The entries of a JSON-lines log that say something failed ("failed: ...", "the round failed: ..."). */
const failedEntries = (log: string): number | undefined => {
  let text: string
  try {
    const fd = Fs.openSync(log, "r")
    try {
      // the last 64 MiB at most: a counter that falls when a log is cut, which Prometheus takes as a reset
      const size = Fs.fstatSync(fd).size
      const length = Math.min(size, 64 * 1024 * 1024)
      const buffer = Buffer.alloc(length)
      Fs.readSync(fd, buffer, 0, length, size - length)
      text = buffer.toString("utf8")
    } finally {
      Fs.closeSync(fd)
    }
  } catch (e) {
    // no log yet: nothing has failed (a counter at 0, so the series exists from the start);
    // a log that cannot be read says nothing
    return (e as NodeJS.ErrnoException).code === "ENOENT" ? 0 : undefined
  }
  let failed = 0
  for (const line of text.split("\n")) {
    if (!line.includes("failed")) continue
    try {
      const entry = JSON.parse(line) as { did?: unknown }
      if (Array.isArray(entry.did) && entry.did.some((d) => typeof d === "string" && /\bfailed: /.test(d))) failed++
    } catch {
      // a line cut by the window's start, or not ours
    }
  }
  return failed
}

/** The families read from the release root: watchers, supervisors, failed rounds. */
export const rootFamilies = (root: string, now: number): Array<Family> => {
  const paths = releasePaths(root)
  const runLocks = listDir(paths.care).filter((f) => /^[0-9a-f]{16,64}\.lock$/.test(f))
  const alive = runLocks.filter((f) => flockHeld(Path.join(paths.care, f)) === "held").length
  const supervisors = listDir(paths.node)
    .filter((f) => /^supervisor-.*\.json$/.test(f))
    .map((f) => readSupervisorInfo(Path.join(paths.node, f)))
    .filter((info) => info !== undefined)
  const running = supervisors.filter((info) => stillRuns(info.pid, info.started))
  const failed = (["hook", "supervisor"] as const).map((log) => ({
    log,
    count: failedEntries(log === "hook" ? hookLogOf(root) : Path.join(paths.node, "supervisor.log"))
  }))
  return [
    {
      name: "ocx2_watchers_alive",
      help: "Watchers alive: runs in ROOT/care whose lock a watcher holds (the kernel's table of locks).",
      type: "gauge",
      samples: [{ labels: {}, value: alive }]
    },
    {
      name: "ocx2_supervisor_up",
      help: "1 for each node whose supervisor (ocx2 supervise) runs, 0 for one whose info file names a process that has ended.",
      type: "gauge",
      samples: supervisors.map((info) => ({ labels: { node: info.node }, value: running.includes(info) ? 1 : 0 }))
    },
    {
      name: "ocx2_supervisor_uptime_seconds",
      help: "How long each running supervisor has run (since its info file's since).",
      type: "gauge",
      samples: running.map((info) => ({ labels: { node: info.node }, value: Math.max(0, (now - Date.parse(info.since)) / 1000) }))
    },
    {
      name: "ocx2_failed_rounds_total",
      help: "Entries of ROOT/node/hook.log and supervisor.log that say something failed (a round, a decision, deliveries).",
      type: "counter",
      samples: failed.filter((f) => f.count !== undefined).map((f) => ({ labels: { log: f.log }, value: f.count! }))
    }
  ]
}

/** Whether two secrets are the same, in time that does not depend on where they differ. */
export const sameSecret = (given: string, expected: string): boolean => {
  const a = Crypto.createHash("sha256").update(given).digest()
  const b = Crypto.createHash("sha256").update(expected).digest()
  return Crypto.timingSafeEqual(a, b) && expected.length > 0
}

const readToken = (root: string): string | undefined => {
  try {
    const token = Fs.readFileSync(metricsTokenOf(root), "utf8").trim()
    return token === "" ? undefined : token
  } catch {
    return undefined
  }
}

const rootOf = (given: string | undefined, programPath: string | undefined): string | undefined => {
  try {
    if (given !== undefined) return Fs.realpathSync(given)
    return programPath === undefined ? undefined : rootOfProgram(Fs.realpathSync(programPath))
  } catch {
    return undefined
  }
}

export const metricsOf = (input: MetricsInput, context: ToolContext, programPath: string | undefined) => {
  const act = recording(context.dryRun)
  return finish(act, Effect.gen(function*() {
    // on the web, the root of the release serving the page, never one from the request
    if (context.entryPoint === "cgi" && input.root !== undefined) {
      return yield* refuse("metrics on the web reads the root of the release serving the page: a root in the request is refused")
    }
    if (input.root !== undefined && rootOf(input.root, undefined) === undefined) {
      return yield* refuse(`the release root ${input.root} cannot be read`)
    }
    const root = rootOf(input.root, programPath)
    if (!hasCapability(context.caller, "s")) {
      const token = context.caller.token
      if (token === undefined) {
        return yield* refuse("metrics needs Fossil's setup capability (s), or the token of ROOT/settings/metrics-token (sent as the cookie ocx2-metrics-token=TOKEN, or Authorization: Bearer TOKEN where the server passes it on)")
      }
      const expected = root === undefined ? undefined : readToken(root)
      if (expected === undefined || !sameSecret(token, expected)) {
        return yield* refuse("the token sent is not this node's metrics token (ROOT/settings/metrics-token)")
      }
    }
    const file = yield* repositoryFile("metrics", context)
    const now = Date.now()
    const read = yield* Effect.try({
      try: () => readRuns(file.path, file.role),
      catch: (e) => new CallRefused({ message: `the repository ${file.path} cannot be read: ${(e as Error).message}` })
    })
    act.note("read", `${read.runs.length} run${read.runs.length === 1 ? "" : "s"} in ${file.path}${root !== undefined ? `; ${root}/care and ${root}/node` : "; no release root (give --root ROOT): no watcher, supervisor or round figures"}`)
    const families = [...runFamilies(read.runs), ...(root !== undefined ? rootFamilies(root, now) : [])]
    const output: MetricsOutput = { repository: file.path, ...(root !== undefined ? { root } : {}), families, text: exposition(families) }
    return output
  }))
}

export const metrics = defineTool({
  name: "metrics",
  summary: "Prometheus metrics: runs, pickup and run times, watchers, supervisors, failed rounds",
  description:
    "The node's figures in Prometheus' text exposition format (version 0.0.4): ocx2_runs, the runs in the record by node and " +
    "state; ocx2_run_pickup_seconds (a run's post received to its started received) and ocx2_run_duration_seconds (started to " +
    "ended), histograms by node; ocx2_watchers_alive (runs in ROOT/care whose lock a watcher holds); ocx2_supervisor_up and " +
    "ocx2_supervisor_uptime_seconds, by node; ocx2_failed_rounds_total (hook.log and supervisor.log entries that say something " +
    "failed). Readable by setup users (s), and on the web by a scraper sending the token of ROOT/settings/metrics-token as " +
    "the cookie ocx2-metrics-token=TOKEN (Fossil 2.21 passes no Authorization header to an extension) or Authorization: Bearer TOKEN " +
    "where the server passes it on; the page BASE/ext/ocx2-cgi/metrics answers the text as it is (text/plain; version=0.0.4), " +
    "401 without a login or token and 403 for one that may not read it. --root ROOT defaults to the root this program was " +
    "released into. Reads only.",
  input: MetricsInput,
  positional: [],
  output: MetricsOutput,
  // a scraper's token is no Fossil capability: the handler decides, with the root's token file at hand
  allow: () => undefined,
  readOnly: true,
  offeredBy: ["cli", "cgi"],
  notOfferedBecause: "it is for a monitoring system's scrape (the page) and a terminal",
  document: { contentType: expositionType, body: (output) => output.text },
  handle: (input, context) => metricsOf(input, context, process.argv[1])
})
