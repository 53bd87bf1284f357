import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { spareWaits } from "../../src/pickup/SpareClient.js"
import { runningSupervisor, supervisorFilesOf } from "../../src/root/SupervisorFiles.js"
import { restartServer, type RunningServer } from "../support/fossilServer.js"
import { repeats, timeoutFor } from "../support/crashRepeats.js"
import { closeCloneWorld, cloneUsers, type CloneWorld, makeCloneWorld, postRun as postRunOn, runNode, useThisBuild, waitForKind } from "./cloneWorld.js"
import { waitOr, waitUntil } from "../support/world.js"
import { dist, waitFor } from "./hookWorld.js"
import { withoutSpare } from "./supervisorWorld.js"

// The supervisor on a clone's host: `ocx2 supervise --node lab2`, the release's program (this
// checkout's build), in place of the node's timer. It holds a question open at the server's OCX
// page (the receipt tool's newer-than and wait) and pulls when it is answered; with a page too old
// to hold it, it pulls every half second; a server that goes down is tried again until it is back.
// A run posted on the server through the web form is started on the clone's host with no `ocx2 node`
// call, the next one by the node's spare watcher.

let world: CloneWorld
let server: RunningServer | undefined
let supervisor: ChildProcess.ChildProcess | undefined
/** whether the supervisor running is a plain one (plainSupervisor), which the next case may go on with */
let plain = false
/** where the plain supervisor's log began */
let plainFrom = 0
beforeAll(async () => {
  world = await makeCloneWorld("ocx2-clonesup-")
  // the clone's host runs this checkout's build, the round's bundle (which the supervisor is) beside ocx2
  useThisBuild(world, dist)
  server = world.server
  expect((await runNode(world, ["--check"])).stopped).toEqual({ reason: "completed" })
}, 120_000)

const stopSupervisor = async () => {
  if (supervisor !== undefined && supervisor.exitCode === null && supervisor.signalCode === null) {
    const exited = new Promise((r) => supervisor!.once("exit", r))
    supervisor.kill("SIGTERM")
    await exited
  }
  supervisor = undefined
  plain = false
}
afterAll(async () => {
  await stopSupervisor()
  await closeCloneWorld(world, server)
})

const log = () => supervisorFilesOf(world.root, world.clone, cloneUsers.lab2.login).log
const logText = () => (Fs.existsSync(log()) ? Fs.readFileSync(log(), "utf8") : "")

/** Starts the release's `ocx2 supervise` and waits for the node's start; what the log held before is passed by (its length is returned). */
const startSupervisor = async (args: ReadonlyArray<string> = [], env: Readonly<Record<string, string>> = {}) => {
  await stopSupervisor()
  const from = logText().length
  supervisor = ChildProcess.spawn(process.execPath, [Path.join(world.root, "current", "ocx2"), "supervise", "--node", cloneUsers.lab2.login, "--root", world.root, ...args], {
    env: { ...process.env, USER: "root", ...env }, stdio: "ignore", detached: true
  })
  await waitOr(world, "the supervisor's log says it started the node", () => (logText().slice(from).includes("the node on") ? true : undefined), { ms: 60_000 })
  return from
}

/**
 * The plain supervisor (no arguments, the page as served): the one a case before left running, or a
 * new one. The cases that need nothing else of it share one, as a host keeps one running; what the
 * log held before the case is passed by (its length is returned).
 */
const plainSupervisor = async (): Promise<number> => {
  if (supervisor !== undefined && plain && supervisor.exitCode === null && supervisor.signalCode === null) return logText().length
  const from = await startSupervisor()
  plain = true
  plainFrom = from
  return from
}

/** A run for lab2 posted on the server through its web form; it appends a line to its workspace's `launched` when it starts. */
const postRun = (script = "true") =>
  Effect.promise(() => postRunOn(world, `echo x >> $$workspace$$/launched; ${script}`, {}, { workspace: [{ step: "directory", at: "$$root$$/work/$$run$$" }] }))
const launched = (run: string) => {
  try {
    return Fs.readFileSync(Path.join(world.root, "work", run, "launched"), "utf8").split("\n").filter((l) => l.length > 0).length
  } catch {
    return 0
  }
}
/** The run's started and ended (with its outcome), once it has ended. */
const answers = (run: string) =>
  waitForKind(world, run, "ended", 90_000, 200).pipe(Effect.map((messages) =>
    messages.map((m) => [m.kind, m.sender, m.kind === "ended" ? (m.content as { outcome?: string }).outcome : undefined])))

