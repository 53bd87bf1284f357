/**
 * A process user's turn passed on (src/care/UserTurn.ts, passTurn), decided against an in-memory
 * care directory: the first waiting run in the server's order is taken and noted as handed only
 * when nobody holds the user, no hand-off is on its way, and no watcher still holds that run. The
 * same turn passed among real watchers, under ~USER.turn, is test/node/userTurn.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as MemoryCareDirectory from "../../layers/MemoryCareDirectory.js"
import { CareDirectory } from "../../services/CareDirectory.js"
import { passTurn } from "../../src/care/UserTurn.js"

const user = "builder"

/** a care directory where run-b (later in the server's order) was written down before run-a */
const withQueue = () => {
  const memory = MemoryCareDirectory.make()
  const setUp = Effect.gen(function*() {
    const care = yield* CareDirectory
    yield* care.addWaiting(user, { run: "run-b", at: [20, 7] })
    yield* care.addWaiting(user, { run: "run-a", at: [10, 3], personStart: true })
  })
  const run = <A, E>(effect: Effect.Effect<A, E, CareDirectory>) =>
    Effect.zipRight(setUp, effect).pipe(Effect.provide(MemoryCareDirectory.layer(memory)))
  return { memory, run }
}

const queue = Effect.gen(function*() {
  const care = yield* CareDirectory
  return {
    waiting: (yield* care.waiting(user)).map((w) => w.run),
    handed: Option.getOrUndefined(yield* care.handedLately(user))
  }
})

describe("passing a process user's turn on", () => {
  it.effect("a free user: the first waiting run in the server's order is taken and noted as handed; the rest wait", () => {
    const { run } = withQueue()
    return run(Effect.gen(function*() {
      const { next, dropped } = yield* passTurn(user)
      expect(next).toEqual({ run: "run-a", at: [10, 3], personStart: true })
      expect(dropped).toBe(0)
      expect(yield* queue).toEqual({ waiting: ["run-b"], handed: "run-a" })
    }))
  })

  it.effect("a user another run holds: nothing is taken", () => {
    const { memory, run } = withQueue()
    memory.holdUser(user)
    return run(Effect.gen(function*() {
      expect((yield* passTurn(user)).next).toBeUndefined()
      expect(yield* queue).toEqual({ waiting: ["run-a", "run-b"], handed: undefined })
    }))
  })

  it.effect("a hand-off on its way: nothing is taken until it arrives or comes to nothing", () => {
    const { memory, run } = withQueue()
    memory.setNow(1_000_000)
    return run(Effect.gen(function*() {
      const care = yield* CareDirectory
      yield* care.markHanded(user, "run-x")
      expect((yield* passTurn(user)).next).toBeUndefined()
      // a hand-off noted longer ago than a watcher takes to start no longer counts
      memory.setNow(1_000_000 + 60_000)
      expect((yield* passTurn(user)).next?.run).toBe("run-a")
    }))
  })

  it.effect("the caller's own hand-off ends as it passes the turn: the next run is taken", () => {
    const { run } = withQueue()
    return run(Effect.gen(function*() {
      const care = yield* CareDirectory
      yield* care.markHanded(user, "run-own")
      expect((yield* passTurn(user, "run-own")).next?.run).toBe("run-a")
      expect((yield* queue).handed).toBe("run-a")
    }))
  })

  it.effect("another's hand-off is not ended by a caller naming its own run", () => {
    const { run } = withQueue()
    return run(Effect.gen(function*() {
      const care = yield* CareDirectory
      yield* care.markHanded(user, "run-other")
      expect((yield* passTurn(user, "run-own")).next).toBeUndefined()
      expect((yield* queue).handed).toBe("run-other")
    }))
  })

  it.effect("a first waiting run whose watcher still holds it is not handed to another watcher", () => {
    const { memory, run } = withQueue()
    memory.holdRun("run-a", 4242)
    return run(Effect.gen(function*() {
      expect((yield* passTurn(user)).next).toBeUndefined()
      expect(yield* queue).toEqual({ waiting: ["run-a", "run-b"], handed: undefined })
      // its watcher gone (the lock left free), the run is handed on
      memory.leaveRun("run-a")
      expect((yield* passTurn(user)).next?.run).toBe("run-a")
    }))
  })
})
