import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Repository } from "../../services/Repository.js"
import { sha1, sha3 } from "../fossil/Hash.js"
import { writeWhereTheRunIs } from "../node/Reports.js"
import { readRunRecord } from "../pickup/RunRecord.js"
import { writeMessage } from "../protocol/Envelope.js"
import { nodeActsAtOnce } from "./support/ActAtOnce.js"
import { finish, recording, refuse } from "../operations/Operations.js"
import { servedFile } from "./support/RepositoryFile.js"
import { localLayers } from "./support/ServedLayers.js"
import { defineTool } from "./Tool.js"
import { needsAdminOrSetup } from "./support/Permissions.js"

export const StopInput = Schema.Struct({
  run: Schema.String.annotations({ description: "the run to stop: its hash or a prefix" })
})

export const StopOutput = Schema.Struct({
  run: Schema.String.annotations({ description: "the run's full hash" }),
  to: Schema.String.annotations({ description: "the run's node user" }),
  stop: Schema.optionalWith(Schema.String.annotations({ description: "the stop's full hash (absent in a dry run)" }), { exact: true }),
  thread: Schema.optionalWith(Schema.String.annotations({ description: "the run's thread (its first post)" }), { exact: true }),
  ticket: Schema.optionalWith(Schema.String.annotations({ description: "the run's ticket" }), { exact: true }),
  acted: Schema.optionalWith(Schema.String.annotations({ description: "what this host's node did at once" }), { exact: true })
})
export type StopOutput = typeof StopOutput.Type

/** The full hash of the artifact a hash or prefix names, from its bytes. */
export const fullHashOf = (name: string, bytes: Buffer): string => {
  const three = sha3(bytes)
  return three.startsWith(name) ? three : sha1(bytes)
}

export const stop = defineTool({
  name: "stop",
  summary: "Stop a run",
  description:
    "Writes a stop for a run ({\"ocx\":2,\"re\":RUN,\"stop\":{}}) as your user, where the run is: a reply to its post in its " +
    "thread, or a change to its ticket. A node acts on it only from a user holding admin or setup, so stop needs one of them. " +
    "A run that has ended is refused: there is nothing to stop. Acts on the served repository (--repository on its host, or its web page).",
  input: StopInput,
  positional: ["run"],
  output: StopOutput,
  allow: needsAdminOrSetup("stop", "a node acts on a stop only from a user holding one of them"),
  destructive: true,
  handle: (input, context) => {
    const act = recording(context.dryRun)
    return finish(
      act,
      Effect.flatMap(servedFile("stop", context), (served) =>
        Effect.gen(function*() {
          const user = context.caller.user
          if (user === undefined) return yield* refuse("stop writes as your user, and this call names none: sign in")
          const repository = yield* Repository
          if ((yield* repository.user(user)) === undefined) return yield* refuse(`no user ${user} in the served repository ${served.path}`)
          const run = fullHashOf(input.run, yield* repository.artifact(input.run))
          const record = yield* readRunRecord(run).pipe(
            Effect.catchTag("NotFound", () => refuse(`${run} holds no run: it is neither a forum post nor a ticket change`))
          )
          if (record.message === undefined || record.message.to === undefined) return yield* refuse(`${run} holds no run`)
          const to = record.message.to
          if (record.ended !== undefined) {
            return yield* refuse(`the run ${run} has ended (${record.ended.content.outcome}, ${record.ended.hash}): there is nothing to stop`)
          }
          act.note("read", `the run ${run} for ${to}: ${record.started !== undefined ? "started" : "not started"}${record.stops.length > 0 ? `, ${record.stops.length} stop(s) counting already` : ""}`)
          const where = record.place._tag === "Ticket" ? `a change to ticket ${record.place.ticket}` : `a reply to ${run} in its thread`
          const written = yield* act(
            "write",
            `${where} as ${user}: a stop of the run`,
            writeWhereTheRunIs(record, user, writeMessage({ ocx: 2, re: run, stop: {} }, `Stop the run ${run}.`))
          )
          const acted = written === undefined ? undefined : yield* nodeActsAtOnce({ repository: served.path, run, to, kind: "stop" })
          const output: StopOutput = {
            run,
            to,
            ...(written !== undefined ? { stop: written } : {}),
            ...(record.place._tag === "Ticket" ? { ticket: record.place.ticket } : { thread: record.place.root }),
            ...(acted !== undefined ? { acted } : {})
          }
          return output
        }).pipe(Effect.provide(localLayers(served.path))))
    )
  }
})
