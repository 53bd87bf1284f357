import { describe, expect, it } from "vitest"
import * as Either from "effect/Either"
import { decide, decideExit, type LifeEvent, type LifeInput } from "../../src/protocol/Life.js"
import { refusal } from "../../src/protocol/Refusals.js"
import { decodeRun, type LimitName, type Run } from "../../src/protocol/Run.js"
import { buildRun, edited, sessionRun } from "./fixtures.js"

const runOf = (content: unknown): Run => Either.getOrThrow(decodeRun(content))
const build = runOf(buildRun())
const manual = runOf(edited(buildRun(), (r) => (r.process.manual = true)))
const feedSession = runOf(edited(sessionRun(), (r) => (r.process.deliveries = "feed")))
const startSession = runOf(sessionRun())

const input = (over: Partial<LifeInput> & { event: LifeEvent }): LifeInput => ({
  senderKnown: true,
  check: Either.right({ run: build }),
  record: { started: false, ended: false, stopped: false },
  care: "none",
  processUserBusy: false,
  workspaceKept: true,
  ...over
})
const arrival: LifeEvent = { _tag: "Arrival" }
const stop: LifeEvent = { _tag: "Stop" }
const started = { started: true, ended: false, stopped: false }
const exit = (end: Partial<{ code: number | null; signal: number | null; budget: LimitName; stopped: boolean }>): LifeEvent => ({
  _tag: "ProcessExit",
  end: { code: null, signal: null, stopped: false, ...end }
})

describe("2.13 a run's life, row by row", () => {
  it("none + a run, a refusal holds -> ended refused", () => {
    const r = refusal(3, "workspace[0]: x")
    expect(decide(input({ event: arrival, check: Either.left(r) }))).toEqual({ _tag: "Refuse", refusal: r })
  })
  it("none + a run, manual false -> Start", () => {
    expect(decide(input({ event: arrival }))).toEqual({ _tag: "Start" })
  })
  it("none + a manual run -> waiting", () => {
    expect(decide(input({ event: arrival, check: Either.right({ run: manual }) }))._tag).toBe("Wait")
  })
  it("waiting + a person starts it -> Start", () => {
    expect(decide(input({ event: { _tag: "PersonStart" }, check: Either.right({ run: manual }) }))).toEqual({ _tag: "Start" })
  })
  it("waiting + a person starts it, a refusal then holds -> refused", () => {
    const r = refusal(6, "limits.memory: this host cannot provide it")
    expect(decide(input({ event: { _tag: "PersonStart" }, check: Either.left(r) }))).toEqual({ _tag: "Refuse", refusal: r })
  })
  it("none or waiting + a stop -> ended stopped, even where refusals 3 to 8 would hold", () => {
    expect(decide(input({ event: stop, record: { started: false, ended: false, stopped: true } }))).toEqual({ _tag: "EndStopped" })
    expect(decide(input({ event: stop, record: { started: false, ended: false, stopped: true }, check: Either.right({ run: manual }) }))).toEqual({ _tag: "EndStopped" })
    for (const n of [3, 4, 5, 6, 7, 8] as const) {
      expect(decide(input({ event: stop, record: { started: false, ended: false, stopped: true }, check: Either.left(refusal(n, "x")) }))).toEqual({ _tag: "EndStopped" })
    }
  })
  it("a stop on a run refused by 1 or 2 -> the refusal", () => {
    for (const n of [1, 2] as const) {
      const r = refusal(n, "x")
      expect(decide(input({ event: stop, record: { started: false, ended: false, stopped: true }, check: Either.left(r) }))).toEqual({ _tag: "Refuse", refusal: r })
    }
  })
  it("started + a delivery, deliveries feed -> to its STDIN", () => {
    expect(decide(input({ event: { _tag: "Delivery" }, record: started, care: "alive", check: Either.right({ run: feedSession }) }))).toEqual({ _tag: "Deliver", mode: "feed" })
  })
  it("started + a delivery, deliveries start -> a process for it", () => {
    expect(decide(input({ event: { _tag: "Delivery" }, record: started, care: "alive", check: Either.right({ run: startSession }) }))).toEqual({ _tag: "Deliver", mode: "start" })
  })
  it("started + a stop -> ends the process", () => {
    expect(decide(input({ event: stop, record: { ...started, stopped: true }, care: "alive" }))).toEqual({ _tag: "StopProcess" })
    expect(decide(input({ event: stop, record: { ...started, stopped: true }, care: "alive", check: Either.right({ run: startSession }) }))).toEqual({ _tag: "StopProcess" })
  })
  it("started + its process exits, deliveries not start -> ended exited, budget or stopped", () => {
    const alive = { record: started, care: "alive" as const }
    expect(decide(input({ ...alive, event: exit({ code: 0 }) }))).toEqual({ _tag: "End", ended: { outcome: "exited", exit: 0 } })
    expect(decide(input({ ...alive, event: exit({ code: 2 }) }))).toEqual({ _tag: "End", ended: { outcome: "exited", exit: 2 } })
    expect(decide(input({ ...alive, event: exit({ signal: 9 }) }))).toEqual({ _tag: "End", ended: { outcome: "exited", exit: 137 } })
    expect(decide(input({ ...alive, event: exit({ signal: 9, budget: "memory" }) }))).toEqual({ _tag: "End", ended: { outcome: "budget", note: "memory" } })
    expect(decide(input({ ...alive, event: exit({ signal: 15, stopped: true }) }))).toEqual({ _tag: "End", ended: { outcome: "stopped" } })
  })
  it("started + a process exits, deliveries start -> kept logs, the run goes on", () => {
    expect(decide(input({ record: started, care: "alive", check: Either.right({ run: startSession }), event: exit({ code: 1 }) }))).toEqual({ _tag: "KeepLogs" })
    // a process's own cpu or file_size budget is its delivery's: only the wall ends the run
    expect(decide(input({ record: started, care: "alive", check: Either.right({ run: startSession }), event: exit({ signal: 24, budget: "cpu" }) }))).toEqual({ _tag: "KeepLogs" })
    expect(decide(input({ record: started, care: "alive", check: Either.right({ run: startSession }), event: exit({ signal: 25, budget: "file_size" }) }))).toEqual({ _tag: "KeepLogs" })
  })
  it("decideExit: the watcher's question when a process ends; a stop it was asked makes the end stopped", () => {
    expect(decideExit(startSession, { code: 0, signal: null, stopped: false })).toEqual({ _tag: "KeepLogs" })
    expect(decideExit(startSession, { code: 0, signal: null, stopped: false }, true)).toEqual({ _tag: "End", ended: { outcome: "stopped" } })
    expect(decideExit(feedSession, { code: 3, signal: null, stopped: false })).toEqual({ _tag: "End", ended: { outcome: "exited", exit: 3 } })
    expect(decideExit(feedSession, { code: 152, signal: null, stopped: false, budget: "cpu" })).toEqual({ _tag: "End", ended: { outcome: "budget", note: "cpu" } })
  })
  it("started + a stop or past wall, deliveries start -> ended stopped or budget", () => {
    const s = { record: started, care: "alive" as const, check: Either.right({ run: startSession }) }
    expect(decide(input({ ...s, event: exit({ signal: 15, stopped: true }) }))).toEqual({ _tag: "End", ended: { outcome: "stopped" } })
    expect(decide(input({ ...s, event: exit({ signal: 9, budget: "wall" }) }))).toEqual({ _tag: "End", ended: { outcome: "budget", note: "wall" } })
  })
  it("started, not in its care -> ended lost", () => {
    expect(decide(input({ event: { _tag: "Check" }, record: started, care: "none" }))).toEqual({ _tag: "Lost", note: "its started counts, but the run is not in this node's care" })
    expect(decide(input({ event: { _tag: "Check" }, record: started, care: "gone" }))).toEqual({ _tag: "Lost", note: "its watcher ended without writing ended" })
    expect(decide(input({ event: stop, record: { ...started, stopped: true }, care: "gone" }))._tag).toBe("Lost")
  })
  it("ended + a publish, workspace kept -> publishes again", () => {
    expect(decide(input({ event: { _tag: "Publish" }, record: { started: true, ended: true, stopped: false } }))).toEqual({ _tag: "Publish" })
    expect(decide(input({ event: { _tag: "Publish" }, record: { started: true, ended: true, stopped: false }, workspaceKept: false }))._tag).toBe("Nothing")
  })
  it("ended + anything else -> nothing", () => {
    for (const event of [arrival, stop, { _tag: "Delivery" }, { _tag: "Check" }, { _tag: "PersonStart" }, exit({ code: 0 })] as const) {
      expect(decide(input({ event, record: { started: true, ended: true, stopped: true }, care: "alive" }))._tag).toBe("Nothing")
    }
    expect(decide(input({ event: arrival, record: { started: false, ended: true, stopped: false } }))._tag).toBe("Nothing")
  })
})

