// Messages (2.1, 2.17), Outcomes (2.12), Subscriptions (2.11), Verdicts (2.16), Senders (2.4)
import { describe, expect, it } from "vitest"
import * as Either from "effect/Either"
import { readMessage, writeMessage } from "../../src/protocol/Envelope.js"
import {
  decodeEnded, decodePublish, decodeStarted, decodeStop, endedMessage, publishMessage, runMessage, startedMessage, startedValues, stopMessage
} from "../../src/protocol/Messages.js"
import { endedOfProcess, endedProblem, isKnownOutcome, outcomeTable, outcomes } from "../../src/protocol/Outcomes.js"
import { compareServerOrder, replyCounts } from "../../src/protocol/Senders.js"
import {
  changeLine, checkinLine, deliveryLine, filterArrival, firstLine, postLine, type Arrival, type SessionView
} from "../../src/protocol/Subscriptions.js"
import {
  ciVerdict, countedVerdicts, formatVerdict, parseVerdict, verdictCounts, verdictTagOf, type VerdictTagEvent
} from "../../src/protocol/Verdicts.js"

const RUN = "ab".repeat(20)

describe("replies: unknown keys ignored (2.17), encoders", () => {
  it("started, stop, publish and ended read with keys they do not know", () => {
    expect(decodeStarted({ values: { workspace: "/w" }, limits: { wall: "8h" }, later: 1 })).toEqual(Either.right({ values: { workspace: "/w" }, limits: { wall: "8h" } }))
    expect(decodeStop({ why: "enough" })).toEqual(Either.right({}))
    expect(decodePublish({ x: 1 })).toEqual(Either.right({}))
    expect(decodeEnded({ outcome: "exited", exit: 0, when: "now" })).toEqual(Either.right({ outcome: "exited", exit: 0 }))
    expect(Either.isLeft(decodeStop("no"))).toBe(true)
    expect(Either.isLeft(decodeEnded({ exit: 1 }))).toBe(true)
    expect(decodeStarted({ values: {} })).toEqual(Either.left("limits: missing"))
  })
  it("an unknown outcome, or a known one missing its part, is still an ended", () => {
    expect(decodeEnded({ outcome: "vanished" })).toEqual(Either.right({ outcome: "vanished" }))
    expect(decodeEnded({ outcome: "exited" })).toEqual(Either.right({ outcome: "exited" }))
    expect(endedProblem({ outcome: "exited" })).toBe("exited requires exit")
    expect(endedProblem({ outcome: "vanished" })).toBeUndefined()
  })
  it("encoders write what 2.1 gives, and read back", () => {
    expect(stopMessage(RUN)).toEqual({ ocx: 2, re: RUN, stop: {} })
    expect(publishMessage(RUN)).toEqual({ ocx: 2, re: RUN, publish: {} })
    expect(endedMessage(RUN, { outcome: "stopped" })).toEqual({ ocx: 2, re: RUN, ended: { outcome: "stopped" } })
    expect(runMessage("lab-2", { clone: "c", objective: "o", process: { user: "u", command: ["x"] } }).to).toBe("lab-2")
    const s = startedMessage(RUN, { values: startedValues({ workspace: "/w", password: "hunter2" }), limits: { wall: "8h" } })
    expect(s).toEqual({ ocx: 2, re: RUN, started: { values: { workspace: "/w", password: "$$password$$" }, limits: { wall: "8h" } } })
    expect(readMessage(writeMessage(s))).toMatchObject({ kind: "started", re: RUN, content: s.started })
  })
})

describe("2.12 outcomes", () => {
  it("has the table's five outcomes with their parts", () => {
    expect(outcomes).toEqual(["refused", "stopped", "exited", "budget", "lost"])
    expect(Object.fromEntries(outcomes.map((o) => [o, [outcomeTable[o].exit, outcomeTable[o].note]]))).toEqual({
      refused: ["absent", "required"], stopped: ["absent", "absent"], exited: ["required", "absent"],
      budget: ["absent", "required"], lost: ["absent", "required"]
    })
    expect(isKnownOutcome("refused")).toBe(true)
    expect(isKnownOutcome("paused")).toBe(false)
  })
  it.each([
    [{ outcome: "refused" }, "refused requires a note"],
    [{ outcome: "refused", note: "x" }, undefined],
    [{ outcome: "stopped", note: "x" }, "stopped has no note"],
    [{ outcome: "stopped", exit: 0 }, "stopped has no exit"],
    [{ outcome: "exited", exit: 3 }, undefined],
    [{ outcome: "budget" }, "budget requires a note"],
    [{ outcome: "budget", note: "wall" }, undefined],
    [{ outcome: "lost", note: "" }, "lost requires a note"]
  ])("%j -> %s", (ended, problem) => {
    expect(endedProblem(ended)).toBe(problem)
  })
  it("a process's end: stop first, then a limit, then its exit (128 + N for signal N)", () => {
    expect(endedOfProcess({ code: 0, signal: null, stopped: false })).toEqual({ outcome: "exited", exit: 0 })
    expect(endedOfProcess({ code: null, signal: 15, stopped: false })).toEqual({ outcome: "exited", exit: 143 })
    expect(endedOfProcess({ code: null, signal: 24, budget: "cpu", stopped: false })).toEqual({ outcome: "budget", note: "cpu" })
    expect(endedOfProcess({ code: null, signal: 9, budget: "wall", stopped: true })).toEqual({ outcome: "stopped" })
  })
})

