// A watcher's garbage, collected while it waits. A session's watcher lives as long as its session
// and is idle nearly all that time: V8 collects its old generation only when that generation has
// grown to a limit it raises as it goes, so what the start and each burst of deliveries left stayed
// resident (bench/sessions, issue 42: a watcher of a thread of 5,000 posts held 8 MB more than one
// of 100, most of it garbage). The Node the watcher runs on is started without --expose-gc (V8 stamps
// a code cache with its flags), so the collector is reached for the moment it is called.

import * as Effect from "effect/Effect"
import * as V8 from "node:v8"
import * as Vm from "node:vm"

/** A full collection now; the flag that exposes it is set back at once. */
export const collectGarbage = (): void => {
  try {
    V8.setFlagsFromString("--expose-gc")
    ;(Vm.runInNewContext("gc") as () => void)()
  } catch {
    // V8 collects when it must
  } finally {
    V8.setFlagsFromString("--no-expose-gc")
  }
}

/**
 * Two full collections that flush the bytecode of every function not run since the first: the
 * whole code cache gave every function of the watcher its bytecode, and most run once. V8 flushes
 * bytecode unused over --bytecode-old-age collections (5); 1 is set for these two alone, so that a
 * spare's collection after its rehearsal keeps what the run it takes will call, and set back
 * before anything else runs (a code cache is stamped with the flags of the process writing it).
 */
const collectFlushingBytecode = (): void => {
  V8.setFlagsFromString("--bytecode-old-age=1")
  try {
    collectGarbage()
    collectGarbage()
  } finally {
    V8.setFlagsFromString("--bytecode-old-age=5")
  }
}

/** How much V8's heap may grow past what the last collection left before it is collected again. */
const grownBytes = 2 * 1024 * 1024

/**
 * Looks every `every` at V8's heap, and collects once it has grown `grownBytes` past what the last
 * collection left: once after the start, then after bursts of work, never while nothing happens.
 * Forever: its caller's scope ends it.
 */
export const collectWhenGrown = (every: `${number} seconds`) =>
  Effect.gen(function*() {
    let left = 0
    for (;;) {
      yield* Effect.sleep(every)
      if (V8.getHeapStatistics().used_heap_size - left < grownBytes) continue
      collectFlushingBytecode()
      left = V8.getHeapStatistics().used_heap_size
    }
  })