describe("the rest of decide", () => {
  it("an unknown sender counts for nothing yet", () => {
    expect(decide(input({ event: arrival, senderKnown: false }))._tag).toBe("Nothing")
  })
  it("one process user has one run at a time in a node's care", () => {
    expect(decide(input({ event: arrival, processUserBusy: true }))).toEqual({ _tag: "Wait", reason: "its process user has another run in this node's care" })
  })
  it("a run with no started whose watcher lives is left to it; one whose watcher is gone is decided anew", () => {
    expect(decide(input({ event: { _tag: "Check" }, care: "alive" }))._tag).toBe("Nothing")
    expect(decide(input({ event: { _tag: "Check" }, care: "gone" }))).toEqual({ _tag: "Start" })
  })
  it("a check finding a started run with a stop while its watcher lives stops it", () => {
    expect(decide(input({ event: { _tag: "Check" }, record: { ...started, stopped: true }, care: "alive" }))).toEqual({ _tag: "StopProcess" })
  })
  it("deliveries, publishes and exits before started do nothing; a delivery to a non-session does nothing", () => {
    for (const event of [{ _tag: "Delivery" }, { _tag: "Publish" }, exit({ code: 0 })] as const) {
      expect(decide(input({ event }))._tag).toBe("Nothing")
    }
    expect(decide(input({ event: { _tag: "Delivery" }, record: started, care: "alive" }))._tag).toBe("Nothing")
    expect(decide(input({ event: { _tag: "Publish" }, record: started, care: "alive" }))._tag).toBe("Nothing")
  })
})
