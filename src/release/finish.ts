import * as Effect from "effect/Effect"
import type {
  CheckoutUnfit,
  NotACheckout,
  ReleaseRootError,
  RootBusy,
  StepFailed
} from "../../services/ReleaseRoot.js"
import type { OperationsLog } from "../tools/Operations.js"
import type { Handled } from "../tools/Tool.js"
import type { Refusal } from "./Served.js"

export type ReleaseFailure = Refusal | RootBusy | NotACheckout | CheckoutUnfit | StepFailed | ReleaseRootError

/**
 * Ends a release tool's call: its output when it ran to the end; otherwise the operations
 * done so far and why it stopped. What the caller can change (no such root, not a checkout,
 * nothing staged, the root busy) is refused; a step or the file system failing is failed.
 */
export const finish = <O, R>(log: OperationsLog, program: Effect.Effect<O, ReleaseFailure, R>): Effect.Effect<Handled<O>, never, R> =>
  program.pipe(
    Effect.map((output): Handled<O> => ({ operations: log.operations, output })),
    Effect.catchAll((failure) =>
      Effect.succeed<Handled<O>>({
        operations: log.operations,
        stopped: {
          reason: failure._tag === "StepFailed" || failure._tag === "ReleaseRootError" ? "failed" : "refused",
          message: failure.message
        }
      }))
  )
