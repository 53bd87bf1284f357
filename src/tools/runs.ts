import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { capabilitiesReader } from "../fossil/ReadMessages.js"
import { cachedMessages } from "../runs/MessagesCache.js"
import { openDatabase } from "../fossil/Sqlite.js"
import type { RunSummary } from "../runs/RunStates.js"
import { summarizeRuns } from "../runs/RunStates.js"
import { parseMoment, queryRuns, stateFilters } from "../runs/RunsQuery.js"
import { CallRefused, finish, recording, refuse } from "../operations/Operations.js"
import { mayReadRun } from "./support/Permissions.js"
import { repositoryFile } from "./support/RepositoryFile.js"
import { defineTool } from "./Tool.js"

const optional = <A, I>(schema: Schema.Schema<A, I>, description: string) =>
  Schema.optionalWith(schema.annotations({ description }), { exact: true })

export const RunsInput = Schema.Struct({
  node: optional(Schema.String, "only the runs for this node user"),
  state: optional(Schema.Literal(...stateFilters), "only the runs in this state: waiting, started, ended, refused, lost; open (waiting or started) or over (ended, refused or lost)"),
  sender: optional(Schema.String, "only the runs this user sent"),
  since: optional(Schema.String, "only the runs posted at or after this moment: an ISO 8601 date or time, or a time ago such as 2h or 7d"),
  until: optional(Schema.String, "only the runs posted before this moment, written as since is"),
  limit: optional(Schema.Int.pipe(Schema.nonNegative()), "at most this many, the newest (50 when not given; 0 for every one)")
})
export type RunsInput = typeof RunsInput.Type

const optionalText = (description: string) => optional(Schema.String, description)

export const RunRow = Schema.Struct({
  run: Schema.String.annotations({ description: "the run's full hash" }),
  node: Schema.String.annotations({ description: "the node user it is for (its to)" }),
  sender: optionalText("who sent it: the served repository's receipt; on a clone, the user its artifact names"),
  thread: optionalText("its thread (the thread's first post), when it is a post"),
  title: optionalText("its thread's title"),
  ticket: optionalText("its ticket, when it is a ticket change"),
  state: Schema.Literal("waiting", "started", "ended", "refused", "lost").annotations({
    description: "waiting (no started or ended counts), started, or over: refused, lost, or ended (exited, stopped, budget)"
  }),
  waiting_for: optionalText("while waiting: a person to start it (manual), or its node"),
  node_silent: optional(Schema.Boolean,
    "true while it waits for a node that has never answered any run (no started or ended from it): its node may not be installed, or its to may be wrong"),
  outcome: optionalText("how it ended: exited, stopped, budget, refused, lost"),
  exit: optional(Schema.Number, "its exit code, when it exited"),
  note: optionalText("the ended's note: which refusal or limit, or why it was lost"),
  posted: Schema.String.annotations({ description: "when it was received (ISO 8601, UTC)" }),
  started: optionalText("when its started was received"),
  ended: optionalText("when its ended was received"),
  seconds: optional(Schema.Number, "how long it ran: from started to ended, or until now while it runs"),
  objective: optionalText("what it is for"),
  process_user: optionalText("the user its process acts as"),
  manual: Schema.Boolean,
  session: Schema.Boolean,
  stops: Schema.Number.annotations({ description: "the stops that count for it" })
})
export type RunRow = typeof RunRow.Type

export const RunsOutput = Schema.Struct({
  repository: Schema.String,
  senders: Schema.Literal("receipts", "as written").annotations({
    description: "receipts: who sent what is the served repository's word; as written: a clone's, the users the artifacts name"
  }),
  total: Schema.Number.annotations({ description: "how many runs matched, before the limit" }),
  runs: Schema.Array(RunRow).annotations({ description: "newest first" })
})
export type RunsOutput = typeof RunsOutput.Type

const iso = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z")

/**
 * The node users that have answered any run (a started or an ended counts only from the run's to):
 * a run waiting for a node outside them may wait for ever, and the list says so.
 */
export const answeringNodes = (runs: ReadonlyArray<RunSummary>): ReadonlySet<string> =>
  new Set(runs.filter((run) => run.startedAt !== undefined || run.endedAt !== undefined).map((run) => run.node))

