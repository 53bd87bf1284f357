import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { processStartTime } from "../../src/root/SupervisorFiles.js"
import type { RunSummary } from "../../src/runs/RunStates.js"
import { exposition, rootFamilies, runFamilies, sameSecret, type Family } from "../../src/tools/metrics.js"
import { holdLock } from "../support/heldLock.js"

// What the metrics read from a release root (watchers, supervisors, failed rounds) and from the
// runs (the histograms), on files made here: the figures each source gives, and the text format.

const dirs: Array<string> = []
afterAll(() => dirs.forEach((d) => Fs.rmSync(d, { recursive: true, force: true })))

const sample = (families: ReadonlyArray<Family>, name: string, labels: Record<string, string> = {}, suffix = "") =>
  families.find((f) => f.name === name)?.samples.find((s) => (s.suffix ?? "") === suffix && JSON.stringify(s.labels) === JSON.stringify(labels))?.value

describe("the metrics' sources", () => {
  it("a node with no log yet has failed nothing: each log's counter is 0, not missing (CI met a world before its first hook run)", () => {
    const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-metrics-"))
    dirs.push(root)
    const families = rootFamilies(root, Date.now())
    expect(sample(families, "ocx2_failed_rounds_total", { log: "hook" })).toBe(0)
    expect(sample(families, "ocx2_failed_rounds_total", { log: "supervisor" })).toBe(0)
  })

  it("counts the watchers holding a run's lock, the supervisors running and the log entries that say something failed", async () => {
    const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-metrics-"))
    dirs.push(root)
    const care = Path.join(root, "care")
    const node = Path.join(root, "node")
    Fs.mkdirSync(care, { recursive: true })
    Fs.mkdirSync(node, { recursive: true })
    // a run whose watcher holds its lock, one whose lock is free, and the round's lock held (no watcher)
    const held = Path.join(care, `${"a".repeat(64)}.lock`)
    Fs.writeFileSync(Path.join(care, `${"b".repeat(64)}.lock`), "")
    const letGo = await holdLock(held)
    const letGoRound = await holdLock(Path.join(care, "round.lock"))
    try {
      // lab's supervisor is this process, started a minute ago; lab-2's names a process that has ended
      const since = new Date(Date.now() - 60_000).toISOString()
      Fs.writeFileSync(Path.join(node, "supervisor-000000000000-lab.json"), JSON.stringify({
        pid: process.pid, started: processStartTime(process.pid), since, repository: "/r.fossil", node: "lab", mode: "served", watchers: {}, rounds: 3
      }))
      Fs.writeFileSync(Path.join(node, "supervisor-000000000000-lab-2.json"), JSON.stringify({
        pid: process.pid, started: "1", since, repository: "/r.fossil", node: "lab-2", mode: "clone", watchers: {}, rounds: 0
      }))
      const line = (did: ReadonlyArray<string>) => `${JSON.stringify({ at: since, pid: 1, repository: "/r.fossil", given: [], did })}\n`
      Fs.writeFileSync(Path.join(node, "hook.log"),
        line(["nothing arrived after the cursor"]) +
        line([`failed: database is locked`]) +
        line([`${"c".repeat(64)}: failed: the server did not answer`, "another line"]) +
        line(["a run that failed its checks was refused"]) +
        "not json, failed: but not an entry\n")
      Fs.writeFileSync(Path.join(node, "supervisor.log"), line(["the round failed: ENOSPC"]) + line(["supervising lab"]))
      const families = rootFamilies(root, Date.now())
      expect(sample(families, "ocx2_watchers_alive")).toBe(1)
      expect(sample(families, "ocx2_supervisor_up", { node: "lab" })).toBe(1)
      expect(sample(families, "ocx2_supervisor_up", { node: "lab-2" })).toBe(0)
      expect(sample(families, "ocx2_supervisor_uptime_seconds", { node: "lab" })).toBeGreaterThanOrEqual(60)
      expect(sample(families, "ocx2_supervisor_uptime_seconds", { node: "lab-2" })).toBeUndefined()
      expect(sample(families, "ocx2_failed_rounds_total", { log: "hook" })).toBe(2)
      expect(sample(families, "ocx2_failed_rounds_total", { log: "supervisor" })).toBe(1)
      expect(exposition(families)).toMatch(/^# HELP ocx2_watchers_alive .+\n# TYPE ocx2_watchers_alive gauge\nocx2_watchers_alive 1\n/)
    } finally {
      await letGo()
      await letGoRound()
    }
    // the lock let go: no watcher alive
    expect(sample(rootFamilies(root, Date.now()), "ocx2_watchers_alive")).toBe(0)
  })

  it("makes cumulative histograms of pickup and run times by node, with their sums and counts", () => {
    const run = (node: string, posted: number, started?: number, ended?: number): RunSummary => ({
      run: `${node}${posted}`, node, sender: "alice", place: { _tag: "Thread", root: "r", title: undefined } as unknown as RunSummary["place"],
      private: false, objective: undefined, processUser: undefined, manual: false, session: false,
      state: ended !== undefined ? "ended" : started !== undefined ? "started" : "waiting", ended: undefined,
      posted, startedAt: started, endedAt: ended, startedHash: undefined, endedHash: undefined, stops: 0
    })
    const families = runFamilies([run("lab", 0, 400, 10_400), run("lab", 0, 3_000), run("lab", 0), run("lab-2", 0, 100_000, 100_500)])
    expect(sample(families, "ocx2_runs", { node: "lab", state: "ended" })).toBe(1)
    expect(sample(families, "ocx2_runs", { node: "lab", state: "started" })).toBe(1)
    expect(sample(families, "ocx2_runs", { node: "lab", state: "waiting" })).toBe(1)
    expect(sample(families, "ocx2_runs", { node: "lab-2", state: "ended" })).toBe(1)
    // lab's pickups: 0.4 s and 3 s
    expect(sample(families, "ocx2_run_pickup_seconds", { node: "lab", le: "0.25" }, "_bucket")).toBe(0)
    expect(sample(families, "ocx2_run_pickup_seconds", { node: "lab", le: "0.5" }, "_bucket")).toBe(1)
    expect(sample(families, "ocx2_run_pickup_seconds", { node: "lab", le: "5" }, "_bucket")).toBe(2)
    expect(sample(families, "ocx2_run_pickup_seconds", { node: "lab", le: "+Inf" }, "_bucket")).toBe(2)
    expect(sample(families, "ocx2_run_pickup_seconds", { node: "lab" }, "_sum")).toBeCloseTo(3.4)
    expect(sample(families, "ocx2_run_pickup_seconds", { node: "lab" }, "_count")).toBe(2)
    // lab-2 waited 100 s: past every bucket but 300 s
    expect(sample(families, "ocx2_run_pickup_seconds", { node: "lab-2", le: "60" }, "_bucket")).toBe(0)
    expect(sample(families, "ocx2_run_pickup_seconds", { node: "lab-2", le: "300" }, "_bucket")).toBe(1)
    // run durations: lab 10 s (only the ended run), lab-2 0.5 s
    expect(sample(families, "ocx2_run_duration_seconds", { node: "lab", le: "5" }, "_bucket")).toBe(0)
    expect(sample(families, "ocx2_run_duration_seconds", { node: "lab", le: "15" }, "_bucket")).toBe(1)
    expect(sample(families, "ocx2_run_duration_seconds", { node: "lab" }, "_count")).toBe(1)
    expect(sample(families, "ocx2_run_duration_seconds", { node: "lab-2", le: "1" }, "_bucket")).toBe(1)
    expect(exposition(families)).toContain('ocx2_run_pickup_seconds_bucket{node="lab",le="+Inf"} 2\nocx2_run_pickup_seconds_sum{node="lab"} 3.4\n')
  })

  it("escapes label values and compares tokens whole", () => {
    expect(exposition([{ name: "x", help: "h", type: "gauge", samples: [{ labels: { node: 'a"b\\c\nd' }, value: 1 }] }]))
      .toBe('# HELP x h\n# TYPE x gauge\nx{node="a\\"b\\\\c\\nd"} 1\n')
    expect(sameSecret("abc", "abc")).toBe(true)
    expect(sameSecret("abd", "abc")).toBe(false)
    expect(sameSecret("ab", "abc")).toBe(false)
    expect(sameSecret("", "")).toBe(false)
  })
})
