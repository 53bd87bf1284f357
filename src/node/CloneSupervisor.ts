// The node's supervisor on a clone's host (docs/architecture.md, "The supervisor"): the same
// program as the server's (Supervisor.ts), its shell, its queue, its roll of watchers with a fiber
// per run, its one fiber of work, with the clone's event source in place of inotify on the served
// file. `ocx2 node`'s call (src/node/CloneNode.ts) is made in the process first, the node starting
// (every open run decided), tried again after a pause while it fails. Then it asks the server's OCX
// page for its newest receipt's number and holds the question open until a newer one arrives (the
// receipt tool's newer-than and wait: a long poll), and has the work fiber pull and run the round
// over what the pull brought the moment it is answered. A page too old to hold the question, or
// `--short-cycle`, makes it pull every half second instead; a server that fails is tried again
// less and less often. A watcher's end is seen at once and its run decided again (lost, or handed
// on), between two pulls.

import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Queue from "effect/Queue"
import * as Ref from "effect/Ref"
import * as Fs from "node:fs"
import { actNow, recording } from "../operations/Operations.js"
import { Hosts, type HostsService, type NodeServices } from "../../services/Hosts.js"
import { Receipts } from "../../services/Receipts.js"
import { runCloneNode } from "./CloneNode.js"
import { clonePlaceOf, readPasswordsFile } from "../root/ClonePasswords.js"
import { pullClone } from "../fossil/Pull.js"
import { cloneRound } from "./CloneRound.js"
import type { NodeConfig } from "../root/NodeConfig.js"
import { watcherOf } from "./Round.js"
import type { SupervisorFiles } from "../root/SupervisorFiles.js"
import { firstLine } from "./SupervisorLog.js"
import { releasePaths } from "../release/ReleasePaths.js"
import { feed, NodeEvent, namesWritten } from "./supervisor/NodeEvents.js"
import { makeShell, type NodeShell } from "./supervisor/NodeShell.js"
import { makeRoll, type Roll } from "./supervisor/Roll.js"

/** How long a clone's supervisor waits between two pulls on the short cycle (from the end of one to the start of the next). */
export const cloneEveryMs = 500
/** How long the server's page is asked to hold the question: under the 25 s the page allows. */
const longPollMs = 20_000
/** How long the short cycle is kept before a page that could not hold the question is asked again (its server upgraded). */
const askPageAgainMs = 10 * 60_000
/** The longest pause between two tries at a server that fails. */
const backoffMaxMs = 30_000

export interface CloneSupervisorOptions {
  /** pull every half second, never asking the page to hold a question (a proxy that cuts held requests) */
  readonly shortCycle: boolean
}

/** The pause after the `failures`th failure in a row: half a second doubling, at most 30 s. */
const backoffMs = (failures: number) => Math.min(backoffMaxMs, cloneEveryMs * 2 ** Math.min(failures - 1, 6))

export const superviseClone = (
  config: NodeConfig,
  files: SupervisorFiles,
  lockFd: number,
  program: string | undefined,
  options: CloneSupervisorOptions,
  hosts: HostsService
): Effect.Effect<number> =>
  Effect.scoped(Effect.gen(function*() {
    const shell = yield* makeShell({ config, files, lockFd, mode: "clone", atEnd: Effect.void, stoppedWords: "stopped" })
    yield* shell.writeInfo
    yield* shell.log({
      did: [`supervising ${config.nodeUser} on the clone ${config.repository} of ${config.serverUrl} from ${config.root}` +
        (options.shortCycle ? `, pulling every ${cloneEveryMs} ms` : ", pulling when the server's OCX page says a receipt arrived")]
    })
    yield* Effect.forkScoped(Effect.flatMap(startUntilStarted(config, program, hosts, shell), (started) =>
      Effect.scoped(cloneNode(config, options, shell, started.did)).pipe(
        Effect.provide(started.layer),
        Effect.catchAllCause((cause) => Cause.isInterruptedOnly(cause) ? Effect.void : shell.log({ did: [`could not keep the node: ${firstLine(Cause.squash(cause))}`] }).pipe(Effect.zipRight(shell.stop(1)))))))
    return yield* shell.stopped
  }))

/** How a step has been failing: how many times in a row, and what it said last (a server that stays down is said once, not at every try). */
interface Failing {
  readonly failures: number
  readonly last: string | undefined
}
const noFailure: Failing = { failures: 0, last: undefined }

