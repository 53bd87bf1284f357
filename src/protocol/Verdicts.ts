// 2.16: verdicts are raw tags on a check-in, `pass: REASON (against X)` or `fail: ...`.
import { compareServerOrder, type ServerOrder } from "./Senders.js"

export const verdictTags = ["audited", "ci"] as const
export type VerdictTag = (typeof verdictTags)[number]

/** The verdict tag a tag name is, reading `sym-` names too; undefined for any other tag. */
export const verdictTagOf = (tagName: string): VerdictTag | undefined => {
  const name = tagName.startsWith("sym-") ? tagName.slice(4) : tagName
  return (verdictTags as ReadonlyArray<string>).includes(name) ? (name as VerdictTag) : undefined
}

export interface Verdict {
  readonly pass: boolean
  /** one line */
  readonly reason: string
  /** a run's full hash, or the path of a file stating the objective */
  readonly against: string
}

/** The reason on one line: every run of white space holding a line break becomes a space. */
export const oneLine = (text: string): string => text.replace(/\s*[\r\n\u2028\u2029]+\s*/g, " ").trim()

export const formatVerdict = (verdict: Verdict): string =>
  `${verdict.pass ? "pass" : "fail"}: ${oneLine(verdict.reason)} (against ${oneLine(verdict.against)})`

const VALUE = /^(pass|fail): (.*) \(against (.+)\)$/

/** The verdict a tag value states; undefined when it is not one (such a tag is no verdict). */
export const parseVerdict = (value: string): Verdict | undefined => {
  if (/[\r\n]/.test(value)) return undefined
  const match = VALUE.exec(value)
  if (match === null) return undefined
  return { pass: match[1] === "pass", reason: match[2]!, against: match[3]! }
}

/** A tag written on a check-in, as the event table (type g) and the receipts give it. */
export interface VerdictTagEvent {
  readonly tagName: string
  /** undefined for a cancel, which writes no verdict */
  readonly value: string | undefined
  readonly cancel: boolean
  /** undefined when the server has not said who sent it */
  readonly sender: string | undefined
  readonly order: ServerOrder
  /** who the server received the check-in from, and the user its U card names */
  readonly checkinSender: string | undefined
  readonly checkinUser: string
}

/** A verdict counts only if its sender neither sent the check-in nor is the user named in it. */
export const verdictCounts = (event: VerdictTagEvent): boolean =>
  event.sender !== undefined && event.sender !== event.checkinSender && event.sender !== event.checkinUser

export interface CountedVerdict extends Verdict {
  readonly tag: VerdictTag
  readonly sender: string
  readonly order: ServerOrder
}

/**
 * The verdicts that count on one check-in: for each sender, the latest (server order) for
 * each tag and each objective (`against`). Cancels and values that are no verdict are passed by.
 */
export const countedVerdicts = (events: ReadonlyArray<VerdictTagEvent>): ReadonlyArray<CountedVerdict> => {
  const latest = new Map<string, CountedVerdict>()
  for (const event of [...events].sort((a, b) => compareServerOrder(a.order, b.order))) {
    const tag = verdictTagOf(event.tagName)
    if (tag === undefined || event.cancel || event.value === undefined || !verdictCounts(event)) continue
    const verdict = parseVerdict(event.value)
    if (verdict === undefined) continue
    const sender = event.sender!
    latest.set(JSON.stringify([sender, tag, verdict.against]), { ...verdict, tag, sender, order: event.order })
  }
  return [...latest.values()].sort((a, b) => compareServerOrder(a.order, b.order))
}

/** The ci verdict of a run (2.10): pass for exit 0, else fail and how it ended. */
export const ciVerdict = (runHash: string, ended: { readonly outcome: string; readonly exit?: number; readonly note?: string }): Verdict =>
  ended.outcome === "exited" && ended.exit === 0
    ? { pass: true, reason: "exit 0", against: runHash }
    : {
      pass: false,
      reason: ended.outcome === "exited"
        ? `exit ${ended.exit ?? "unknown"}`
        : `${ended.outcome}${ended.note === undefined ? "" : `: ${oneLine(ended.note)}`}`,
      against: runHash
    }
