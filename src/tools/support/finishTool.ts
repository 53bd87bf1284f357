import * as Effect from "effect/Effect"
import type { OperationsLog } from "../Operations.js"
import type { Handled } from "../Tool.js"

// How the Fossil tools (create, stop, post, audit, receipt) end a call: the output when they
// ran to the end; otherwise the operations done so far and why they stopped.

/** A refusal decided by a tool's handler: nothing (more) was written, and this says why. */
export class Refused {
  readonly _tag = "Refused"
  constructor(readonly message: string) {}
}

export const refuse = (message: string): Effect.Effect<never, Refused> => Effect.fail(new Refused(message))

/** What the caller can change (a name, an argument, a user, the server's answer) is refused; the rest failed. */
const refusedTags: ReadonlySet<string> = new Set([
  "Refused", "NotFound", "AmbiguousName", "InvalidInput", "PhantomArtifact", "WriteRefused", "InvalidHash"
])

export interface Failure {
  readonly _tag: string
  readonly message: string
}

export const finishTool = <O, R>(log: OperationsLog, program: Effect.Effect<O, Failure, R>): Effect.Effect<Handled<O>, never, R> =>
  program.pipe(
    Effect.map((output): Handled<O> => ({ operations: log.operations, output })),
    Effect.catchAll((failure) =>
      Effect.succeed<Handled<O>>({
        operations: log.operations,
        stopped: { reason: refusedTags.has(failure._tag) ? "refused" : "failed", message: failure.message }
      }))
  )
