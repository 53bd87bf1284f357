import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Schema from "effect/Schema"
import type { ReleaseRoot } from "../../services/ReleaseRoot.js"
import { releasePaths } from "../release/ReleasePaths.js"
import { followThroughServer } from "../follow/AskServer.js"
import { eventOut, WatchEventOut } from "../follow/EventOut.js"
import { follow, readRunSummary, type WatchEvent } from "../follow/Follow.js"
import { PostOut, read, RunOut } from "./read.js"
import { RunRow, rowOf } from "./runs.js"
import { runTool } from "./RunTool.js"
import { CallRefused, finish, recording, refuse } from "../operations/Operations.js"
import { repositoryFile, type RepositoryFile } from "./support/RepositoryFile.js"
import { ensureStreamServer, streamSettings } from "../follow/StreamServer.js"
import { newNonce, signGrant, streamSecret, TOKEN_MS } from "../follow/StreamToken.js"
import * as Path from "node:path"
import { defineTool, type ToolContext } from "./Tool.js"
import { mayReadRun } from "./support/Permissions.js"
import { rootOfCall } from "./support/ReleaseCall.js"
import { heldForRoom } from "./support/DiskStatus.js"

const optional = <A, I>(schema: Schema.Schema<A, I>, description: string) =>
  Schema.optionalWith(schema.annotations({ description }), { exact: true })

export const WatchInput = Schema.Struct({
  run: Schema.String.annotations({ description: "the run: its hash or a prefix" }),
  seconds: optional(Schema.Number.pipe(Schema.nonNegative()), "follow it at most this long, then answer with what happened so far (at a terminal until it ends; through MCP 50 s, on the web page 0 when not given)"),
  offset: optional(Schema.Int.pipe(Schema.nonNegative()), "where in its output to begin, as an earlier answer's offset says (0, its first line, when not given)"),
  root: optional(Schema.String, "the release root whose node runs it (by default the root this program was released into)"),
  exit_status: optional(Schema.Boolean, "end with the run: the command line's exit status is then 0 only when the run exited 0, and 1 otherwise (as it is for a call refused or failed)")
})
export type WatchInput = typeof WatchInput.Type

// an event as the answer gives it is the follower's (src/follow/EventOut.ts), which the stream server gives too
export { eventOut, WatchEventOut }

export const WatchOutput = Schema.Struct({
  run: Schema.String,
  summary: RunRow,
  over: Schema.Boolean.annotations({ description: "true: it ended, and summary says how; false: it goes on (call again with offset)" }),
  followed: Schema.Literal("care directory", "server", "record").annotations({
    description: "care directory: its output was read on its node's host as it printed it; server: from a clone, through the server's run page and its node's stream server; record: its state alone (its node is not on this host, or its care directory is not readable here)"
  }),
  offset: Schema.Number.annotations({ description: "where its output was read to: give it as offset to go on" }),
  events: Schema.Array(WatchEventOut).annotations({ description: "what happened, in order (its output kept to its last 1 MiB)" }),
  reports: Schema.Array(PostOut).annotations({ description: "the posts or ticket changes where it is, after it: started, ended, kept logs and the rest" }),
  record: optional(RunOut, "the run as read gives it: its summary, fields, verdicts and published files"),
  live: optional(Schema.Struct({
    url: Schema.String.annotations({ description: "the node's stream server's events of the run (server-sent events), from offset on; the host is the page's own when it starts with :PORT" }),
    token: Schema.String.annotations({ description: "the viewer's grant, signed by the node: for this run and one connection, within two minutes; give it as Authorization: Bearer TOKEN (a browser's EventSource, which cannot, as ?token=)" })
  }), "on the web page, while the run goes on and its node is this host's: where its page follows it live"),
  held: optional(Schema.String, "while the run waits and its node is this host's: why the node holds it back (ROOT short of free space)"),
  record_only: optional(Schema.String, "followed is record on the node's repository: why its output could not be read here, and what to do"),
  exit_status: optional(Schema.Number, "with exit_status: 0 when the run exited 0, 1 otherwise (the command line exits with it)")
})
export type WatchOutput = typeof WatchOutput.Type

const OUTPUT_BOUND = 1 << 20

/** What a person at a terminal sees as it happens: the output as printed, the rest on stderr in brackets. */
const printed = (run: string, event: WatchEventOut, progress: NonNullable<ToolContext["progress"]>): void => {
  switch (event.type) {
    case "output":
      return progress(event.stream ?? "stdout", event.text ?? "")
    case "state":
      return progress("stderr", `[ocx2 watch: ${run.slice(0, 12)} ${event.state ?? ""}]\n`)
    case "delivery":
      return progress("stderr", `[ocx2 watch: delivered ${(event.hash ?? "").slice(0, 12)}: ${event.line ?? ""}]\n`)
    case "missed":
      return progress("stderr", `[ocx2 watch: missed ${event.text ?? ""}]\n`)
    case "end":
      return undefined
  }
}

