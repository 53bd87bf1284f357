// Where a run is decides only where its reports go (2.10): a reply to its post in its thread,
// or a change to its ticket. Every report is written as the node user (2.5).

import * as Effect from "effect/Effect"
import { Repository } from "../../services/Repository.js"
import { writeMessage } from "../protocol/Envelope.js"
import type { RunRecord } from "../pickup/RunRecord.js"

export const writeWhereTheRunIs = (record: Pick<RunRecord, "hash" | "place">, user: string, text: string) =>
  Effect.gen(function*() {
    const repository = yield* Repository
    if (record.place._tag === "Ticket") {
      const written = yield* repository.ticketChange({ user, ticket: record.place.ticket, fields: { icomment: text } })
      return written.hash
    }
    const written = yield* repository.reply({ user, to: record.hash, text })
    return written.hash
  })

/** A message the node writes (started, ended), as a post holding one fenced block and a line for people. */
export const writeMessageWhereTheRunIs = (
  record: Pick<RunRecord, "hash" | "place">,
  user: string,
  message: object,
  prose: string
) => writeWhereTheRunIs(record, user, writeMessage(message, prose))
