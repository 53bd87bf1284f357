import type BetterSqlite3 from "better-sqlite3"
import { openDatabase } from "../fossil/Sqlite.js"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import { runFossil } from "../fossil/Command.js"
import { releasePaths } from "../release/ReleasePaths.js"
import { canonicalRepository, hookLogOf } from "./HookFiles.js"

// Where the hook stands on a served repository, and the Fossil commands that change it. Fossil
// keeps hooks as a JSON array in config 'hooks' ([{"cmd", "type", "seq"}]); it is read here
// directly and changed only through `fossil hook add/delete`, so Fossil stays the one writer.

export interface FossilHook {
  /** its index in Fossil's list, as `fossil hook delete N` takes it */
  readonly index: number
  readonly type: string
  readonly command: string
  readonly sequence: number
}

export class HookError {
  readonly _tag = "HookError"
  constructor(readonly message: string) {}
}

const quote = (word: string) => (/^[A-Za-z0-9_./=:@%+-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`)

/** The hook this root installs: ROOT/ocx2-hook --log ROOT/node/hook.log %R */
export const hookCommandOf = (root: string): string =>
  `${quote(releasePaths(root).hook)} --log ${quote(hookLogOf(root))} %R`

/** A command that runs ocx2-hook, from any root or release. */
export const runsOcx2Hook = (command: string): boolean => /(^|[\s/'"])ocx2-hook(\.mjs)?(['"]?)(\s|$)/.test(command)

const withDb = <A>(repository: string, f: (db: BetterSqlite3.Database) => A): Effect.Effect<A, HookError> =>
  Effect.try({
    try: () => {
      const db = openDatabase(repository, { readonly: true, fileMustExist: true })
      try {
        db.pragma("busy_timeout = 5000")
        return f(db)
      } finally {
        db.close()
      }
    },
    catch: (e) => new HookError(`the repository ${repository} cannot be read: ${e instanceof Error ? e.message : String(e)}`)
  })

const configValue = (db: BetterSqlite3.Database, name: string): string | undefined => {
  const row = db.prepare<[string], { value: unknown }>("SELECT value FROM config WHERE name = ?").get(name)
  return row === undefined || row.value === null ? undefined : String(row.value)
}

export const readHooks = (repository: string): Effect.Effect<ReadonlyArray<FossilHook>, HookError> =>
  withDb(repository, (db) => {
    const text = configValue(db, "hooks")
    if (text === undefined || text.trim() === "") return []
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      return []
    }
    if (!Array.isArray(parsed)) return []
    return parsed.map((h: { cmd?: unknown; type?: unknown; seq?: unknown }, index) => ({
      index,
      type: String(h?.type ?? ""),
      command: String(h?.cmd ?? ""),
      sequence: Number(h?.seq ?? 10)
    }))
  })

export interface UserRow {
  readonly login: string
  readonly capabilities: string
}

export const readUser = (repository: string, login: string): Effect.Effect<UserRow | undefined, HookError> =>
  withDb(repository, (db) => {
    const row = db.prepare<[string], { login: string; cap: string | null }>("SELECT login, cap FROM user WHERE login = ?").get(login)
    return row === undefined ? undefined : { login: row.login, capabilities: row.cap ?? "" }
  })

/** The server's URL as the repository knows it (its email-url), for the clone step. */
export const repositoryUrl = (repository: string): Effect.Effect<string | undefined, HookError> =>
  withDb(repository, (db) => configValue(db, "email-url"))

/** Fossil's backoffice as it runs this repository's hooks (DECISIONS 6). */
export interface Backoffice {
  /** backoffice-disable is on: no backoffice after web replies */
  readonly disabled: boolean
  /** `fossil backoffice --poll` processes naming this repository */
  readonly pollers: ReadonlyArray<number>
  readonly mode: "fast" | "default" | "stalled"
  readonly words: string
}

/** Processes whose command line is `fossil backoffice ... --poll ... REPOSITORY`. */
export const pollersOf = (repository: string): ReadonlyArray<number> => {
  const wanted = canonicalRepository(repository)
  const pids: Array<number> = []
  let entries: Array<string>
  try {
    entries = Fs.readdirSync("/proc")
  } catch {
    return []
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    let argv: Array<string>
    try {
      argv = Fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").filter((a) => a.length > 0)
    } catch {
      continue
    }
    if (Path.basename(argv[0] ?? "") !== "fossil" || !argv.includes("backoffice") || !argv.some((a) => a.startsWith("--poll"))) continue
    let cwd = "/"
    try {
      cwd = Fs.readlinkSync(`/proc/${entry}/cwd`)
    } catch {
      // its repository path is then judged as written
    }
    if (argv.slice(1).some((a) => !a.startsWith("-") && canonicalRepository(Path.resolve(cwd, a)) === wanted)) pids.push(Number(entry))
  }
  return pids
}

export const backofficeOf = (repository: string): Effect.Effect<Backoffice, HookError> =>
  withDb(repository, (db) => {
    const value = (configValue(db, "backoffice-disable") ?? "").trim().toLowerCase()
    return ["1", "on", "yes", "true"].includes(value)
  }).pipe(Effect.map((disabled): Backoffice => {
    const pollers = pollersOf(repository)
    if (disabled && pollers.length > 0) {
      return { disabled, pollers, mode: "fast", words: `fast: backoffice-disable is on and fossil backoffice --poll runs (pid ${pollers.join(", ")}): hooks run within about a second of a receipt` }
    }
    if (disabled) {
      return { disabled, pollers, mode: "stalled", words: "backoffice-disable is on and no fossil backoffice --poll runs for this repository: hooks do not run at all" }
    }
    return {
      disabled, pollers, mode: "default",
      words: "default: Fossil's backoffice runs hooks after a page answered 200, at most once a minute (a receipt within that minute waits for its end); ocx2 hook --fast makes it about a second"
    }
  }))

const fossilUser = () => process.env.USER ?? "root"

const fossil = (args: ReadonlyArray<string>) =>
  Effect.tryPromise({
    try: () => runFossil(args, { user: fossilUser() }),
    catch: (e) => new HookError(`fossil ${args.join(" ")}: ${e instanceof Error ? e.message : String(e)}`)
  }).pipe(Effect.flatMap((r) =>
    r.code === 0 ? Effect.succeed(r.stdout) : Effect.fail(new HookError(`fossil ${args.join(" ")} exited ${String(r.code)}: ${(r.stderr + r.stdout).trim()}`))))

export const addHook = (repository: string, command: string) =>
  fossil(["hook", "add", "--type", "after-receive", "--command", command, "-R", repository])

export const deleteHook = (repository: string, index: number) => fossil(["hook", "delete", String(index), "-R", repository])

export const setBackofficeDisable = (repository: string) => fossil(["settings", "backoffice-disable", "on", "-R", repository])

/**
 * Starts `fossil backoffice --poll 1 REPOSITORY` detached, for the service a host should run
 * instead; its pid. It outlives this call, so it is started as that service would be: from `/`
 * (never holding the caller's directory) with a bare environment (nothing of the caller's leaks
 * into the hooks it runs).
 */
export const startPoller = (repository: string): Effect.Effect<number, HookError> =>
  Effect.try({
    try: () => {
      const child = ChildProcess.spawn("fossil", ["backoffice", "--poll", "1", repository], {
        cwd: "/",
        detached: true,
        stdio: "ignore",
        env: {
          PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
          HOME: process.env.HOME ?? "/",
          LANG: process.env.LANG ?? "C.UTF-8",
          USER: fossilUser()
        }
      })
      child.unref()
      if (child.pid === undefined) throw new Error("no process")
      return child.pid
    },
    catch: (e) => new HookError(`fossil backoffice --poll 1 ${repository} could not start: ${e instanceof Error ? e.message : String(e)}`)
  })
