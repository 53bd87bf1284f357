// A launch that fails ends its run (DECISIONS 17): every failure between the run's lock and its
// `started` is sorted. A cause that will happen again (an argument the kernel will never pass, a
// program the host cannot execute, a limit the host cannot give) is the run's refusal, answered
// once. A cause that may pass (a full disk, too many processes or open files for the moment, a
// group a killed watcher left, which the launcher mends before each try) is tried again after a
// pause, doubling, a bounded number of times; then the run is refused with the last cause, so no
// run waits for ever and no watcher is started again and again for it.

import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schedule from "effect/Schedule"
import type { LaunchError, LaunchFailed } from "../../services/SandboxLauncher.js"
import { refusal, type Refusal } from "../protocol/Refusals.js"
import { refusalOfUnfit } from "./LaunchPlan.js"

/** Error codes that the same launch meets again, whatever the moment: its run is refused at once. */
const lasting: Readonly<Record<string, string>> = {
  E2BIG: "its command and environment are more than Linux passes to a program",
  ENAMETOOLONG: "a name in it is longer than Linux takes",
  ENOEXEC: "the host cannot execute the sandbox's program",
  ELOOP: "a link in the sandbox's program's path leads round in a circle",
  ENOTDIR: "a part of the sandbox's program's path is not a directory",
  EINVAL: "the system called it invalid"
}

export type LaunchFailureSort =
  | { readonly _tag: "Refuse"; readonly refusal: Refusal }
  | { readonly _tag: "Again"; readonly why: string }

const words = (e: LaunchFailed) => `launch failed at ${e.step}: ${e.reason}`

/** Whether the failure will happen again (the run's refusal) or may pass (tried again). */
export const sortLaunchFailure = (e: LaunchError): LaunchFailureSort => {
  if (e._tag !== "LaunchFailed") return { _tag: "Refuse", refusal: refusalOfUnfit(e) }
  const why = e.code === undefined ? undefined : lasting[e.code]
  if (why === undefined) return { _tag: "Again", why: words(e) }
  // E2BIG: the run's own command and environment are what is too large (refusal 2 names the key)
  return e.code === "E2BIG"
    ? { _tag: "Refuse", refusal: refusal(2, `process.command: ${why} (${words(e)})`) }
    : { _tag: "Refuse", refusal: refusal(6, `the launch: ${why} (${words(e)})`) }
}

/** How often a cause that may pass is tried again, and the first pause (doubling after each try). */
export interface LaunchTries {
  readonly again: number
  readonly firstPauseMs: number
}

/** Six tries over about a minute (2, 4, 8, 16 and 32 s apart): long enough for a moment's shortage to pass. */
export const launchTries: LaunchTries = { again: 5, firstPauseMs: 2000 }

/** The run's refusal once a cause that may pass did not, after every try. */
export const refusalAfterTries = (tries: number, why: string): Refusal =>
  refusal(6, `the launch: failed ${tries} times, the last: ${why}`)

/**
 * Launches with `start`, trying a cause that may pass again (logged each time) after a pause: the
 * launch, or the run's refusal. Nothing is written to the record here: the caller writes started
 * after a launch, or ended refused.
 */
export const launchOrRefuse = <A, R>(
  start: Effect.Effect<A, LaunchError, R>,
  log: (line: string) => Effect.Effect<void>,
  tries: LaunchTries = launchTries
): Effect.Effect<Either.Either<A, Refusal>, never, R> => {
  const attempt = start.pipe(
    Effect.mapError(sortLaunchFailure),
    Effect.tapError((sorted) => sorted._tag === "Again" ? log(`the launch failed and is tried again: ${sorted.why}`) : Effect.void)
  )
  const schedule = Schedule.exponential(tries.firstPauseMs).pipe(Schedule.intersect(Schedule.recurs(tries.again)))
  return attempt.pipe(
    Effect.retry({ schedule, while: (sorted) => sorted._tag === "Again" }),
    Effect.map(Either.right),
    Effect.catchAll((sorted) =>
      Effect.succeed(Either.left(sorted._tag === "Refuse" ? sorted.refusal : refusalAfterTries(tries.again + 1, sorted.why))))
  )
}