/** A run for lab2 posted on the server through its web form; it is started and ended by lab2. */
const postRunAndSeeItEnd = Effect.gen(function*() {
  const run = yield* postRun()
  const ended = yield* waitForKind(world, run, "ended", 90_000, 200)
  expect(ended.map((m) => [m.kind, m.sender])).toEqual([["started", "lab2"], ["ended", "lab2"]])
  // the supervisor's round decided it: handed to a watcher, or (the cases share one supervisor, and
  // the run of the case before may still be in care for the same process user) written down as
  // waiting, which the watcher before it hands on as it ends
  expect(
    yield* waitUntil(() => logText().includes(`${run}: handed to a watcher`) || logText().includes(`${run}: waits: its process user`), 30_000, 100),
    logText()
  ).toBe(true)
  return run
})

/**
 * The clone file's modification time once it stays the same for `everyMs` (each pull writes it), or
 * undefined if it never does within `ms`.
 */
const clonePullsStop = (ms: number, everyMs: number) => {
  let last = -1
  return waitFor(() => {
    const now = Fs.statSync(world.clone).mtimeMs
    const still = now === last
    last = now
    return still ? now : undefined
  }, ms, everyMs)
}

/**
 * The gaps (ms) between the next `times` writes of the clone file (each pull writes it), seen every
 * 50 ms; undefined if it is not written that often within `ms`.
 */
const clonePullsAgain = async (times: number, ms: number) => {
  const writes: Array<number> = []
  let last = Fs.statSync(world.clone).mtimeMs
  const seen = await waitFor(() => {
    const now = Fs.statSync(world.clone).mtimeMs
    if (now !== last) writes.push(Date.now())
    last = now
    return writes.length >= times ? true : undefined
  }, ms, 50)
  return seen === undefined ? undefined : writes.slice(1).map((at, i) => at - writes[i]!)
}

describe("the supervisor on a clone's host", () => {
  it.live("pulls when the server's page says a receipt arrived, and not while nothing does: a run posted on the server is started and ended", () => Effect.gen(function*() {
    const from = yield* Effect.promise(() => plainSupervisor())
    expect(logText().slice(plainFrom)).toContain("pulling when the server's OCX page says a receipt arrived")
    // idle, it holds its question at the server's page and pulls nothing (a short cycle would pull twice a second)
    expect(yield* Effect.promise(() => clonePullsStop(30_000, 1500))).toBeDefined()
    yield* postRunAndSeeItEnd
    // the node's spare waits on the clone's host too, and takes the next run
    yield* Effect.promise(() => waitOr(world, "a spare watcher waits", () => (spareWaits(world.root) ? true : undefined), { ms: 60_000, every: 200 }))
    const next = yield* postRunAndSeeItEnd
    expect(Fs.readFileSync(Path.join(world.root, "care", `${next}.log`), "utf8")).toMatch(/in care: spare \d+ took the run/)
    expect(logText().slice(from)).not.toContain("failed")
  }), 240_000)

  it.live("tries a server that is down again, less and less often, and goes on once it is back", () => Effect.gen(function*() {
    const from = yield* Effect.promise(() => plainSupervisor())
    const pid = supervisor!.pid
    yield* Effect.promise(() => server!.stop())
    server = undefined
    yield* Effect.promise(() => waitOr(world, "the supervisor's log says the round failed and is tried again", () => (/the round failed: .*tried again in \d+ ms/.test(logText().slice(from)) ? true : undefined), { ms: 60_000 }))
    server = yield* Effect.promise(() => restartServer(world.served, world.port, { extroot: world.extroot }))
    yield* postRunAndSeeItEnd
    expect(supervisor!.exitCode).toBeNull()
    expect(supervisor!.pid).toBe(pid)
  }), 240_000)
})

