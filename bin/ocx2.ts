import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeTerminal from "@effect/platform-node/NodeTerminal"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { main } from "../src/cli/Cli.js"

const isUsageError = (cause: Cause.Cause<unknown>) =>
  Option.exists(Cause.failureOption(cause), ValidationError.isValidationError)

// Exit status: 0 done (a dry run too), 1 failed, 2 refused or bad usage; 130 interrupted.
main(process.argv).pipe(
  // @effect/cli has already printed usage errors; anything else is reported once here
  Effect.tapErrorCause((cause) => (Cause.isInterruptedOnly(cause) || isUsageError(cause) ? Effect.void : Effect.logError(cause))),
  // what @effect/cli needs, and no more: the whole NodeContext costs start-up time
  Effect.provide(Layer.mergeAll(NodeFileSystem.layer, NodePath.layer, NodeTerminal.layer)),
  NodeRuntime.runMain({
    disableErrorReporting: true,
    // the default teardown exits 0 on SIGINT/SIGTERM; an interrupted call did not succeed
    teardown: (exit, onExit) =>
      onExit(
        Exit.isSuccess(exit) ? (typeof process.exitCode === "number" ? process.exitCode : 0)
        : Cause.isInterruptedOnly(exit.cause) ? 130
        : isUsageError(exit.cause) ? 2
        : 1
      )
  })
)