describe("2.4 what counts", () => {
  it("started and ended from the run's to; stop and publish from admin or setup; unknown senders never", () => {
    expect(replyCounts("started", { login: "lab-2", capabilities: "" }, "lab-2")).toBe(true)
    expect(replyCounts("ended", { login: "alice", capabilities: "a" }, "lab-2")).toBe(false)
    expect(replyCounts("stop", { login: "alice", capabilities: "a" }, "lab-2")).toBe(true)
    expect(replyCounts("publish", { login: "sam", capabilities: "s" }, "lab-2")).toBe(true)
    expect(replyCounts("stop", { login: "lab-2", capabilities: "io" }, "lab-2")).toBe(false)
    expect(replyCounts("started", undefined, "lab-2")).toBe(false)
    expect(compareServerOrder({ rcvid: 2, rid: 1 }, { rcvid: 1, rid: 9 })).toBeGreaterThan(0)
    expect(compareServerOrder({ rcvid: 2, rid: 1 }, { rcvid: 2, rid: 3 })).toBeLessThan(0)
  })
})

describe("2.11 subscriptions", () => {
  const view: SessionView = {
    session: true, started: { rcvid: 10, rid: 100 }, processUser: "agent", cloneUsers: new Set(["lab-2"]),
    thread: "t".repeat(40), checkins: ["trunk"], hears: ["carol"]
  }
  const post: Arrival = { _tag: "Post", hash: "p".repeat(40), thread: "t".repeat(40), text: "hello", sender: "carol", order: { rcvid: 11, rid: 101 } }
  const checkin: Arrival = { _tag: "Checkin", hash: "c".repeat(40), branch: "trunk", comment: "fix", sender: "dave", order: { rcvid: 12, rid: 102 } }
  const change: Arrival = { _tag: "Change", hash: "d".repeat(40), ticket: "k".repeat(40), text: "hi", sender: "carol", order: { rcvid: 13, rid: 103 } }

  it("passes a post in the thread from a heard sender, and a check-in on a listed branch from anyone", () => {
    expect(filterArrival(view, post)).toEqual({ _tag: "Pass" })
    expect(filterArrival(view, checkin)).toEqual({ _tag: "Pass" })
    expect(filterArrival({ session: true, started: view.started, processUser: "agent", cloneUsers: view.cloneUsers, ticket: "k".repeat(40), checkins: [], hears: ["carol"] }, change)).toEqual({ _tag: "Pass" })
  })
  it.each([
    [1, "session", { ...view, session: false }, post],
    [1, "session", { ...view, started: undefined }, post],
    [2, "after", view, { ...post, order: { rcvid: 10, rid: 100 } }],
    [2, "after", view, { ...post, order: { rcvid: 9, rid: 500 } }],
    [3, "known", view, { ...post, sender: undefined }],
    [4, "no message", view, { ...post, text: "```json\n{\"ocx\": 1}\n```" }],
    [4, "no message", view, { ...checkin, comment: "```json\n{\"ocx\": 2, \"half" }],
    [5, "not its own", view, { ...post, sender: "agent" }],
    [5, "not its own", { ...view, hears: ["*"] }, { ...post, sender: "lab-2" }],
    [6, "where", view, { ...post, thread: "u".repeat(40) }],
    [6, "where", view, change],
    [6, "where", view, { ...checkin, branch: "release" }],
    [7, "heard", view, { ...post, sender: "mallory" }]
  ] as const)("filter %d (%s) fails", (filter, name, v, arrival) => {
    expect(filterArrival(v, arrival)).toEqual({ _tag: "Fail", filter, name })
  })
  it("hears [\"*\"] hears every user", () => {
    expect(filterArrival({ ...view, hears: ["*"] }, { ...post, sender: "mallory" })).toEqual({ _tag: "Pass" })
  })
  it("writes the three lines and the first line exactly", () => {
    expect(postLine("P", "carol", "a\nb")).toBe(`{"post":"P","from":"carol","text":"a\\nb"}`)
    expect(changeLine("C", "T", "carol", "x")).toBe(`{"change":"C","ticket":"T","from":"carol","text":"x"}`)
    expect(checkinLine("H", "trunk", "dave", "fix")).toBe(`{"checkin":"H","branch":"trunk","from":"dave","comment":"fix"}`)
    expect(firstLine(RUN, "answer")).toBe(`{"run":"${RUN}","objective":"answer"}`)
    expect(deliveryLine(checkin)).toBe(checkinLine(checkin.hash, "trunk", "dave", "fix"))
    expect(deliveryLine(change)).toBe(changeLine(change.hash, "k".repeat(40), "carol", "hi"))
    expect(deliveryLine(post).includes("\n")).toBe(false)
  })
})