describe("the roll of watchers on a clone's host", () => {
  it.live("a watcher SIGKILLed is answered lost at once, with no restart and no call of ocx2 node", () => Effect.gen(function*() {
    const from = yield* Effect.promise(() => plainSupervisor())
    const pid = supervisor!.pid
    const run = yield* postRun("sleep 60")
    yield* Effect.promise(() => waitOr(world, "the supervisor launches the run's watcher, once", () => (launched(run) === 1 ? true : undefined), { ms: 60_000, every: 50, run }))
    const watcher = Number(Fs.readFileSync(Path.join(world.root, "care", `${run}.lock`), "utf8").trim())
    // on the supervisor's roll (its info file), as on the server's host
    yield* Effect.promise(() => waitOr(world, "the supervisor's roll holds the run's watcher", () => (runningSupervisor(world.root, world.clone, cloneUsers.lab2.login)?.watchers[run] === watcher ? true : undefined), { ms: 10_000, every: 50, run }))
    process.kill(watcher, "SIGKILL")
    expect(yield* answers(run)).toEqual([["started", "lab2", undefined], ["ended", "lab2", "lost"]])
    expect(launched(run)).toBe(1)
    expect(yield* Effect.promise(() => waitFor(() => (logText().slice(from).split("\n").some((l) => l.includes(`"run":"${run}"`) && l.includes(`"watcher":${watcher}`) && l.includes("answered lost")) ? true : undefined), 30_000, 50)),
      logText().slice(from)).toBe(true)
    expect(supervisor!.pid).toBe(pid)
  }), 180_000)

  it.live("a watcher SIGKILLed after its hand-off, before it took the run's lock, has its run handed again: started and ended once", () => Effect.gen(function*() {
    // watchers the supervisor starts (no spare: a spare's environment is its own) SIGKILL themselves just
    // before they take the run's lock, the first of each run only, while the file is there to take
    const spareBack = yield* Effect.promise(() => withoutSpare(world.root))
    const once = Path.join(world.dir, "crash-once")
    yield* Effect.gen(function*() {
      const from = yield* Effect.promise(() => startSupervisor([], { OCX2_CRASH_AT: "handed", OCX2_CRASH_ONCE: once }))
      for (let i = 0; i < repeats(3); i++) {
        Fs.writeFileSync(once, "")
        const run = yield* postRun()
        expect(yield* Effect.promise(() => waitFor(() => (Fs.existsSync(once) ? undefined : true), 60_000, 20))).toBe(true)
        expect(yield* answers(run)).toEqual([["started", "lab2", undefined], ["ended", "lab2", "exited"]])
        expect(launched(run)).toBe(1)
        expect(logText().slice(from).split("\n").some((l) => l.includes(`"run":"${run}"`) && l.includes("ended before it took the run's lock")), logText().slice(from)).toBe(true)
      }
      yield* Effect.promise(() => stopSupervisor())
    }).pipe(Effect.ensuring(Effect.sync(() => {
      Fs.rmSync(once, { force: true })
      spareBack()
    })))
  }), timeoutFor(3, 300_000))
})

describe("the supervisor on a clone's host, the server's page of an older release", () => {
  it.live("pulls every half second from a server whose page cannot hold the question (an older release)", () => Effect.gen(function*() {
    // the page of an older release: it knows no newer-than, and refuses it as any tool refuses an argument it does not take
    const page = Path.join(world.extroot, "ocx2-cgi")
    Fs.renameSync(page, `${page}-now`)
    Fs.writeFileSync(page, [
      "#!/bin/sh",
      "body=$(/usr/bin/head -c \"${CONTENT_LENGTH:-0}\")",
      "case \"$body\" in",
      `  *newer_than*) printf 'Status: 200 OK\\r\\nContent-Type: application/json; charset=utf-8\\r\\n\\r\\n%s' '${JSON.stringify({
        tool: "receipt", operations: [],
        stopped: { reason: "refused", message: "bad argument: newer_than: is unexpected, expected: \"artifacts\" | \"capabilities_of\"; wait: is unexpected, expected: \"artifacts\" | \"capabilities_of\"" }
      })}' ;;`,
      `  *) printf '%s' "$body" | exec ${page}-now ;;`,
      "esac",
      ""
    ].join("\n"), { mode: 0o755 })
    yield* Effect.gen(function*() {
      const from = yield* Effect.promise(() => startSupervisor())
      expect(yield* Effect.promise(() => waitFor(() => (logText().slice(from).includes("does not hold a question until a receipt arrives") ? true : undefined), 30_000, 100))).toBe(true)
      // it pulls on its short cycle: the clone is written again and again, never 3 s apart
      const gaps = yield* Effect.promise(() => clonePullsAgain(5, 12_000))
      expect(gaps, "the clone written 5 times within 12 s").toBeDefined()
      expect(Math.max(...gaps!), `the gaps between its pulls: ${gaps!.join(", ")} ms`).toBeLessThan(3000)
      yield* postRunAndSeeItEnd
      yield* Effect.promise(() => stopSupervisor())
    }).pipe(Effect.ensuring(Effect.sync(() => Fs.renameSync(`${page}-now`, page))))
  }), 180_000)
})
