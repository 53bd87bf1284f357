// What the server's supervisor and a clone's share around their work (docs/architecture.md, "The
// supervisor"): the node's one Queue of events, the stop (SIGTERM ends with 0, SIGINT with 130, a
// start that failed with 1) that closes the supervisor's one Scope, its info file and log, its
// rounds counted in a Ref, the spare watcher kept waiting, and what is left behind when it ends:
// the info file removed, the log's last line, the supervisor's lock let go.

import * as Cause from "effect/Cause"
import type * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as FiberHandle from "effect/FiberHandle"
import * as FiberSet from "effect/FiberSet"
import * as Queue from "effect/Queue"
import * as Ref from "effect/Ref"
import type * as Scope from "effect/Scope"
import * as Fs from "node:fs"
import type { NodeConfig } from "../../root/NodeConfig.js"
import { processStartTime, readSupervisorInfo, type SupervisorFiles, type SupervisorInfo, writeSupervisorInfo } from "../../root/SupervisorFiles.js"
import { ensureSpare } from "../../pickup/SpareClient.js"
import { firstLine, logTo } from "../SupervisorLog.js"
import { watcherOf } from "../Round.js"
import { listen, type NodeEvent, signals } from "./NodeEvents.js"

export interface NodeShell {
  readonly queue: Queue.Queue<NodeEvent>
  readonly log: (entry: Record<string, unknown>) => Effect.Effect<void>
  /** ends the supervisor with `code` (the first stop counts) */
  readonly stop: (code: number) => Effect.Effect<void>
  /** waits until the supervisor is stopped: its exit status */
  readonly stopped: Effect.Effect<number>
  /** the info file written again (the roll changed, a round did something) */
  readonly writeInfo: Effect.Effect<void>
  /** where the info file reads the roll's watchers from (set once the roll is kept) */
  readonly watchers: Ref.Ref<Effect.Effect<Record<string, number>>>
  /** a round began (the info file counts them) */
  readonly counted: Effect.Effect<void>
  /** what the last round did, for the info file */
  readonly lastRound: (did: ReadonlyArray<string>) => Effect.Effect<void>
  /**
   * The node's one fiber of work, in the scope: each batch of events taken from the queue done by
   * `work` (uninterruptible: what is under way is finished when the scope closes). A defect that
   * escapes it is said, and the supervisor ends (1) rather than hear without working.
   */
  readonly workOn: <R>(work: (batch: Chunk.Chunk<NodeEvent>) => Effect.Effect<void, never, R>) => Effect.Effect<void, never, Scope.Scope | R>
  /** the next run's watcher waiting ready (the spare), `afterMs` from now, unless a start of one is already due */
  readonly spareSoon: (afterMs: number) => Effect.Effect<void>
}

export interface ShellOptions {
  readonly config: NodeConfig
  readonly files: SupervisorFiles
  /** the supervisor's lock, held for its life; closed last */
  readonly lockFd: number
  readonly mode: SupervisorInfo["mode"]
  /** what it does last, before its stopped line (the server's supervisor ends its spare) */
  readonly atEnd: Effect.Effect<void>
  readonly stoppedWords: string
}

/** The shell, in the supervisor's scope: its signal listeners and timers end with it, its files are left as said above. */
export const makeShell = (options: ShellOptions): Effect.Effect<NodeShell, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { config, files } = options
    const say = logTo(files, config)
    const log = (entry: Record<string, unknown>) => Effect.sync(() => say(entry))
    // registered first, so it runs last: after every fiber of the supervisor has ended
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        if (readSupervisorInfo(files.info)?.pid === process.pid) Fs.rmSync(files.info, { force: true })
        yield* options.atEnd
        yield* log({ did: [options.stoppedWords] })
        Fs.closeSync(options.lockFd)
      }).pipe(Effect.catchAllDefect((e) => log({ did: [`ending: ${firstLine(e)}`] }))))
    const queue = yield* Queue.unbounded<NodeEvent>()
    const stopping = yield* Deferred.make<number>()
    const stop = (code: number) => Effect.asVoid(Deferred.succeed(stopping, code))
    yield* listen(signals("SIGTERM"), () => stop(0)).pipe(Effect.orDie)
    yield* listen(signals("SIGINT"), () => stop(130)).pipe(Effect.orDie)
    // the process kept alive for as long as the scope is open, whatever it listens to: a supervisor
    // waiting on its queue alone (its watches failed) would otherwise leave Node's loop empty and end
    yield* Effect.acquireRelease(Effect.sync(() => setInterval(() => undefined, 2 ** 31 - 1)), (keepAlive) => Effect.sync(() => clearInterval(keepAlive)))

    const since = new Date().toISOString()
    const started = processStartTime(process.pid) ?? ""
    const rounds = yield* Ref.make(0)
    const last = yield* Ref.make<SupervisorInfo["lastRound"]>(undefined)
    const watchers = yield* Ref.make<Effect.Effect<Record<string, number>>>(Effect.succeed({}))
    const writeInfo = Effect.gen(function*() {
      const info: SupervisorInfo = {
        pid: process.pid, started, since, repository: config.repository, node: config.nodeUser, mode: options.mode,
        watchers: yield* Effect.flatten(Ref.get(watchers)), rounds: yield* Ref.get(rounds),
        ...(yield* Effect.map(Ref.get(last), (lastRound) => (lastRound !== undefined ? { lastRound } : {})))
      }
      yield* Effect.try(() => writeSupervisorInfo(files.info, info)).pipe(
        Effect.catchAll((e) => log({ did: [`could not write ${files.info}: ${firstLine(e.error)}`] })))
    })

    const spareTimer = yield* FiberHandle.make()
    const spareStarts = yield* FiberSet.make()
    const spareSoon = (afterMs: number) =>
      Effect.asVoid(FiberHandle.run(spareTimer, Effect.sleep(afterMs).pipe(
        Effect.zipRight(FiberSet.run(spareStarts, Effect.promise(() => ensureSpare(config, watcherOf(config.root)).catch(() => undefined))))
      ), { onlyIfMissing: true }))

    const workOn = <R>(work: (batch: Chunk.Chunk<NodeEvent>) => Effect.Effect<void, never, R>) =>
      Effect.asVoid(Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.takeBetween(queue, 1, Number.MAX_SAFE_INTEGER), work)).pipe(
        Effect.catchAllCause((cause) => Cause.isInterruptedOnly(cause) ? Effect.void : log({ did: [`its work failed: ${firstLine(Cause.squash(cause))}; ending`] }).pipe(Effect.zipRight(stop(1)))))))

    return {
      queue, log, stop, writeInfo, watchers, spareSoon, workOn,
      stopped: Deferred.await(stopping),
      counted: Ref.update(rounds, (n) => n + 1),
      lastRound: (did) => Ref.set(last, { at: new Date().toISOString(), did })
    } satisfies NodeShell
  })
