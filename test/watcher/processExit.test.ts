import { describe, expect, it } from "vitest"
import { endedOfProcess } from "../../src/protocol/Outcomes.js"
import { processEndOf } from "../../src/watcher/ProcessExit.js"

// The launcher's endings read as the protocol's process ends give the ended the watcher wrote
// before it asked the run's decision: exit codes (a signal already 128+N), budgets, a stop.
describe("processEndOf", () => {
  it("keeps each ending's ended", () => {
    expect(endedOfProcess(processEndOf({ outcome: "exited", exit: 0 }))).toEqual({ outcome: "exited", exit: 0 })
    expect(endedOfProcess(processEndOf({ outcome: "exited", exit: 137 }))).toEqual({ outcome: "exited", exit: 137 })
    expect(endedOfProcess(processEndOf({ outcome: "budget", limit: "memory", exit: 137 }))).toEqual({ outcome: "budget", note: "memory" })
    expect(endedOfProcess(processEndOf({ outcome: "budget", limit: "wall", exit: undefined }))).toEqual({ outcome: "budget", note: "wall" })
    expect(endedOfProcess(processEndOf({ outcome: "stopped", exit: 143 }))).toEqual({ outcome: "stopped" })
  })
})
