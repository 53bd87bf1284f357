// One call of the node on a clone's host (seed 001, "Add a node on another host"), after the
// pull: what the pull brought (the clone's receipts after the node's cursor) is read, the
// server is asked who sent each run and stop (the clone's own receipts name only its pulls),
// and each is decided in the server's order by the same decideRun the server's hook uses.
// An artifact whose sender the server has not said, and a message whose decision failed (the
// server not reached while its record was read, a hand-off that failed), is decided again at the
// next call: the cursor stays before the first of them, so no call passes a run by.

import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type { Act } from "../operations/Operations.js"
import { CareDirectory } from "../../services/CareDirectory.js"
import { Receipts } from "../../services/Receipts.js"
import { Repository, serverOrder, type Cursor } from "../../services/Repository.js"
import { releasePaths } from "../release/ReleasePaths.js"
import { deliverArrivals, whereSomeSessionListens } from "./Deliveries.js"
import { readSessionFiles } from "../care/SessionFiles.js"
import type { Arrival } from "../protocol/Subscriptions.js"
import { advanceCursor, cursorFileOf, readCursor } from "../root/HookFiles.js"
import type { NodeConfig } from "../root/NodeConfig.js"
import { decideMessage, nodeMessagesAfter, type NodeMessage } from "./Round.js"
import type { RunDecision } from "./RunDecision.js"

export interface CloneRoundResult {
  readonly from: Cursor
  readonly to: Cursor
  readonly decisions: ReadonlyArray<RunDecision>
  /** the runs whose decision failed this time: the cursor stays before them, and the next call decides them again */
  readonly failed: ReadonlyArray<string>
}

/** The node has no cursor on this clone: `ocx2 node --check` has not started it here. */
export class NodeNotStarted extends Schema.TaggedError<NodeNotStarted>()("NodeNotStarted", { message: Schema.String }) {}

/** The first line of why a decision failed, as Round's `described` says it. */
const firstLine = (e: unknown): string => String((e as { message?: unknown })?.message ?? e).split("\n")[0]!

const before = (c: Cursor): Cursor => (c.rid > 0 ? { rcvid: c.rcvid, rid: c.rid - 1 } : { rcvid: c.rcvid - 1, rid: Number.MAX_SAFE_INTEGER })

/** The round after the pull: decide what arrived after the cursor, in server order; the cursor moved past what was decided. */
export const cloneRound = (config: NodeConfig, act: Act, options: { readonly watcherProgram: string }) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    const repository = yield* Repository
    const receipts = yield* Receipts
    return yield* care.withRoundLock(Effect.gen(function*() {
      const cursorFile = cursorFileOf(config.root, config.repository, config.nodeUser)
      const from = readCursor(cursorFile)
      if (from === undefined) return yield* new NodeNotStarted({ message: `the node has not started on ${config.repository}: run ocx2 node with --check` })
      const { serverCode } = yield* repository.codes()
      // in the clone's order; each message's place in the server's order is its receipt
      const sessions = readSessionFiles(config.root)
      const read = yield* nodeMessagesAfter(config.nodeUser, from, { arrivals: sessions.length > 0 })
      const answers = read.messages.length === 0 ? [] : yield* receipts.receipts(read.messages.map((m) => m.hash))
      const known: Array<NodeMessage> = []
      const unknown: Array<NodeMessage> = []
      read.messages.forEach((message, i) => {
        const answer = answers[i]
        if (answer?._tag === "Received") known.push({ ...message, rcvid: answer.rcvid, rid: answer.rid })
        else unknown.push(message)
      })
      const inClone = new Map(read.messages.map((m) => [m.hash, { rcvid: m.rcvid, rid: m.rid }]))
      known.sort(serverOrder)
      const decisions: Array<RunDecision> = []
      // in the clone's order, as the cursor is
      const failed: Array<Cursor> = []
      const failedRuns: Array<string> = []
      for (const message of known) {
        const decided = yield* decideMessage(config, serverCode, message, act, options).pipe(Effect.either)
        if (Either.isRight(decided)) {
          decisions.push({ run: message.run, action: decided.right })
          continue
        }
        failed.push(inClone.get(message.hash)!)
        failedRuns.push(message.run)
        decisions.push({ run: message.run, action: `failed: ${firstLine(decided.left)}; decided again at the next call (the cursor stays before it)` })
      }
      for (const message of unknown) {
        decisions.push({
          run: message.run,
          action: `the server has not said who sent ${message.kind === "run" ? "the run" : `the ${message.kind} ${message.hash}`}: decided again at the next call`
        })
      }
      // only arrivals where a session listens are asked about; the server's answer is their sender and place
      const listened = read.arrivals.filter((a) => whereSomeSessionListens(sessions, a))
      const arrivalAnswers = listened.length === 0 ? [] : yield* receipts.receipts(listened.map((a) => a.hash))
      const unknownArrivals = listened.filter((_, i) => arrivalAnswers[i]?._tag !== "Received")
      // the cursor stays before the first artifact the server has not said the sender of, or whose
      // decision failed (clone order): delivery stops there (2.11), so none after it is given first
      const firstUnknown = [...unknown, ...failed, ...unknownArrivals.map((a) => a.order)].sort(serverOrder)[0]
      const to = firstUnknown === undefined ? read.cursor : before(firstUnknown)
      const given: Array<Arrival> = []
      listened.forEach((arrival, i) => {
        const answer = arrivalAnswers[i]
        if (answer?._tag !== "Received" || serverOrder(arrival.order, to) > 0) return
        given.push({ ...arrival, sender: answer.sender, order: { rcvid: answer.rcvid, rid: answer.rid } })
      })
      given.sort((a, b) => serverOrder(a.order, b.order))
      const delivered = yield* act("deliver", `${given.length} arrivals to the inboxes of the sessions whose filters they pass`,
        deliverArrivals(config, given))
      for (const line of delivered ?? []) decisions.push({ run: line.slice(0, line.indexOf(":")), action: line.slice(line.indexOf(":") + 2) })
      yield* act("cursor", `${cursorFile} = ${JSON.stringify(to)}`, Effect.sync(() => advanceCursor(cursorFile, to)))
      return { from, to, decisions, failed: failedRuns } satisfies CloneRoundResult
    }))
  })
