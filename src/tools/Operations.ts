import * as Effect from "effect/Effect"
import type { Operation } from "./Tool.js"

/**
 * Records what a tool does. In a dry run `perform` records the operation as not done and skips
 * it, so a dry run's log is exactly the log the real call would return.
 */
export class OperationsLog {
  private readonly entries: Array<Operation> = []
  constructor(readonly dryRun: boolean) {}

  get operations(): ReadonlyArray<Operation> {
    return this.entries
  }

  /** Note something read or decided, which a dry run does too. */
  note(op: string, detail: string): void {
    this.entries.push({ op, detail, done: true })
  }

  perform<A, E, R>(op: string, detail: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A | undefined, E, R> {
    if (this.dryRun) {
      this.entries.push({ op, detail, done: false })
      return Effect.succeed(undefined)
    }
    return Effect.tap(effect, () => Effect.sync(() => this.entries.push({ op, detail, done: true })))
  }
}