/** This process's account by name (its uid when the system has no name for it). */
const accountName = (): string => {
  try {
    return Os.userInfo().username
  } catch {
    return `uid ${process.getuid?.() ?? "unknown"}`
  }
}

/** ROOT/care when this call can read it (the node's host, as its own account); otherwise why not, in words that say what to do. */
const careDirOf = (input: WatchInput, context: ToolContext): Effect.Effect<{ readonly care: string } | { readonly why: string }, CallRefused, ReleaseRoot> =>
  (input.root === undefined && process.argv[1] === undefined
    ? Effect.succeed<{ readonly root: string } | { readonly why: string }>({ why: "no release root was named (--root ROOT)" })
    : rootOfCall("watch", input.root, process.argv[1], context.entryPoint).pipe(
      Effect.map((root): { readonly root: string } | { readonly why: string } => ({ root })),
      // a root named and unusable is the caller's to fix; none found, the record alone, saying why
      Effect.catchAll((e) => (input.root !== undefined || context.entryPoint === "cgi"
        ? Effect.fail(e)
        : Effect.succeed({ why: `no release root was named and this program is no release's (${e.message}): give --root ROOT, the release root of the run's node` })))
    )).pipe(Effect.map((found) => {
      if ("why" in found) return found
      const care = releasePaths(found.root).care
      try {
        Fs.accessSync(care, Fs.constants.R_OK | Fs.constants.X_OK)
        return { care }
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code ?? (e as Error).message
        // the pages run as the server's account, which Fossil gives no USER: the account by its uid
        const fix = context.entryPoint === "cgi"
          ? "serve the pages as the node's account (the one that writes ROOT, as docs/operations.md installs it) to show its output here"
          : "watch as the node's account on its host to see its output"
        return { why: `${care} cannot be read here as ${accountName()} (${code}): ${fix}` }
      }
    }))

/**
 * The stream server's URL for the run, from offset on, and a grant signed for the viewer: for this
 * run, one connection, two minutes; the stream server asks the repository for their rights again.
 */
const liveStream = async (root: string, program: string, file: RepositoryFile, run: string, context: ToolContext, offset: number) => {
  const port = await ensureStreamServer(root, program)
  const settings = streamSettings(root)
  const token = signGrant(streamSecret(releasePaths(root).node), {
    run, user: context.caller.user, capabilities: context.caller.capabilities, repository: file.path, role: file.role,
    origin: context.origin, nonce: newNonce(), expires: Date.now() + TOKEN_MS
  })
  const path = `/watch/${run}?offset=${offset}`
  return { url: settings.url !== undefined ? `${settings.url}${path}` : `:${port}${path}`, token }
}