describe("2.16 verdicts", () => {
  it("tag names, sym- names read too", () => {
    expect(["audited", "ci", "sym-audited", "sym-ci", "sym-trunk", "cix"].map(verdictTagOf)).toEqual(["audited", "ci", "audited", "ci", undefined, undefined])
  })
  it("formats and parses values, the reason on one line", () => {
    expect(formatVerdict({ pass: true, reason: "builds", against: RUN })).toBe(`pass: builds (against ${RUN})`)
    expect(formatVerdict({ pass: false, reason: "two\nlines", against: "docs/goal.md" })).toBe("fail: two lines (against docs/goal.md)")
    expect(parseVerdict(`fail: x (against y) more (against docs/a (1).md)`)).toEqual({ pass: false, reason: "x (against y) more", against: "docs/a (1).md" })
    for (const bad of ["pass builds (against x)", "ok: x (against y)", "pass: x", "pass: a\nb (against y)", "pass: x (against )"]) {
      expect(parseVerdict(bad)).toBeUndefined()
    }
  })
  const event = (over: Partial<VerdictTagEvent>): VerdictTagEvent => ({
    tagName: "ci", value: `pass: ok (against ${RUN})`, cancel: false, sender: "lab-2", order: { rcvid: 1, rid: 1 },
    checkinSender: "bob", checkinUser: "bob", ...over
  })
  it("counts only from a sender who neither sent the check-in nor is named in it", () => {
    expect(verdictCounts(event({}))).toBe(true)
    expect(verdictCounts(event({ sender: "bob" }))).toBe(false)
    expect(verdictCounts(event({ checkinSender: "carol", sender: "carol", checkinUser: "bob" }))).toBe(false)
    expect(verdictCounts(event({ sender: undefined }))).toBe(false)
  })
  it("keeps each sender's latest per tag and objective; cancels write none", () => {
    const counted = countedVerdicts([
      event({ order: { rcvid: 3, rid: 1 }, value: `fail: broke (against ${RUN})` }),
      event({ order: { rcvid: 1, rid: 1 } }),
      event({ order: { rcvid: 4, rid: 1 }, cancel: true, value: undefined }),
      event({ order: { rcvid: 2, rid: 1 }, tagName: "sym-audited", sender: "carol", value: "pass: reads well (against docs/goal.md)" }),
      event({ order: { rcvid: 5, rid: 1 }, value: `pass: other (against docs/goal.md)` }),
      event({ order: { rcvid: 6, rid: 1 }, sender: "bob" }),
      event({ order: { rcvid: 7, rid: 1 }, value: "not a verdict" })
    ])
    expect(counted.map((v) => [v.sender, v.tag, v.pass, v.against])).toEqual([
      ["carol", "audited", true, "docs/goal.md"],
      ["lab-2", "ci", false, RUN],
      ["lab-2", "ci", true, "docs/goal.md"]
    ])
  })
  it("a run's ci verdict: pass for exit 0, else fail and how it ended", () => {
    expect(ciVerdict(RUN, { outcome: "exited", exit: 0 })).toEqual({ pass: true, reason: "exit 0", against: RUN })
    expect(ciVerdict(RUN, { outcome: "exited", exit: 2 })).toEqual({ pass: false, reason: "exit 2", against: RUN })
    expect(ciVerdict(RUN, { outcome: "budget", note: "wall" })).toEqual({ pass: false, reason: "budget: wall", against: RUN })
  })
})
