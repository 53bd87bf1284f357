/** The process user a run names, read before the run is checked, whatever else is wrong with it. */
import { describe, expect, it } from "@effect/vitest"
import type { Message } from "../../src/protocol/Envelope.js"
import { processUserOf } from "../../src/pickup/RunCheck.js"

const message = (block: Record<string, unknown>): Message => ({ _tag: "Message", version: 2, kind: "run", content: block["run"], block })

describe("processUserOf", () => {
  it("reads the user of a run's process, even when other keys are malformed", () => {
    expect(processUserOf(message({ ocx: 2, to: "lab", run: { process: { user: "builder", command: 7 } } }))).toBe("builder")
  })
  it("is undefined when the run, its process or its user is missing or of another type", () => {
    for (const run of [undefined, null, "x", {}, { process: null }, { process: "sh" }, { process: {} }, { process: { user: 3 } }]) {
      expect(processUserOf(message({ ocx: 2, to: "lab", run }))).toBeUndefined()
    }
  })
})
