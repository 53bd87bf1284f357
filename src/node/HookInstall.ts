// Where the hook stands on a served repository, and the Fossil commands that change it. Fossil
// keeps hooks as a JSON array in config 'hooks' ([{"cmd", "type", "seq"}]); it is read here
// directly and changed only through `fossil hook add/delete`, so Fossil stays the one writer.

import type BetterSqlite3 from "better-sqlite3"
import { openDatabase } from "../fossil/Sqlite.js"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { runFossil } from "../fossil/Command.js"
import { releasePaths } from "../release/ReleasePaths.js"
import { canonicalRepository, hookLogOf } from "../root/HookFiles.js"

export interface FossilHook {
  /** its index in Fossil's list, as `fossil hook delete N` takes it */
  readonly index: number
  readonly type: string
  readonly command: string
  readonly sequence: number
}

/** The repository's hooks could not be read or changed: the repository, or a Fossil command, says why. */
export class HookError extends Schema.TaggedError<HookError>()("HookError", { message: Schema.String }) {}

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
        return f(db)
      } finally {
        db.close()
      }
    },
    catch: (e) => new HookError({ message: `the repository ${repository} cannot be read: ${e instanceof Error ? e.message : String(e)}` })
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
  /** fast mode's pollers naming this repository, the node's (`ocx2-hook --poll`) and Fossil's own */
  readonly pollers: ReadonlyArray<number>
  /** those of them that are Fossil's own (`fossil backoffice --poll`), whose backoffice refuses people's posts */
  readonly fossilPollers: ReadonlyArray<number>
  readonly mode: "fast" | "default" | "stalled"
  readonly words: string
}

export interface Poller {
  readonly pid: number
  /** node: `ROOT/ocx2-hook --poll REPOSITORY` (src/node/BackofficePoller.ts); fossil: `fossil backoffice ... --poll ... REPOSITORY` */
  readonly kind: "node" | "fossil"
}

/** The processes polling REPOSITORY for fast mode: the node's poller and Fossil's own. */
export const pollersOfKind = (repository: string): ReadonlyArray<Poller> => {
  const wanted = canonicalRepository(repository)
  const found: Array<Poller> = []
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
    const fossils = Path.basename(argv[0] ?? "") === "fossil" && argv.includes("backoffice") && argv.some((a) => a.startsWith("--poll"))
    // ROOT/ocx2-hook is a script: its interpreter comes first (node ROOT/ocx2-hook --poll REPOSITORY)
    const program = argv.findIndex((a) => /^ocx2-hook(\.mjs)?$/.test(Path.basename(a)))
    // (its interpreter, or `/usr/bin/env node` for a moment while the script starts)
    const ours = program >= 0 && program <= 2 && argv[program + 1] === "--poll"
    if (!fossils && !ours) continue
    let cwd = "/"
    try {
      cwd = Fs.readlinkSync(`/proc/${entry}/cwd`)
    } catch {
      // its repository path is then judged as written
    }
    const named = (ours ? argv.slice(program + 2) : argv.slice(1)).filter((a) => !a.startsWith("-"))
    if (named.some((a) => canonicalRepository(Path.resolve(cwd, a)) === wanted) && !forkOfItsParent(entry, argv)) found.push({ pid: Number(entry), kind: ours ? "node" : "fossil" })
  }
  return found
}

/**
 * A poller's child between fork and exec (the node's poller starts `flock ... fossil backoffice`
 * every round) shows its parent's command line for a moment: it is not a second poller.
 */
const forkOfItsParent = (pid: string, argv: ReadonlyArray<string>): boolean => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const ppid = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]
    return Fs.readFileSync(`/proc/${ppid}/cmdline`, "utf8") === `${argv.join("\0")}\0`
  } catch {
    return false
  }
}

/** The pids of fast mode's pollers of REPOSITORY, of either kind. */
export const pollersOf = (repository: string): ReadonlyArray<number> => pollersOfKind(repository).map((p) => p.pid)

