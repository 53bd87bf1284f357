/**
 * How an action is taken, recorded and ended, for every tool and for the node's rounds: the
 * operations log (`Act`: an action performed and recorded, or in a dry run only recorded), the one
 * refusal error of a call (`CallRefused`), and `finish`, which turns a call's outcome into its
 * answer. It sits low (on services/ alone) so that src/node, src/release and src/tools all act
 * through it, and none of them imports a floor above its own.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { CheckoutUnfit, NotACheckout, RootBusy } from "../../services/ReleaseRoot.js"
import { InvalidHash } from "../../services/Receipts.js"
import { AmbiguousName, InvalidInput, NotFound, PhantomArtifact, WriteRefused } from "../../services/Repository.js"

/** One step a tool performed, or in a dry run would perform. */
export const Operation = Schema.Struct({
  op: Schema.String,
  detail: Schema.String,
  done: Schema.Boolean
})
export type Operation = typeof Operation.Type

export const StopReason = Schema.Literal("completed", "dry_run", "refused", "failed")
export type StopReason = typeof StopReason.Type

/** What a tool's handler returns; runTool adds the tool's name and turns failures into answers. */
export interface Handled<O> {
  readonly operations: ReadonlyArray<Operation>
  readonly output?: O
  readonly stopped?: { readonly reason: StopReason; readonly message?: string }
}

/**
 * How an action is taken. Called, it performs `effect` and records it; in a dry run it records the
 * operation as not done and skips it, so a dry run's log is exactly the log the real call would
 * return. `note` records something read or decided, which a dry run does too.
 */
export interface Act {
  <A, E, R>(op: string, detail: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A | undefined, E, R>
  readonly note: (op: string, detail: string) => void
  readonly operations: ReadonlyArray<Operation>
  readonly dryRun: boolean
}

const makeAct = (dryRun: boolean, keep: boolean): Act => {
  const entries: Array<Operation> = []
  const record = (entry: Operation) => {
    if (keep) entries.push(entry)
  }
  const act = <A, E, R>(op: string, detail: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A | undefined, E, R> => {
    if (dryRun) {
      record({ op, detail, done: false })
      return Effect.succeed(undefined)
    }
    return Effect.tap(effect, () => Effect.sync(() => record({ op, detail, done: true })))
  }
  return Object.assign(act, {
    note: (op: string, detail: string) => record({ op, detail, done: true }),
    operations: entries,
    dryRun
  })
}

/** A call's operations log: what it does is recorded for its answer (in a dry run, only recorded). */
export const recording = (dryRun: boolean): Act => makeAct(dryRun, true)

/** Acting at once, with no record kept: the node's rounds outside a tool call, whose log nobody reads. */
export const actNow: Act = makeAct(false, false)

/** A call refused: what the caller can change (a name, an argument, who calls); nothing more was written. */
export class CallRefused extends Schema.TaggedError<CallRefused>()("CallRefused", {
  message: Schema.String
}) {}

export const refuse = (message: string): Effect.Effect<never, CallRefused> => Effect.fail(new CallRefused({ message }))

/**
 * The failures a call is refused for: its own refusal, and the services' failures that the
 * caller's input caused (a name not found or ambiguous, input or a hash Fossil takes as invalid, a
 * write the server refused, a release root busy or a checkout that is none or unfit). Every other
 * failure (a program, a file system, a server failing) is answered failed.
 */
export const RefusedFailure = Schema.Union(
  CallRefused, NotFound, AmbiguousName, InvalidInput, PhantomArtifact, WriteRefused, InvalidHash, RootBusy, NotACheckout, CheckoutUnfit
)
export type RefusedFailure = typeof RefusedFailure.Type
const isRefused = Schema.is(RefusedFailure)

/** A call's failure: a tagged error with words for the caller. */
export interface Failure {
  readonly _tag: string
  readonly message: string
}

/** Ends every tool's call: its output when it ran to the end; otherwise the operations done so far and why it stopped. */
export const finish = <O, R>(act: Act, program: Effect.Effect<O, Failure, R>): Effect.Effect<Handled<O>, never, R> =>
  program.pipe(
    Effect.map((output): Handled<O> => ({ operations: act.operations, output })),
    Effect.catchAll((failure) =>
      Effect.succeed<Handled<O>>({
        operations: act.operations,
        stopped: { reason: isRefused(failure) ? "refused" : "failed", message: failure.message }
      }))
  )
