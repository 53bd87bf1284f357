// better-sqlite3 is a native addon: loading it costs start-up time, and a V8 start-up snapshot
// cannot hold it. So it is loaded on the first open, resolved from where the running program
// really is: a checkout's dist/, or a release's ROOT/staged/NAME with its node_modules. A program
// is usually started through a link (Fossil runs ROOT/ocx2-hook, an extension root links to
// ROOT/current/ocx2-cgi, possibly through more links), and Node's argv[1] is that link, not
// followed: so the link is followed first. Then this bundle's own file (a CommonJS bundle's
// __filename, an ES module's URL), which is also where the tests from source find it.

import type BetterSqlite3 from "better-sqlite3"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

let constructor: typeof BetterSqlite3 | undefined
/** the addon's file, found beside the package: named to each open, so `bindings` never searches */
let addon: string | undefined

/** The places to resolve the addon from, nearest to the real program first. */
const bases = (): ReadonlyArray<string> => {
  const found: Array<string> = []
  const program = process.argv[1]
  if (program !== undefined) {
    try {
      found.push(Fs.realpathSync(program))
    } catch {
      found.push(Path.resolve(program))
    }
  }
  // a CommonJS bundle (bin/build.mjs's loader passes the bundle's real path); absent in an ES module
  if (typeof __filename === "string") found.push(__filename)
  // an ES module bundle or the source; empty in a CommonJS bundle, where esbuild leaves import.meta {}
  const url = (import.meta as { url?: string }).url
  if (typeof url === "string" && url.startsWith("file:")) found.push(fileURLToPath(url))
  return found
}

const load = (): typeof BetterSqlite3 => {
  if (constructor !== undefined) return constructor
  const tried: Array<string> = []
  for (const base of bases()) {
    try {
      const require = createRequire(base)
      constructor = require("better-sqlite3") as typeof BetterSqlite3
      addon = builtAddon(require)
      return constructor
    } catch (e) {
      tried.push(`from ${base}: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`)
    }
  }
  throw new Error(`the SQLite addon (better-sqlite3) cannot be loaded: ${tried.join("; ")}`)
}

/**
 * The package finds its addon with `bindings`, which walks a dozen candidate paths and a stack
 * trace on each program's first open (about 5 ms of CPU, on every hook, watcher and page). A
 * package built from source or installed with its prebuilt binary keeps it at one place, and the
 * package loads it from a path it is given (once: Node keeps it). Anywhere else, the package's
 * own search is left to it.
 */
const builtAddon = (require: NodeJS.Require): string | undefined => {
  try {
    const file = Path.join(Path.dirname(require.resolve("better-sqlite3/package.json")), "build", "Release", "better_sqlite3.node")
    return Fs.existsSync(file) ? file : undefined
  } catch {
    return undefined
  }
}

/** Loads the addon now (a spare watcher, so the run it takes does not wait for it). */
export const preloadSqlite = (): void => void load()

/** how long a read waits for a writer's commit, Fossil's own figure */
export const busyTimeoutMs = 15_000

/**
 * Opens a database. A reader waits up to 15 s for a writer's commit, as Fossil itself does:
 * a repository keeps a rollback journal, so a busy node or server holds readers off while it
 * commits, and a read that gave up sooner would fail a person's request or a node's round.
 */
export const openDatabase = (path: string, options?: BetterSqlite3.Options): BetterSqlite3.Database => {
  const Database = load()
  const open = () => new Database(path, { timeout: busyTimeoutMs, ...(addon === undefined ? {} : { nativeBinding: addon }), ...options })
  // without a journal beside the file there is nothing to roll back: one stat, and the open as it was
  if (options?.readonly !== true || !Fs.existsSync(`${path}-journal`)) return open()
  const db = open()
  try {
    db.pragma("schema_version", { simple: true })
    return db
  } catch (e) {
    db.close()
    if (!isHotJournal(e)) throw e
  }
  rollBackHotJournal(path)
  return open()
}

/** a read-only connection met a journal that a writer left when it stopped mid-commit */
export const isHotJournal = (e: unknown): boolean => (e as { code?: unknown } | undefined)?.code === "SQLITE_READONLY_ROLLBACK"

/**
 * A writer that stopped mid-commit (Fossil killed by a service stop, the OOM killer, a power cut)
 * leaves its journal "hot": the next connection that may write rolls the file back to its last
 * commit, as Fossil does on its next open. A read-only connection may not, and every read it makes
 * fails until some writer comes, which on a quiet repository may be never. So a reader that meets
 * one does what Fossil would: opens the file for writing once and reads, which is when SQLite
 * rolls back (under its exclusive lock, and only a journal no live writer holds).
 */
export const rollBackHotJournal = (path: string): void => {
  let db: BetterSqlite3.Database | undefined
  try {
    db = openDatabase(path, { fileMustExist: true })
    db.pragma("schema_version", { simple: true })
  } catch (e) {
    throw new Error(
      `${path}: a writer stopped mid-commit and left ${path}-journal, which this reader cannot roll back ` +
        `(${e instanceof Error ? e.message : String(e)}); any fossil command that opens the repository does it`
    )
  } finally {
    db?.close()
  }
}

/** A read-only connection a service keeps across its reads, opened on the first. */
export interface HeldReader {
  /** reads on the held connection; one a writer's death left facing a hot journal is mended and read again */
  readonly read: <A>(f: (db: BetterSqlite3.Database) => A) => A
  /** the connection, if one is open */
  readonly current: () => BetterSqlite3.Database | undefined
  readonly close: () => void
}

/**
 * A connection held across reads (a watcher holds its repository for the run's life) meets a
 * journal left hot by a writer that died after it was opened: openDatabase's mending at the open
 * cannot see that one, so the read that meets it closes the connection, rolls back, and reads
 * once more on a new one.
 */
export const heldReader = (path: string, open: () => BetterSqlite3.Database): HeldReader => {
  let db: BetterSqlite3.Database | undefined
  const close = () => {
    db?.close()
    db = undefined
  }
  const read = <A>(f: (db: BetterSqlite3.Database) => A): A => {
    try {
      return f((db ??= open()))
    } catch (e) {
      if (!isHotJournal(e)) throw e
      close()
      rollBackHotJournal(path)
      return f((db = open()))
    }
  }
  return { read, current: () => db, close }
}
