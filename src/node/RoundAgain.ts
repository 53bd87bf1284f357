// A round tried again while work waits (issue 37, item 6). A round that failed (ENOSPC, a
// repository it could not read) or held its runs back for want of room on ROOT (DiskRoom.ts) left
// its cursor before them; nothing else would read them again before the next receipt, which may
// never come. So while the hook's cheap question still finds a message after the cursor, the
// round is tried again: at once when ROOT has room again (looked at each second with one statfs,
// running no round while it is short), else after 1 s, 2 s, 4 s ... up to 30 s. The supervisor
// keeps one of these; a node without one has the hook's retrier (`ocx2-hook --again`, HookFast.ts).
// Plain timers, no Effect: the hook's bundle runs it.

/** How often it looks whether work still waits and whether ROOT has room. */
export const lookEveryMs = 1000
export const firstAgainMs = 1000
export const mostAgainMs = 30_000

export interface AgainPlan {
  /** whether a message the round acts on is still after the node's cursor */
  readonly waits: () => boolean
  /** whether ROOT is short of room: a round would start nothing, so none is run for it */
  readonly short: () => boolean
  /** runs a round; roundDone() is called when it is over */
  readonly run: () => void
  /** nothing waits any more */
  readonly idle?: () => void
}

export class RoundsAgain {
  private timer: NodeJS.Timeout | undefined
  private tries = 0
  private dueAt = 0
  private wasShort = false
  private stopped = false

  constructor(private readonly plan: AgainPlan, private readonly everyMs = lookEveryMs) {}

  /** After every round, however it went: the next try is set while work waits. */
  roundDone(): void {
    if (this.stopped) return
    if (!this.asked(this.plan.waits, true)) return this.settle()
    this.dueAt = Date.now() + Math.min(firstAgainMs * 2 ** this.tries, mostAgainMs)
    this.tries++
    this.arm()
  }

  stop(): void {
    this.stopped = true
    this.disarm()
  }

  /** a question that throws (the repository locked a moment) is given `onError`'s answer */
  private asked(question: () => boolean, onError: boolean): boolean {
    try {
      return question()
    } catch {
      return onError
    }
  }

  private disarm(): void {
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
  }

  private settle(): void {
    this.tries = 0
    this.wasShort = false
    this.disarm()
    this.plan.idle?.()
  }

  private arm(): void {
    if (this.timer !== undefined || this.stopped) return
    this.timer = setTimeout(() => this.look(), this.everyMs)
  }

  private look(): void {
    this.timer = undefined
    if (this.stopped) return
    if (!this.asked(this.plan.waits, true)) return this.settle()
    if (this.asked(this.plan.short, false)) {
      this.wasShort = true
      return this.arm()
    }
    // room came back: the runs held back are started now, not after the backoff
    if (this.wasShort || Date.now() >= this.dueAt) {
      this.wasShort = false
      this.plan.run()
      return
    }
    this.arm()
  }
}