export const watch = defineTool({
  name: "watch",
  summary: "Watch a run",
  description:
    "Follows a run as it happens: its state as it changes (waiting, started, ended and how), what its process prints, line " +
    "by line as it prints it, and a session's deliveries, until it ends, then its outcome and its reports (kept logs and the " +
    "rest). Its output is read on its node's host (the release root's care directory); elsewhere it follows its state in the " +
    "record. seconds bounds how long one call follows it and offset goes on from an earlier call. You watch the runs you may " +
    "read where they are: forum posts need Read Forum (2), tickets Read Ticket (r). Reads only.",
  input: WatchInput,
  positional: ["run"],
  output: WatchOutput,
  allow: () => undefined,
  readOnly: true,
  exitStatus: (output) => output.exit_status,
  handle: (input, context) => {
    const act = recording(context.dryRun)
    return finish(
      act,
      Effect.flatMap(repositoryFile("watch", context), (file) =>
        Effect.gen(function*() {
          const found = yield* Effect.try({
            try: () => readRunSummary(file, input.run),
            catch: (e) => new CallRefused({ message: `the repository ${file.path} cannot be read: ${(e as Error).message}` })
          })
          // a run the served repository does not hold is said first, whatever else is amiss (the pages answer it 404)
          if ("problem" in found && file.role === "served") return yield* refuse(found.problem)
          const care = yield* careDirOf(input, context)
          const careDir = "care" in care ? care.care : undefined
          const events: Array<WatchEventOut> = []
          let outputBytes = 0
          const keep = (run: string) => (out: WatchEventOut) => {
            if (context.progress !== undefined) printed(run, out, context.progress)
            events.push(out)
            if (out.type !== "output") return
            outputBytes += out.text!.length
            // the answer keeps the last of the output; a terminal saw all of it
            while (outputBytes > OUTPUT_BOUND) {
              const first = events.findIndex((e) => e.type === "output")
              outputBytes -= events[first]!.text!.length
              events.splice(first, 1, { type: "missed", at: events[first]!.at, text: "output past this answer's 1 MiB" })
            }
          }
          // from a clone's host the run's node is elsewhere: the server's run page, as the user the clone remembers
          if (careDir === undefined && file.role === "clone" && context.entryPoint !== "mcp") {
            if (context.caller.user !== undefined && context.caller.user !== file.user) {
              return yield* refuse(`the clone ${file.path} signs in to ${file.url} as ${file.user}, the user it remembers, not as ${context.caller.user}`)
            }
            const run = "summary" in found ? found.summary.run : input.run
            const remote = yield* Effect.tryPromise({
              try: (signal) => followThroughServer<WatchOutput>(file, run, keep(run), signal),
              catch: (e) => new CallRefused({ message: (e as Error).message })
            })
            act.note("follow", `the run ${remote.run} through the run page of ${file.url}${remote.live !== undefined ? " and its node's stream server" : ""}, as ${file.user}`)
            const { live: _live, ...rest } = remote
            return { ...rest, followed: "server", events } satisfies WatchOutput
          }
          if ("problem" in found) return yield* refuse(found.problem)
          if (!mayReadRun(context.caller, found.summary)) {
            return yield* refuse(found.summary.place._tag === "Ticket"
              ? "tickets are not yours to read here: that needs Fossil's Read Ticket (r)"
              : "forum posts are not yours to read here: that needs Fossil's Read Forum (2)")
          }
          const run = found.summary.run
          // said first: a run that prints much and shows nothing here would otherwise look stuck
          const recordOnly = "why" in care ? `following the record only (its state and reports, not its output): ${care.why}` : undefined
          if (recordOnly !== undefined) {
            act.note("follow", recordOnly)
            context.progress?.("stderr", `[ocx2 watch: ${recordOnly}]\n`)
          }
          const seconds = input.seconds ?? (context.entryPoint === "mcp" ? 50 : context.entryPoint === "cgi" ? 0 : undefined)
          const keepOut = keep(run)
          const followed = yield* Effect.tryPromise({
            try: (signal) => follow({
              repository: file, run, careDir, emit: (event: WatchEvent) => keepOut(eventOut(event)), signal,
              ...(input.offset !== undefined ? { offset: input.offset } : {}),
              ...(seconds !== undefined ? { deadline: Date.now() + seconds * 1000 } : {})
            }),
            catch: (e) => new CallRefused({ message: (e as Error).message })
          })
          act.note("follow", `the run ${run}${careDir !== undefined ? `, its output in ${careDir}` : ", its state in the record"}: ${followed.over ? "it ended" : "it goes on"}`)
          const record = yield* runTool(read, { what: run }, { ...context, entryPoint: context.entryPoint ?? "cli", dryRun: false })
          // what came after it where it is: a run written again in its thread has the first run's posts before it
          const where = record.output?.posts ?? record.output?.ticket?.changes ?? []
          const at = where.findIndex((p) => p.hash === run)
          const reports = at < 0 ? where : where.slice(at + 1)
          // the web page follows it live from the node's stream server, as the viewer Fossil signed in
          const live = context.entryPoint === "cgi" && !followed.over && careDir !== undefined && process.argv[1] !== undefined
            ? yield* Effect.tryPromise({
              try: () => liveStream(Path.dirname(careDir), process.argv[1]!, file, run, context, followed.offset),
              catch: (e) => new CallRefused({ message: `the run's live stream cannot be served: ${(e as Error).message}` })
            }).pipe(Effect.tap((l) => Effect.sync(() => act.note("stream", `the node's stream server follows it at ${l.url}`))))
            : undefined
          const summary = rowOf(followed.summary, Date.now())
          const held = summary.state === "waiting" && careDir !== undefined ? heldForRoom(Path.dirname(careDir)) : undefined
          return {
            run,
            summary,
            over: followed.over,
            followed: careDir !== undefined ? "care directory" : "record",
            offset: followed.offset,
            events,
            reports,
            ...(record.output?.run !== undefined ? { record: record.output.run } : {}),
            ...(live !== undefined ? { live } : {}),
            ...(held !== undefined ? { held } : {}),
            ...(recordOnly !== undefined ? { record_only: recordOnly } : {}),
            ...(input.exit_status === true ? { exit_status: followed.over && summary.outcome === "exited" && summary.exit === 0 ? 0 : 1 } : {})
          } satisfies WatchOutput
        }))
    )
  }
})
