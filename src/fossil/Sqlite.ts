import type BetterSqlite3 from "better-sqlite3"
import { createRequire } from "node:module"
import * as Path from "node:path"

// better-sqlite3 is a native addon: loading it costs start-up time, and a V8 start-up snapshot
// cannot hold it. So it is loaded on the first open, resolved from the running program's place
// (a checkout's dist/, or a release's ROOT/staged/NAME with its node_modules).

let constructor: typeof BetterSqlite3 | undefined

const load = (): typeof BetterSqlite3 => {
  if (constructor !== undefined) return constructor
  const from = process.argv[1] !== undefined ? Path.resolve(process.argv[1]) : Path.join(process.cwd(), "index.js")
  const candidates = [from, Path.join(process.cwd(), "index.js")]
  let lastError: unknown
  for (const base of candidates) {
    try {
      constructor = createRequire(base)("better-sqlite3") as typeof BetterSqlite3
      return constructor
    } catch (e) {
      lastError = e
    }
  }
  // as the module system would: from this file's own place (tests, tools run from source)
  try {
    // (in a CommonJS bundle import.meta is empty: there the program's place above is the answer)
    constructor = createRequire(String(import.meta.url))("better-sqlite3") as typeof BetterSqlite3
    return constructor
  } catch {
    throw lastError
  }
}

/** Loads the addon now (a spare watcher, so the run it takes does not wait for it). */
export const preloadSqlite = (): void => void load()

export const openDatabase = (path: string, options?: BetterSqlite3.Options): BetterSqlite3.Database => new (load())(path, options)
