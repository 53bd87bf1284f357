/**
 * A run written anew from one the served repository holds (create's `again`, the run page's "Run
 * again"): its fields as its message holds them, its node, and where it is. Read from the record,
 * never from a page a viewer saw (whose server paths are redacted for anyone without setup).
 */
import * as Effect from "effect/Effect"
import { grants } from "../../fossil/Fullcap.js"
import { refuse } from "../../operations/Operations.js"
import { readRunRecord } from "../../pickup/RunRecord.js"
import { Repository } from "../../../services/Repository.js"
import { fullHashOf } from "../stop.js"
import type { Caller } from "../Tool.js"

export interface RunAgain {
  readonly run: string
  /** the run's fields: its message's run object */
  readonly fields: Readonly<Record<string, unknown>>
  /** its to: the node user it was for */
  readonly node: string
  /** where it is: a reply goes to the run in its thread, a ticket's change to its ticket */
  readonly place: { readonly to: string } | { readonly ticket: string }
}

/** The run `name` (a hash or a prefix) names, as create writes it again; refused when it holds none the caller may read. */
export const runToWriteAgain = (name: string, caller: Caller) =>
  Effect.gen(function*() {
    const repository = yield* Repository
    const run = fullHashOf(name, yield* repository.artifact(name))
    const record = yield* readRunRecord(run).pipe(
      Effect.catchTag("NotFound", () => refuse(`again: ${run} holds no run: it is neither a forum post nor a ticket change`))
    )
    const message = record.message
    const fields = message?.block["run"]
    if (message === undefined || message.kind !== "run" || message.to === undefined || typeof fields !== "object" || fields === null || Array.isArray(fields)) {
      return yield* refuse(`again: ${run} holds no run to write again (a message of kind run with a to and its fields)`)
    }
    const ticket = record.place._tag === "Ticket"
    if (!grants(caller.capabilities, ticket ? "r" : "2")) {
      return yield* refuse(`again: ${ticket ? "tickets" : "forum posts"} are not yours to read here: that needs Fossil's ${ticket ? "Read Ticket (r)" : "Read Forum (2)"}`)
    }
    const place = record.place._tag === "Ticket" ? { ticket: record.place.ticket } : { to: run }
    return { run, fields: fields as Record<string, unknown>, node: message.to, place } satisfies RunAgain
  })
