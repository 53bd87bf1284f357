/**
 * Issue 12: past `processes` no new process starts (2.9); it is not an ending. A process
 * that tries to start one more gets the kernel's EAGAIN from fork, and the run goes on until
 * its process ends (or another limit ends it). The host is unaffected.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { make } from "../../layers/BwrapSandbox.js"
import type { LaunchSpec, RunningProcess } from "../../services/SandboxLauncher.js"
import { decode, makeRoot, present, shellSpec } from "./support.js"

const { root, ws, care } = makeRoot("processes")
afterAll(() => Fs.rmSync(root, { recursive: true, force: true }))
const launcher = make()

/** an account no other test uses, so that every process it owns on the host is this test's */
const bombUid = 64187
const spec = (script: string, limits: LaunchSpec["limits"]): LaunchSpec => {
  const base = shellSpec(ws, care, script, { limits })
  return { ...base, sandbox: { ...base.sandbox!, uid: bombUid, gid: bombUid } }
}

/** host processes whose real uid is `uid`, with their state (a zombie counts) */
const ownedBy = (uid: number) =>
  Fs.readdirSync("/proc").filter((n) => /^\d+$/.test(n)).flatMap((n) => {
    try {
      const status = Fs.readFileSync(`/proc/${n}/status`, "utf8")
      if (!new RegExp(`^Uid:\\s+${uid}\\s`, "m").test(status)) return []
      return [{ pid: Number(n), state: /^State:\s+(\S)/m.exec(status)?.[1], ppid: Number(/^PPid:\s+(\d+)/m.exec(status)?.[1]) }]
    } catch {
      return []
    }
  })

/**
 * Nothing of the run is left: no process of its account runs once it ended, and none is left at
 * all once the host's PID 1 has reaped what it was given. (bwrap's outer process exits as soon as
 * it hears the command's status, so the namespace's init, killed with it, is reaped by PID 1;
 * this machine's PID 1 does that within a couple of seconds, not at once.)
 */
const nothingLeft = (seen: ReadonlyArray<number>) => Effect.gen(function*() {
  const left = ownedBy(bombUid)
  // nothing runs; at most bwrap's init is left, dead, for PID 1 to reap
  expect(left.filter((p) => !(p.state === "Z" && p.ppid === 1))).toEqual([])
  expect(left.length).toBeLessThanOrEqual(1)
  for (let i = 0; i < 100 && ownedBy(bombUid).length > 0; i++) yield* Effect.sleep("100 millis")
  expect(ownedBy(bombUid)).toEqual([])
  expect(present(seen)).toEqual([])
})

/** runs it, noting every process of the run seen while it runs, and whether the host could start one meanwhile */
const watched = (s: LaunchSpec) =>
  Effect.scoped(Effect.gen(function*() {
    const h: RunningProcess = yield* launcher.start(s)
    const seen = new Set<number>()
    let most = 0
    let hostStarted = 0
    let hostFailed = 0
    let ended = false
    yield* Effect.fork(Effect.tap(h.result, () => Effect.sync(() => (ended = true))))
    while (!ended) {
      const pids = yield* h.processIds
      for (const p of pids) seen.add(p)
      most = Math.max(most, pids.length)
      if (pids.length >= 16) {
        if (ChildProcess.spawnSync("/usr/bin/true").status === 0) hostStarted++
        else hostFailed++
      }
      yield* Effect.sleep("20 millis")
    }
    const result = yield* h.result
    return { result, seen: [...seen], most, hostStarted, hostFailed }
  }))

const python = (program: string) => ["python3", "-c", program]

describe("past processes no new process starts, and the run goes on (2.9)", () => {
  it.live("a loop of 40 background sleeps under processes 16 ends as sh ends, the fork errors kept", () =>
    Effect.gen(function*() {
      const { result, seen } = yield* watched(spec("for i in $(seq 1 40); do sleep 5 & done; wait; echo done", { processes: 16, wallSeconds: 20 }))
      // dash gives up at the first fork it cannot make: exit 2, not a budget, and long before the sleeps or wall end
      expect(result.ending).toEqual({ outcome: "exited", exit: 2 })
      expect(decode(result.stderr.tail)).toMatch(/Cannot fork/)
      expect(decode(result.stdout.tail)).toBe("")
      expect(result.endedAt - result.startedAt).toBeLessThan(4000)
      yield* nothingLeft(seen)
    }), 90_000)

  it.live("a process refused a fork gets EAGAIN and goes on: it ends exited, as it decides", () =>
    Effect.gen(function*() {
      const { result, seen, most, hostStarted, hostFailed } = yield* watched({
        ...spec("", { processes: 16, wallSeconds: 20 }),
        command: python([
          "import errno, os, sys, time",
          "kids, refused = [], []",
          "for i in range(40):",
          "    try:",
          "        pid = os.fork()",
          "    except OSError as e:",
          "        refused.append(errno.errorcode[e.errno]); print('fork:', e, file=sys.stderr); continue",
          "    if pid == 0:",
          "        time.sleep(2); os._exit(0)",
          "    kids.append(pid)",
          "for k in kids: os.waitpid(k, 0)",
          "print(len(kids), 'started;', len(refused), 'refused:', ' '.join(sorted(set(refused))))",
          "print('done')"
        ].join("\n"))
      })
      expect(result.ending).toEqual({ outcome: "exited", exit: 0 })
      // 16: python and its 15 children (bwrap and its namespace's init are not the run's)
      expect(decode(result.stdout.tail)).toBe("15 started; 25 refused: EAGAIN\ndone\n")
      expect(decode(result.stderr.tail)).toMatch(/fork: \[Errno 11\] Resource temporarily unavailable/)
      expect(most).toBeLessThanOrEqual(16 + 2)
      expect([hostStarted > 0, hostFailed]).toEqual([true, 0])
      yield* nothingLeft(seen)
    }), 90_000)

  it.live("a fork bomb that never stops stays at 16 while the host starts processes as ever; wall ends it", () =>
    Effect.gen(function*() {
      const { result, seen, most, hostStarted, hostFailed } = yield* watched({
        ...spec("", { processes: 16, wallSeconds: 2 }),
        command: python([
          "import os, sys, time",
          "while True:",
          "    try:",
          "        os.fork()",
          "    except OSError as e:",
          "        print('fork:', e, file=sys.stderr, flush=True); time.sleep(0.1)"
        ].join("\n"))
      })
      expect(result.ending).toMatchObject({ outcome: "budget", limit: "wall" })
      expect(decode(result.stderr.tail)).toMatch(/fork: \[Errno 11\] Resource temporarily unavailable/)
      expect(most).toBe(16 + 2)
      expect([hostStarted > 0, hostFailed]).toEqual([true, 0])
      yield* nothingLeft(seen)
    }), 90_000)
})
