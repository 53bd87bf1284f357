// What a node's supervisor hears, as Effect streams and one queue (docs/architecture.md, "The
// supervisor"): names written in a directory (inotify, through fs.watch), signals, timers. Each
// source is a scoped Stream: its fs.watch or process listener is let go when the supervisor's
// scope closes, so nothing it registered outlives it. Every source feeds the node's one Queue of
// events, which one fiber takes in batches (Supervisor.ts, CloneSupervisor.ts).

import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"

/** One thing that happened to the node, for its supervisor's one fiber of work. */
export type NodeEvent = Data.TaggedEnum<{
  /** the served repository's file changed (a receipt), or a wake-up (SIGUSR1, a timer): a round is due */
  RoundDue: {}
  /** a name written in the care directory: a watcher took its run's lock, a hand-off, a run waiting for its user */
  CareChanged: { readonly name: string }
  /** a run's watcher is gone: its run is decided again, the answer given to the run's fiber */
  WatcherEnded: { readonly run: string; readonly pid: number; readonly answer: (outcome: EndOutcome) => Effect.Effect<unknown> }
  /** a while after a round: what it read is read once more */
  LookAgain: {}
  /** the runs waiting for their process user are due to be looked at */
  WaitingDue: {}
  /** on a clone's host: the server's page said a receipt arrived (at `answeredAt`), or the short cycle's pause is over: a pull and its round */
  Pull: { readonly answeredAt: number | undefined; readonly done: (exit: Exit.Exit<void, unknown>) => Effect.Effect<unknown> }
}>
export const NodeEvent = Data.taggedEnum<NodeEvent>()

/** What deciding a gone watcher's run came to, as its run's fiber needs it. */
export type EndOutcome = Data.TaggedEnum<{
  /** decided (or nothing to decide): the run's fiber follows whoever holds the run now, if anyone */
  Decided: {}
  /** the run was handed on too often this minute: decided again after `ms` */
  HeldBack: { readonly ms: number }
  /** the run's lock is still held (a write of the gone watcher's landing): looked at again shortly */
  StillHeld: {}
  /** the decision failed: made again after a pause */
  Failed: { readonly error: unknown }
}>
export const EndOutcome = Data.taggedEnum<EndOutcome>()

/**
 * A source of the node's events: a Stream that, once it listens (its fs.watch or signal listener
 * registered), completes `listening`, or fails it when it cannot listen. `feed` waits for it, so
 * that nothing the supervisor says it hears (its info file, read by the hook before it sends
 * SIGUSR1) comes before it does, and a watch that cannot be made (EMFILE: the host's inotify
 * instances all taken) ends the supervisor at its start, as it did before, for its service to start
 * it again.
 */
export type Source<A> = (listening: Deferred.Deferred<void, Error>) => Stream.Stream<A>

/**
 * The names written in `dir` (fs.watch, inotify), as long as the stream is read; the watch is closed
 * when its scope closes. A failure of the watch once made is said through `onError` and ends the
 * stream: the other sources still reach the node.
 */
export const namesWritten = (dir: string, onError: (e: Error) => Effect.Effect<void>): Source<string> => (listening) =>
  Stream.asyncScoped<string, Error>((emit) =>
    Effect.acquireRelease(
      Effect.try({
        try: () =>
          Fs.watch(dir, { persistent: true }, (_event, name) => {
            if (name !== null) void emit.single(name)
          }).on("error", (e) => void emit.fail(e)),
        catch: (e) => (e instanceof Error ? e : new Error(String(e)))
      }),
      (watcher) => Effect.sync(() => watcher.close())
    ).pipe(Effect.tapBoth({ onFailure: (e) => Deferred.fail(listening, e), onSuccess: () => Deferred.succeed(listening, undefined) })), "unbounded")
    .pipe(Stream.catchAll((e) =>
      // said only when the watch had been made: one that could not be is its feed's failure
      Stream.execute(Effect.flatMap(Effect.exit(Deferred.await(listening)), (made) => (Exit.isSuccess(made) ? onError(e) : Effect.void)))))

/** Each time the process receives `signal`, while the stream is read; the listener is removed when its scope closes. */
export const signals = (signal: NodeJS.Signals): Source<NodeJS.Signals> => (listening) =>
  Stream.asyncScoped<NodeJS.Signals>((emit) => {
    const heard = () => void emit.single(signal)
    return Effect.acquireRelease(
      Effect.sync(() => process.on(signal, heard)),
      () => Effect.sync(() => process.off(signal, heard))
    ).pipe(Effect.zipRight(Deferred.succeed(listening, undefined)))
  }, "unbounded")

/**
 * Every element of `source` turned into `f`'s effect (for most, an event offered to the node's
 * queue), on a fiber of the scope; it returns once the source listens, and fails when it cannot.
 */
export const listen = <A>(source: Source<A>, f: (a: A) => Effect.Effect<void>): Effect.Effect<void, Error, Scope.Scope> =>
  Effect.gen(function*() {
    const listening = yield* Deferred.make<void, Error>()
    yield* Effect.forkScoped(Stream.runForEach(source(listening), f))
    yield* Deferred.await(listening)
  })

/** Every element of `source` made an event and offered to the node's queue; it returns once the source listens, and fails when it cannot. */
export const feed = <A>(queue: Queue.Enqueue<NodeEvent>, source: Source<A>, toEvent: (a: A) => NodeEvent | undefined): Effect.Effect<void, Error, Scope.Scope> =>
  listen(source, (a) => {
    const event = toEvent(a)
    return event === undefined ? Effect.void : Queue.offer(queue, event)
  })
