// 2.4, which replies count: of the replies naming a run, in server order, the first started and
// the first ended its answerer wrote, and every stop and publish a sender may make. Pure: the
// record is read by src/pickup/RunRecord.ts, the runs list by src/runs.
import type { Message } from "./Envelope.js"
import { decodeEnded, decodeStarted, type StartedContent } from "./Messages.js"
import type { EndedContent } from "./Outcomes.js"
import { compareServerOrder, replyCounts, type ReplyKind, type Sender } from "./Senders.js"

/** An artifact where the run is, with the message it holds and its sender as the server says. */
export interface Reply {
  readonly hash: string
  readonly rcvid: number
  readonly rid: number
  readonly message: Message | undefined
  readonly sender: Sender | undefined
}

export interface Counted<A> {
  readonly hash: string
  readonly content: A
}

export interface Tally {
  readonly started: Counted<StartedContent | undefined> | undefined
  readonly ended: Counted<EndedContent> | undefined
  readonly stops: ReadonlyArray<Counted<Sender>>
  readonly publishes: ReadonlyArray<Counted<Sender>>
}

const replyKinds: ReadonlyArray<ReplyKind> = ["started", "ended", "stop", "publish"]

/** 2.4: of the replies naming the run, in server order, which count. Pure. */
export const tally = (run: { readonly hash: string; readonly to: string | undefined; readonly rcvid: number; readonly rid: number }, replies: ReadonlyArray<Reply>): Tally => {
  let started: Tally["started"]
  let ended: Tally["ended"]
  const stops: Array<Counted<Sender>> = []
  const publishes: Array<Counted<Sender>> = []
  const ordered = [...replies].sort(compareServerOrder)
  for (const reply of ordered) {
    const message = reply.message
    if (message === undefined || message.re !== run.hash) continue
    if (compareServerOrder(reply, run) <= 0) continue // a reply cannot come before what it answers
    const kind = message.kind as ReplyKind
    if (!replyKinds.includes(kind) || run.to === undefined || !replyCounts(kind, reply.sender, run.to)) continue
    if (kind === "started" && started === undefined) {
      const content = decodeStarted(message.content)
      started = { hash: reply.hash, content: content._tag === "Right" ? content.right : undefined }
    } else if (kind === "ended" && ended === undefined) {
      const content = decodeEnded(message.content)
      // an ended whose content cannot be read still ends the run (2.12: an unknown outcome is ended)
      ended = { hash: reply.hash, content: content._tag === "Right" ? content.right : { outcome: "unreadable" } }
    } else if (kind === "stop") stops.push({ hash: reply.hash, content: reply.sender! })
    else if (kind === "publish") publishes.push({ hash: reply.hash, content: reply.sender! })
  }
  return { started, ended, stops, publishes }
}

