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
import { main } from "../src/adapters/cli/Cli.js"
import { runContainersCommand } from "../src/adapters/cli/ContainersCommand.js"
import { runSuperviseCommand } from "../src/adapters/cli/SuperviseCommand.js"

const isUsageError = (cause: Cause.Cause<unknown>) =>
  Option.exists(Cause.failureOption(cause), ValidationError.isValidationError)

// Exit status: 0 done (a dry run too), 1 refused or failed, 2 bad usage alone; 130 interrupted.
// `ocx2 containers ...` is a client of the tool-container server, not a tool of the repository;
// its help is the registry's, as every command's (src/tools/containers.ts).
// `ocx2 supervise ...` is the node's resident process, not a tool either.
const containersHelp = process.argv.length === 4 && ["--help", "-h"].includes(process.argv[3]!)
if (process.argv[2] === "containers" && !containersHelp) {
  runContainersCommand(process.argv.slice(3)).then(
    (code) => (process.exitCode = code),
    (e: unknown) => {
      process.stderr.write(`ocx2 containers: ${e instanceof Error ? e.message : String(e)}\n`)
      process.exitCode = 1
    }
  )
} else if (process.argv[2] === "supervise" && !(process.argv.length === 4 && ["--help", "-h"].includes(process.argv[3]!))) {
  // the node's resident supervisor: runs until SIGTERM (docs/architecture.md, "The supervisor")
  runSuperviseCommand(process.argv.slice(3)).then(
    (code) => process.exit(code),
    (e: unknown) => {
      process.stderr.write(`ocx2 supervise: ${e instanceof Error ? e.message : String(e)}\n`)
      process.exit(1)
    }
  )
} else main(process.argv).pipe(
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