/** A failure said (unless it says what the last one said), then the pause before the next try: how it fails now. */
const failedThen = (shell: NodeShell, what: string, was: Failing, e: unknown): Effect.Effect<Failing> =>
  Effect.gen(function*() {
    const failures = was.failures + 1
    const waitMs = backoffMs(failures)
    if (firstLine(e) !== was.last) {
      yield* shell.log({ did: [`${what} failed: ${firstLine(e)}; tried again in ${waitMs} ms, then less often while it fails (at least every ${backoffMaxMs / 1000} s)`] })
    }
    yield* Effect.sleep(waitMs)
    return { failures, last: firstLine(e) }
  })

interface Started {
  readonly layer: ReturnType<HostsService["clone"]>
  /** what the node's start decided */
  readonly did: ReadonlyArray<string>
}

/** `ocx2 node`'s call made in the process until it starts the node, after a pause each time it fails. */
const startUntilStarted = (config: NodeConfig, program: string | undefined, hosts: HostsService, shell: NodeShell): Effect.Effect<Started> =>
  Effect.iterate<Failing | Started, never, never>(noFailure, {
    while: (s) => !("layer" in s),
    body: (was) =>
      Effect.gen(function*() {
        const started = yield* Effect.exit(startOnce(config, program, hosts, shell))
        if (Exit.isSuccess(started)) return started.value
        return yield* failedThen(shell, "the node's start", was as Failing, Cause.squash(started.cause))
      })
  }).pipe(Effect.map((s) => s as Started))

/**
 * The node's start (which signs in and checks the clone and the passwords file): the layers of the
 * node's work after it, or a failure. After it, each step is a pull and the round over what it
 * brought: no sign-in, and the server is asked who sent what only when something arrived.
 */
const startOnce = (config: NodeConfig, program: string | undefined, hosts: HostsService, shell: NodeShell): Effect.Effect<Started, unknown> =>
  Effect.gen(function*() {
    yield* shell.counted
    const answer = yield* runCloneNode(
      { server_url: config.serverUrl!, passwords_file: config.passwordsFile!, root: config.root, check: true },
      { repository: config.repository },
      recording(false),
      program
    ).pipe(Effect.provideService(Hosts, hosts), Effect.provide(hosts.releaseRoot))
    const did = answer.stopped !== undefined && answer.stopped.reason !== "completed"
      ? [`${answer.stopped.reason}: ${answer.stopped.message ?? ""}`]
      : (answer.output?.runs ?? []).map((r) => `${r.run}: ${r.action}`)
    const passwords = readPasswordsFile(config.passwordsFile!)
    const completed = answer.stopped === undefined || answer.stopped.reason === "completed"
    // not started (refused, or the passwords file unreadable since): tried again after a pause, as a failure is
    if (!completed || passwords._tag !== "Passwords") {
      return yield* Effect.fail(new Error(did.join("; ") || (passwords._tag === "Refused" ? passwords.why : "the node did not start")))
    }
    return { layer: hosts.clone(clonePlaceOf(config, passwords.passwords), { pull: true }), did }
  }).pipe(Effect.uninterruptible)

/** The node started: its roll kept, its one fiber of work, and the long poll feeding it until the supervisor stops. */
const cloneNode = (config: NodeConfig, options: CloneSupervisorOptions, shell: NodeShell, did: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    // the roll of the node's watchers on this host, as on the server's (src/node/supervisor/Roll.ts)
    const care = releasePaths(config.root).care
    Fs.mkdirSync(care, { recursive: true, mode: 0o700 })
    const roll = yield* makeRoll({ config, care, log: shell.log, changed: shell.writeInfo, queue: shell.queue, watcherProgram: () => watcherOf(config.root) })
    yield* Ref.set(shell.watchers, roll.snapshot)
    yield* feed(shell.queue, namesWritten(care, (e) => shell.log({ did: [`inotify on ${care} failed: ${firstLine(e)}; a watcher's end is seen at the node's next start`] })),
      (name) => NodeEvent.CareChanged({ name }))
    // the next run's watcher waiting ready (the spare), as on the server's host: started with the node,
    // and again a while after a hand-off, once the run it took has had its start to itself
    yield* shell.spareSoon(0)
    const taken = yield* roll.takeBack
    yield* shell.lastRound(did)
    yield* shell.log({ did: [...did, `${did.length} open run${did.length === 1 ? "" : "s"} decided; ${taken} live watcher${taken === 1 ? "" : "s"} taken back; the node on ${config.repository} started`] })
    yield* shell.writeInfo
    yield* shell.workOn((batch) => cloneWork(config, shell, roll, batch))
    return yield* poll(shell, { seen: undefined, shortUntil: options.shortCycle ? Infinity : 0, failing: noFailure })
  })