export const backofficeOf = (repository: string): Effect.Effect<Backoffice, HookError> =>
  withDb(repository, (db) => {
    const value = (configValue(db, "backoffice-disable") ?? "").trim().toLowerCase()
    return ["1", "on", "yes", "true"].includes(value)
  }).pipe(Effect.map((disabled): Backoffice => {
    const found = pollersOfKind(repository)
    const pollers = found.map((p) => p.pid)
    const fossilPollers = found.filter((p) => p.kind === "fossil").map((p) => p.pid)
    const nodePollers = found.filter((p) => p.kind === "node").map((p) => p.pid)
    if (disabled && pollers.length > 0) {
      const node = nodePollers.length > 0 ? `the node's poller runs (ocx2-hook --poll, pid ${nodePollers.join(", ")})` : undefined
      const fossil = fossilPollers.length > 0
        ? `Fossil's own poller runs (fossil backoffice --poll, pid ${fossilPollers.join(", ")}), whose backoffice runs the hook inside a write ` +
          `transaction that refuses people's web posts now and then ("database is locked"): ocx2 hook --fast replaces it by the node's`
        : undefined
      return {
        disabled, pollers, fossilPollers, mode: "fast",
        words: `fast: backoffice-disable is on and ${[node, fossil].filter((w) => w !== undefined).join("; and ")}: hooks run within about a second of a receipt`
      }
    }
    if (disabled) {
      return {
        disabled, pollers, fossilPollers, mode: "stalled",
        words: "backoffice-disable is on and no poller runs for this repository (ROOT/ocx2-hook --poll REPOSITORY): hooks do not run at all"
      }
    }
    return {
      disabled, pollers, fossilPollers, mode: "default",
      words: "default: Fossil's backoffice runs hooks after a page answered 200, at most once a minute (a receipt within that minute waits for its end); ocx2 hook --fast makes it about a second"
    }
  }))

const fossilUser = () => process.env.USER ?? "root"

const fossil = (args: ReadonlyArray<string>) =>
  Effect.tryPromise({
    try: () => runFossil(args, { user: fossilUser() }),
    catch: (e) => new HookError({ message: `fossil ${args.join(" ")}: ${e instanceof Error ? e.message : String(e)}` })
  }).pipe(Effect.flatMap((r) =>
    r.code === 0 ? Effect.succeed(r.stdout) : Effect.fail(new HookError({ message: `fossil ${args.join(" ")} exited ${String(r.code)}: ${(r.stderr + r.stdout).trim()}` }))))

export const addHook = (repository: string, command: string) =>
  fossil(["hook", "add", "--type", "after-receive", "--command", command, "-R", repository])

export const deleteHook = (repository: string, index: number) => fossil(["hook", "delete", String(index), "-R", repository])

export const setBackofficeDisable = (repository: string) => fossil(["settings", "backoffice-disable", "on", "-R", repository])

/**
 * Starts fast mode's poller, `HOOK --poll REPOSITORY` (HOOK: a root's ocx2-hook), detached, for
 * the service a host should run instead; its pid. It outlives this call, so it is started as that
 * service would be: from `/` (never holding the caller's directory) with a bare environment
 * (nothing of the caller's leaks into the hooks it runs).
 */
export const startPoller = (repository: string, hookProgram: string): Effect.Effect<number, HookError> =>
  Effect.tryPromise({
    try: async () => {
      // with the Node that runs this (a CGI page is given no PATH to find one by the script's #!)
      const child = ChildProcess.spawn(process.execPath, [hookProgram, "--poll", repository], {
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
      let exited: string | undefined
      child.once("exit", (code, signal) => {
        exited = signal ?? String(code)
      })
      const started = await new Promise<number>((resolve, reject) => {
        child.once("error", reject)
        child.once("spawn", () => resolve(child.pid!))
      })
      child.unref()
      // until it polls (its command line is then its own), so that status and hook see it at once
      for (const deadline = Date.now() + 10_000; !pollersOfKind(repository).some((p) => p.pid === started && p.kind === "node");) {
        if (exited !== undefined) throw new Error(`it exited at once (${exited}): does this release's ocx2-hook know --poll?`)
        if (Date.now() > deadline) throw new Error("it did not start polling within 10 s")
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      return started
    },
    catch: (e) => new HookError({ message: `${hookProgram} --poll ${repository} could not start: ${e instanceof Error ? e.message : String(e)}` })
  })

/** Ends a poller (SIGTERM) and waits, up to 5 s, until it is gone, for one of the node's to take its place. */
export const endPoller = (pid: number): Effect.Effect<void, HookError> =>
  Effect.tryPromise({
    try: async () => {
      process.kill(pid, "SIGTERM")
      // gone, or a zombie its parent has not reaped yet (no command line left)
      const gone = () => {
        try {
          return Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8") === ""
        } catch {
          return true
        }
      }
      for (const deadline = Date.now() + 5000; !gone();) {
        if (Date.now() > deadline) throw new Error("it did not end within 5 s of SIGTERM")
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
    },
    catch: (e) => new HookError({ message: `the poller ${pid} could not be ended: ${e instanceof Error ? e.message : String(e)}` })
  })

/** The program a hook command runs: its first word, unquoted as hookCommandOf quotes it. */
export const programOfHook = (command: string): string | undefined => {
  const quoted = /^'((?:[^']|'\\'')*)'(\s|$)/.exec(command)
  if (quoted !== null) return quoted[1]!.replace(/'\\''/g, "'")
  return /^(\S+)/.exec(command)?.[1]
}
