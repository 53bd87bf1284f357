import { describe, expect, it } from "vitest"
import * as Either from "effect/Either"
import { readMessage, writeMessage } from "../../src/protocol/Envelope.js"
import { decide } from "../../src/protocol/Life.js"
import { refusal } from "../../src/protocol/Refusals.js"
import { decodeRun } from "../../src/protocol/Run.js"
import { decideHeld, formOf, type HeldInput } from "../../src/watcher/HeldDecision.js"
import { buildBlock, buildRun, edited } from "../protocol/fixtures.js"

// The watcher's decision once it holds a run's lock is Life.decide's, as the round's is: no row of its own.

const build = Either.getOrThrow(decodeRun(buildRun()))
const manual = Either.getOrThrow(decodeRun(edited(buildRun(), (r) => (r.process.manual = true))))
const sender = { login: "alice", capabilities: "s" }
const stop = { hash: "f".repeat(64), content: { login: "admin", capabilities: "s" } }
const startedCounts = { hash: "e".repeat(64), content: undefined }
const held = (over: Partial<HeldInput["record"]> = {}, rest: Partial<HeldInput> = {}) =>
  decideHeld({
    record: { sender, started: undefined, stops: [], ...over },
    check: Either.right({ run: build }),
    processUserBusy: false,
    personStart: false,
    ...rest
  })

describe("the watcher holding a run decides it with Life.decide", () => {
  it("a started run whose lock it found free is lost, in the words of the round's row for a lock found free", () => {
    const round = decide({
      senderKnown: true,
      check: Either.right({ run: build }),
      record: { started: true, ended: false, stopped: false },
      care: "gone",
      processUserBusy: false,
      workspaceKept: false,
      event: { _tag: "Check" }
    })
    expect(held({ started: startedCounts })).toEqual(round)
    expect(held({ started: startedCounts })).toEqual({ _tag: "Lost", note: "its watcher ended without writing ended" })
    // a stop after its start changes nothing: no watcher is left to end its process
    expect(held({ started: startedCounts, stops: [stop] })).toEqual(round)
  })

  it("a started run whose sender the server has not said counts for nothing (2.3), as the round leaves it", () => {
    expect(held({ started: startedCounts, sender: undefined })).toEqual({ _tag: "Nothing", reason: "the server has not said who sent the run" })
  })

  it("a run not started is decided on its check: refused, stopped first, waiting, started", () => {
    const r = refusal(3, "workspace[0]: x")
    expect(held({}, { check: Either.left(r) })).toEqual({ _tag: "Refuse", refusal: r })
    expect(held({ stops: [stop] })).toEqual({ _tag: "EndStopped" })
    expect(held({}, { processUserBusy: true })._tag).toBe("Wait")
    expect(held({}, { check: Either.right({ run: manual }) })._tag).toBe("Wait")
    expect(held({}, { check: Either.right({ run: manual }), personStart: true })).toEqual({ _tag: "Start" })
    expect(held()).toEqual({ _tag: "Start" })
  })

  it("a started run's form is read without a check: the run as posted, or refusal 2 naming the key", () => {
    const message = readMessage(writeMessage(buildBlock()))
    if (message._tag !== "Message") throw new Error(`the fixture is no message: ${message._tag}`)
    expect(Either.map(formOf(message), (form) => form.run)).toEqual(Either.right(build))
    const form = formOf({ ...message, block: { ...message.block, node: "lab-2" } })
    expect(Either.isLeft(form) && form.left.number).toBe(2)
    expect(Either.isLeft(form) && form.left.note).toMatch(/^node: /)
  })
})