/** The run as a row; `answering` (answeringNodes of every run) marks a waiting run whose node never answered. */
export const rowOf = (run: RunSummary, now: number, answering?: ReadonlySet<string>): RunRow => {
  const ended = run.ended
  const until = run.endedAt ?? (run.state === "started" ? now : undefined)
  return {
    run: run.run,
    node: run.node,
    ...(run.sender !== undefined ? { sender: run.sender } : {}),
    ...(run.place._tag === "Thread"
      ? { thread: run.place.root, ...(run.place.title !== undefined ? { title: run.place.title } : {}) }
      : { ticket: run.place.ticket }),
    state: run.state,
    ...(run.state === "waiting" ? { waiting_for: run.manual ? "a person to start it (manual)" : "its node" } : {}),
    ...(run.state === "waiting" && !run.manual && answering !== undefined && !answering.has(run.node) ? { node_silent: true } : {}),
    ...(ended !== undefined ? { outcome: ended.outcome } : {}),
    ...(ended?.exit !== undefined ? { exit: ended.exit } : {}),
    ...(ended?.note !== undefined ? { note: ended.note } : {}),
    posted: iso(run.posted),
    ...(run.startedAt !== undefined ? { started: iso(run.startedAt) } : {}),
    ...(run.endedAt !== undefined ? { ended: iso(run.endedAt) } : {}),
    ...(run.startedAt !== undefined && until !== undefined ? { seconds: Math.max(0, Math.round((until - run.startedAt) / 100) / 10) } : {}),
    ...(run.objective !== undefined ? { objective: run.objective } : {}),
    ...(run.processUser !== undefined ? { process_user: run.processUser } : {}),
    manual: run.manual,
    session: run.session,
    stops: run.stops
  }
}

/**
 * Every run of the file, oldest first, as this host reads them (receipts on the served repository,
 * artifacts' users on a clone); `from` says whether the messages came from the cache and what
 * arrived since, or from reading every post.
 */
export const readRuns = (path: string, role: "served" | "clone"): { readonly runs: ReadonlyArray<RunSummary>; readonly from: "cache" | "file" } => {
  const db = openDatabase(path, { readonly: true, fileMustExist: true })
  try {
    const served = role === "served"
    const read = cachedMessages(db, path, { senders: served })
    return { runs: summarizeRuns(read.rows, (row) => (served ? row.sender : row.user || undefined), capabilitiesReader(db)), from: read.from }
  } finally {
    db.close()
  }
}

export const runs = defineTool({
  name: "runs",
  summary: "List the runs",
  description:
    "Lists the runs of the repository, newest first: each with its node, who sent it, its thread or ticket, its state " +
    "(waiting, started, or over: ended with its outcome and note, refused, lost), when it was posted, started and ended, how " +
    "long it ran, and its objective. Filters by node, state, sender and the time it was posted; at most 50 unless a limit is " +
    "given, and says how many matched. On the served repository who sent what is its receipts' word; on a clone, the users " +
    "the artifacts name. You see the runs you may read where they are: forum posts need Read Forum (2), tickets Read Ticket " +
    "(r), private ones x. Reads only, so it answers in a dry run too.",
  input: RunsInput,
  positional: [],
  output: RunsOutput,
  allow: () => undefined,
  readOnly: true,
  handle: (input, context) => {
    const act = recording(context.dryRun)
    return finish(
      act,
      Effect.flatMap(repositoryFile("runs", context), (file) =>
        Effect.gen(function*() {
          const now = Date.now()
          const moment = (name: string, text: string | undefined) => {
            if (text === undefined) return Effect.succeed(undefined)
            const parsed = parseMoment(text, now)
            return "problem" in parsed ? refuse(`${name}: ${parsed.problem}`) : Effect.succeed(parsed.at)
          }
          const since = yield* moment("since", input.since)
          const until = yield* moment("until", input.until)
          const read = yield* Effect.try({
            try: () => readRuns(file.path, file.role),
            catch: (e) => new CallRefused({ message: `the repository ${file.path} cannot be read: ${(e as Error).message}` })
          })
          const all = read.runs
          const visible = all.filter((run) => mayReadRun(context.caller, run))
          // every run counts, read or not: a node's answer elsewhere still shows it is there
          const answering = answeringNodes(all)
          const found = queryRuns(visible, {
            node: input.node, state: input.state, sender: input.sender, since, until, limit: input.limit ?? 50
          })
          act.note("read", `${all.length} run${all.length === 1 ? "" : "s"} in ${file.path} (${read.from === "cache" ? "the messages read before, and what arrived since" : "every post"})${visible.length < all.length ? `, ${visible.length} of them yours to read` : ""}; ${found.total} matched`)
          return {
            repository: file.path,
            senders: file.role === "served" ? "receipts" : "as written",
            total: found.total,
            runs: found.runs.map((run) => rowOf(run, now, answering))
          } satisfies RunsOutput
        }))
    )
  }
})
