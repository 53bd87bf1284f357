// A process user's turn (one run of the user's in care at a time, 2.13) is passed on by whoever
// sees it free: the watcher whose run is over, a watcher handed a run it did not take, the round
// that writes a run down as waiting, the supervisor. Each looks (is the user held? is a hand-off
// on its way?) and then takes the first waiting run and notes it as handed. Two doing that at once
// would each hand a run, and the later of the two could start first; so the look and the take are
// made holding ~USER.turn, for the few milliseconds they last, and never while a run is handed.

import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import { CareDirectory } from "../../services/CareDirectory.js"
import * as Option from "effect/Option"
import { tryFlock } from "./NativeFlock.js"
import type { WaitingRun } from "./ProcessUserFiles.js"

const turnPath = (careDir: string, user: string) => Path.join(careDir, `~${encodeURIComponent(user)}.turn`)

/** ~USER.turn held, or undefined when it cannot be had in 10 s (then the caller goes on without it). */
const takeTurn = (careDir: string, user: string): number | undefined => {
  let fd: number | undefined
  try {
    fd = Fs.openSync(turnPath(careDir, user), Fs.constants.O_RDWR | Fs.constants.O_CREAT, 0o600)
    if (tryFlock(fd) === "held") return fd
    const r = ChildProcess.spawnSync("flock", ["--exclusive", "--wait", "10", "3"], { stdio: ["ignore", "ignore", "ignore", fd] })
    if (r.status === 0) return fd
  } catch {
    // a care directory gone: nothing waits in it
  }
  if (fd !== undefined) Fs.closeSync(fd)
  return undefined
}

/** `effect` run holding the user's turn; `hold: false` (a dry run) takes nothing (CareDirectory's `withTurn`). */
export const withTurn = <A, E, R>(careDir: string, user: string, effect: Effect.Effect<A, E, R>, hold = true) =>
  Effect.acquireUseRelease(
    Effect.sync(() => (hold ? takeTurn(careDir, user) : undefined)),
    () => effect,
    (fd) => Effect.sync(() => {
      if (fd !== undefined) Fs.closeSync(fd)
    })
  )

/**
 * The first run waiting for the user, taken from ~USER.waiting and noted as handed, when the turn
 * is free to pass: nobody holds the user, no hand-off is on its way, and no watcher still holds
 * that run. `own`: the caller's run, whose own hand-off (if one is noted) ends here. The caller
 * hands the run to a watcher.
 *
 * A waiting run whose lock is held has a watcher still: one that wrote it down (the user held)
 * and has not let the run go yet, or one about to take the user itself. Handed to another watcher
 * now, the run would meet its lock and be dropped ("another watcher holds the run"), its line gone
 * and its hand-off noted, every run after it waiting behind nobody. Its own watcher passes the
 * turn on once it has let the run go (src/watcher/Watcher.ts), or takes the user.
 */
export const passTurn = (user: string, own?: string) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    return yield* care.withTurn(user, Effect.gen(function*() {
      if (own !== undefined) yield* care.clearHanded(user, own)
      const none = { next: undefined as WaitingRun | undefined, dropped: 0 }
      if (yield* care.userBusy(user)) return none
      if (Option.isSome(yield* care.handedLately(user))) return none
      const first = (yield* care.waiting(user))[0]
      if (first !== undefined && (yield* care.probe(first.run).pipe(Effect.orElseSucceed(() => "absent" as const))) === "alive") return none
      // a file that cannot be taken is a defect here, as it always was: the callers log the cause
      const taken = yield* care.takeNextWaiting(user).pipe(Effect.orDie)
      if (taken.next !== undefined) yield* care.markHanded(user, taken.next.run)
      return taken
    }))
  })