/** One batch of the node's events on a clone's host, done in order: one piece of work at a time. */
const cloneWork = (config: NodeConfig, shell: NodeShell, roll: Roll, batch: Chunk.Chunk<NodeEvent>): Effect.Effect<void, never, NodeServices> =>
  Effect.gen(function*() {
    const events = Chunk.toReadonlyArray(batch)
    for (const e of events) if (e._tag === "CareChanged") yield* roll.heard(e.name)
    for (const e of events) if (e._tag === "WatcherEnded") yield* Effect.flatMap(roll.decideEnd(e.run, e.pid), e.answer)
    for (const e of events) if (e._tag === "Pull") yield* Effect.flatMap(Effect.exit(pullAndDecide(config, shell, e.answeredAt)), e.done)
    if (events.some((e) => e._tag === "WaitingDue")) yield* roll.lookAtWaiting
  }).pipe(Effect.uninterruptible)

/** A pull and the round over what it brought; where its time went logged from when the server's page answered. */
const pullAndDecide = (config: NodeConfig, shell: NodeShell, answeredAt: number | undefined): Effect.Effect<void, unknown, NodeServices> =>
  Effect.gen(function*() {
    yield* shell.counted
    const began = Date.now()
    yield* pullClone(config.repository)
    const pulledAt = Date.now()
    const decided = yield* cloneRound(config, actNow, { watcherProgram: watcherOf(config.root) })
    const took = { ...(answeredAt !== undefined ? { answered: new Date(answeredAt).toISOString(), waitedMs: began - answeredAt } : {}), pullMs: pulledAt - began, roundMs: Date.now() - pulledAt }
    const did = decided.decisions.map((d) => `${d.run}: ${d.action}`)
    if (decided.decisions.some((d) => d.action.startsWith("handed"))) yield* shell.spareSoon(1000)
    if (did.length > 0) {
      yield* shell.lastRound(did)
      yield* shell.log({ round: { from: decided.from, to: decided.to }, did, took })
      yield* shell.writeInfo
    }
    // the cursor stayed before them: a failure, so the loop pulls and decides again after its
    // pause, not only once the server's page says another receipt arrived (none may)
    if (decided.failed.length > 0) {
      return yield* Effect.fail(new Error(`deciding ${decided.failed.join(", ")} failed: the cursor stays before ${decided.failed.length === 1 ? "it" : "them"}`))
    }
  })

/** The pull asked of the work fiber, and how it went. */
const pulled = (shell: NodeShell, answeredAt: number | undefined) =>
  Effect.gen(function*() {
    const done = yield* Deferred.make<void, unknown>()
    yield* Queue.offer(shell.queue, NodeEvent.Pull({ answeredAt, done: (exit) => Deferred.done(done, exit) }))
    return yield* Deferred.await(done)
  })

interface Polling {
  /** the server's newest receipt number as its page last said it; undefined: to be asked before the next pull */
  readonly seen: number | undefined
  /** pulled every half second until then (the short cycle) */
  readonly shortUntil: number
  readonly failing: Failing
}

/** One step of the clone's event source: a pull on the short cycle, or the held question and a pull when it moved. */
const step = (shell: NodeShell, polling: Polling): Effect.Effect<Polling, unknown, Receipts> =>
  Effect.gen(function*() {
    if (Date.now() < polling.shortUntil) {
      yield* Effect.sleep(cloneEveryMs)
      yield* pulled(shell, undefined)
      return polling
    }
    // asked before the pull: whatever arrives after what the pull brought is newer, and wakes the next question
    const receipts = yield* Receipts
    const told = yield* receipts.newest(polling.seen ?? 0, polling.seen === undefined ? 0 : longPollMs)
    if (told === undefined) {
      yield* shell.log({ did: [`the server's OCX page does not hold a question until a receipt arrives (an older release): pulled every ${cloneEveryMs} ms, the page asked again in ${askPageAgainMs / 60_000} minutes`] })
      return { ...polling, seen: undefined, shortUntil: Date.now() + askPageAgainMs }
    }
    if (told !== polling.seen) yield* pulled(shell, Date.now())
    return { ...polling, seen: told }
  })

/** One step of the clone's event source and what follows it: after a failure the newest is asked again, then a pull, so nothing that arrived meanwhile is passed by. */
const pollOnce = (shell: NodeShell, polling: Polling): Effect.Effect<Polling, never, Receipts> =>
  Effect.gen(function*() {
    const next = yield* Effect.exit(step(shell, polling))
    if (Exit.isSuccess(next)) return { ...next.value, failing: noFailure }
    const failing = yield* failedThen(shell, "the round", polling.failing, Cause.squash(next.cause))
    return { ...polling, seen: undefined, failing }
  })

/** The clone's event source until the supervisor stops (a loop, not a recursion: a fiber's frames would grow with each step). */
const poll = (shell: NodeShell, polling: Polling): Effect.Effect<Polling, never, Receipts> =>
  Effect.iterate(polling, { while: () => true, body: (p) => pollOnce(shell, p) })
