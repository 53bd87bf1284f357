// 2.11: what a session is given. Seven filters in order, and the line each arrival
// becomes on the process's STDIN.
import { holdsMessage } from "./Envelope.js"
import { compareServerOrder, type ServerOrder } from "./Senders.js"

export type Arrival =
  | {
    readonly _tag: "Post"
    readonly hash: string
    /** the hash of the first post of the thread it is in */
    readonly thread: string
    readonly text: string
    readonly sender: string | undefined
    readonly order: ServerOrder
  }
  | {
    readonly _tag: "Change"
    readonly hash: string
    readonly ticket: string
    readonly text: string
    readonly sender: string | undefined
    readonly order: ServerOrder
  }
  | {
    readonly _tag: "Checkin"
    readonly hash: string
    /** as Fossil's timeline shows it */
    readonly branch: string
    readonly comment: string
    readonly sender: string | undefined
    readonly order: ServerOrder
  }

/** The run as its subscriptions see it. */
export interface SessionView {
  readonly session: boolean
  /** the server order of its started that counts; undefined while none counts */
  readonly started: ServerOrder | undefined
  readonly processUser: string
  readonly cloneUsers: ReadonlySet<string>
  /** the first post of the run's thread, when the run is a post */
  readonly thread?: string
  /** the run's ticket, when the run is a ticket change */
  readonly ticket?: string
  readonly checkins: ReadonlyArray<string>
  readonly hears: ReadonlyArray<string>
}

export const filterNames = ["session", "after", "known", "no message", "not its own", "where", "heard"] as const
export type FilterName = (typeof filterNames)[number]

export type FilterResult =
  | { readonly _tag: "Pass" }
  | { readonly _tag: "Fail"; readonly filter: 1 | 2 | 3 | 4 | 5 | 6 | 7; readonly name: FilterName }

const fail = (filter: 1 | 2 | 3 | 4 | 5 | 6 | 7): FilterResult => ({ _tag: "Fail", filter, name: filterNames[filter - 1]! })

/** The filters of 2.11 in order; the first that fails is named. */
export const filterArrival = (view: SessionView, arrival: Arrival): FilterResult => {
  if (!view.session || view.started === undefined) return fail(1)
  if (compareServerOrder(arrival.order, view.started) <= 0) return fail(2)
  const sender = arrival.sender
  if (sender === undefined) return fail(3)
  // check-ins carry no message, but a comment holding one is kept from the process all the same
  if (holdsMessage(arrival._tag === "Checkin" ? arrival.comment : arrival.text)) return fail(4)
  if (sender === view.processUser || view.cloneUsers.has(sender)) return fail(5)
  const where =
    arrival._tag === "Post"
      ? view.thread !== undefined && arrival.thread === view.thread
      : arrival._tag === "Change"
        ? view.ticket !== undefined && arrival.ticket === view.ticket
        : view.checkins.includes(arrival.branch)
  if (!where) return fail(6)
  const heard = arrival._tag === "Checkin" || (view.hears.length === 1 && view.hears[0] === "*") ||
    view.hears.includes(sender)
  if (!heard) return fail(7)
  return { _tag: "Pass" }
}

/** The line an arrival becomes (one line: JSON escapes every newline). */
export const deliveryLine = (arrival: Arrival): string => {
  const from = arrival.sender ?? ""
  switch (arrival._tag) {
    case "Post":
      return postLine(arrival.hash, from, arrival.text)
    case "Change":
      return changeLine(arrival.hash, arrival.ticket, from, arrival.text)
    case "Checkin":
      return checkinLine(arrival.hash, arrival.branch, from, arrival.comment)
  }
}

export const postLine = (hash: string, from: string, text: string): string => JSON.stringify({ post: hash, from, text })
export const changeLine = (hash: string, ticket: string, from: string, text: string): string =>
  JSON.stringify({ change: hash, ticket, from, text })
export const checkinLine = (hash: string, branch: string, from: string, comment: string): string =>
  JSON.stringify({ checkin: hash, branch, from, comment })

/** The first line on STDIN (2.10). */
export const firstLine = (run: string, objective: string): string => JSON.stringify({ run, objective })
