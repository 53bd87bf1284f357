// A run's record as the served repository holds it: the run, where it is, who sent it, and the
// replies that count (2.4), each decided by the server's receipts, never by the artifact's U card.

import * as Effect from "effect/Effect"
import { Receipts } from "../../services/Receipts.js"
import { Repository } from "../../services/Repository.js"
import { cardValue, parseArtifact } from "../fossil/Artifact.js"
import { readMessage, type Message } from "../protocol/Envelope.js"
import { type Counted, type Reply, tally, type Tally } from "../protocol/Replies.js"
import type { Sender } from "../protocol/Senders.js"
import { tolessAnswerer } from "../root/TolessAnswerer.js"

// which replies count (2.4) is the protocol's, pure; the record's readers name it here too
export { type Counted, type Reply, tally, type Tally }

/**
 * The process user a run's block names, as posted: read before the run is checked, since a run
 * refused for another key still holds a place in that user's queue and passes the turn on.
 */
export const processUserOf = (message: Pick<Message, "block">): string | undefined => {
  const run = message.block["run"]
  if (typeof run !== "object" || run === null) return undefined
  const process = (run as { readonly process?: unknown }).process
  if (typeof process !== "object" || process === null) return undefined
  const user = (process as { readonly user?: unknown }).user
  return typeof user === "string" ? user : undefined
}

export type RunPlace =
  | { readonly _tag: "Thread"; readonly root: string }
  | { readonly _tag: "Ticket"; readonly ticket: string }

export interface RunRecord extends Tally {
  readonly hash: string
  readonly place: RunPlace
  readonly rcvid: number
  readonly rid: number
  /** the run's own message, when its text holds one of kind run */
  readonly message: Message | undefined
  /** undefined until the server has said who sent it */
  readonly sender: Sender | undefined
  /**
   * The node user whose replies count (2.4): the run's `to`; for a run with no valid `to`, read on
   * the served repository, its own node (TolessAnswerer.ts, DECISIONS 16); else undefined.
   */
  readonly answerer: string | undefined
}

const runMessageOf = (text: string): Message | undefined => {
  const reading = readMessage(text)
  return reading._tag === "Message" && reading.kind === "run" ? reading : undefined
}

const messageOf = (text: string): Message | undefined => {
  const reading = readMessage(text)
  return reading._tag === "Message" ? reading : undefined
}

/** Reads a run's record: the run artifact, every reply where it is, and each sender from the receipts. */
export const readRunRecord = (hash: string) =>
  Effect.gen(function*() {
    const repository = yield* Repository
    const receipts = yield* Receipts
    const parsed = parseArtifact(yield* repository.artifact(hash))
    const ticket = cardValue(parsed, "K")
    const entries = ticket !== undefined
      ? (yield* repository.ticket(ticket)).map((c) => ({ hash: c.hash, rcvid: c.rcvid, rid: c.rid, text: c.text }))
      : (yield* repository.thread(hash)).map((p) => ({ hash: p.hash, rcvid: p.rcvid, rid: p.rid, text: p.text }))
    const own = entries.find((e) => e.hash === hash)
    const message = runMessageOf(own?.text ?? parsed.wiki ?? "")
    const replies = entries.filter((e) => e.hash !== hash).map((e) => ({ ...e, message: messageOf(e.text) }))
    // only the run and the replies naming it need a sender; ask for them in one call
    const asked = [hash, ...replies.filter((r) => r.message?.re === hash).map((r) => r.hash)]
    // the process user's capabilities, which the run's check asks next, asked with them (a clone's one request)
    const processUser = message !== undefined ? processUserOf(message) : undefined
    const answers = yield* receipts.receipts(asked, processUser !== undefined ? { capabilitiesNext: processUser } : {})
    const senders = new Map<string, Sender>()
    const order = new Map<string, { rcvid: number; rid: number }>()
    for (const answer of answers) {
      if (answer._tag !== "Received") continue
      senders.set(answer.hash, { login: answer.sender, capabilities: answer.capabilities })
      order.set(answer.hash, { rcvid: answer.rcvid, rid: answer.rid })
    }
    // on a clone the local rcvid is the pull's; the server's order is the receipt's
    const placed = <A extends { hash: string; rcvid: number; rid: number }>(a: A): A => ({ ...a, ...(order.get(a.hash) ?? {}) })
    const runOrder = placed({ hash, rcvid: own?.rcvid ?? 0, rid: own?.rid ?? 0 })
    // a run with no valid to is the served repository's own node's to refuse, and its replies are the ones that count
    const answerer = message === undefined ? undefined
      : message.to ?? (repository.role === "served" ? tolessAnswerer(repository.path) : undefined)
    const counted = tally(
      { hash, to: answerer, rcvid: runOrder.rcvid, rid: runOrder.rid },
      replies.map((r) => placed({ hash: r.hash, rcvid: r.rcvid, rid: r.rid, message: r.message, sender: senders.get(r.hash) }))
    )
    const record: RunRecord = {
      hash,
      place: ticket !== undefined ? { _tag: "Ticket", ticket } : { _tag: "Thread", root: entries[0]?.hash ?? hash },
      rcvid: runOrder.rcvid,
      rid: runOrder.rid,
      message,
      sender: senders.get(hash),
      answerer,
      ...counted
    }
    return record
  })
