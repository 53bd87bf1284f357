// import (seed 001, "Import a git repository"): a new repository of a git repository, beside the
// served one, served beside it, its git export seeded with the upstream's own commits, its admin
// the caller, in the served one's login group, hooked as the served one is. What fails leaves
// nothing: every step that made something is undone, the login group first.

import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { Hosts } from "../../../services/Hosts.js"
import { runFossil } from "../../fossil/Command.js"
import { openDatabase } from "../../fossil/Sqlite.js"
import { canonicalRepository } from "../../root/HookFiles.js"
import { readHooks, runsOcx2Hook, backofficeOf, programOfHook, setBackofficeDisable, startPoller } from "../../node/HookInstall.js"
import { CallRefused, finish, type Handled, recording, refuse } from "../../operations/Operations.js"
import type { ToolContext } from "../Tool.js"
import { exportNow } from "../../git/ExportRun.js"
import { ImportFailed, type Imported, importInSandbox } from "../../git/ImportSandbox.js"

const text = (description: string) => Schema.String.annotations({ description })

export const ImportInput = Schema.Struct({
  upstream: text("the git repository: an http, https or git URL, or a directory on the served host"),
  name: text("the new repository's name (letters, digits, ., _ and -): NAME with the served one's extension, beside it"),
  mirrors: Schema.optionalWith(text("where the git export is made, as DIR/NAME (by default beside the served repository's export)"), { exact: true })
})
export type ImportInput = typeof ImportInput.Type

export const ImportOutput = Schema.Struct({
  repository: text("the new repository file"),
  url: Schema.optionalWith(text("where it is served: its email-url, the served one's with NAME as its last part"), { exact: true }),
  trunk: text("the upstream's own branch, which became trunk (and is the export's main branch)"),
  mirror: text("its git export, seeded with the upstream's commits"),
  admin: text("its admin: the caller"),
  loginGroup: text("the login group it joined"),
  hook: text("the hook installed on it, as on the served repository")
})
export type ImportOutput = typeof ImportOutput.Type

/** A name of letters, digits, ., _ and -, that is no hidden file and no option. */
export const checkName = (name: string): string | undefined =>
  /^[A-Za-z0-9_][A-Za-z0-9._-]*$/.test(name) && name.length <= 100
    ? undefined
    : `name ${JSON.stringify(name)} is not a repository name: letters, digits, ., _ and - only, not starting with . or -`

/** An upstream: a URL git fetches over http, https or git, or a git repository in a directory here (resolved). */
export const checkUpstream = (upstream: string): { readonly url: string; readonly local: string | undefined } | string => {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(upstream)) {
    return /^(https?|git):\/\//i.test(upstream) ? { url: upstream, local: undefined } : `upstream ${upstream}: only http, https and git URLs, or a directory on this host`
  }
  if (/^[a-z][a-z0-9+.-]*::/i.test(upstream) || upstream.startsWith("-")) return `upstream ${upstream} is neither a git URL nor a directory`
  if (!Path.isAbsolute(upstream)) return `upstream ${upstream}: a directory must be an absolute path`
  let real: string
  try {
    real = Fs.realpathSync(upstream)
  } catch {
    return `upstream ${upstream} does not exist`
  }
  const isGit = Fs.existsSync(Path.join(real, ".git")) || (Fs.existsSync(Path.join(real, "HEAD")) && Fs.existsSync(Path.join(real, "objects")))
  return isGit ? { url: real, local: real } : `upstream ${real} is not a git repository`
}

const config = (repository: string, names: ReadonlyArray<string>): Map<string, string> => {
  const db = openDatabase(repository, { readonly: true, fileMustExist: true })
  try {
    const rows = db.prepare<[], { name: string; value: unknown }>(
      `SELECT name, value FROM config WHERE name IN (${names.map(() => "?").join(",")}) OR name GLOB 'peer-*'`
    ).all(...(names as Array<string>) as [])
    return new Map(rows.map((r) => [r.name, String(r.value ?? "")]))
  } finally {
    db.close()
  }
}

const fossil = (args: ReadonlyArray<string>, user: string) =>
  Effect.flatMap(Effect.promise(() => runFossil(args, { user })), (r) =>
    r.code === 0 ? Effect.succeed(r.stdout) : Effect.fail(new ImportFailed({ message: `fossil ${args[0]} ${args[1] ?? ""}: ${(r.stderr + r.stdout).trim().split("\n").slice(-3).join("; ")}` })))

const gitIn = (dir: string, args: ReadonlyArray<string>) =>
  Effect.try({
    try: () => {
      const r = ChildProcess.spawnSync("git", [...args], {
        cwd: dir, encoding: "utf8", timeout: 600_000,
        env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: dir, GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_COUNT: "1", GIT_CONFIG_KEY_0: "safe.directory", GIT_CONFIG_VALUE_0: "*" }
      })
      if (r.status !== 0) throw new Error((r.stderr ?? "").trim() || `exited ${r.status}`)
      return r.stdout
    },
    catch: (e) => new ImportFailed({ message: `git ${args[0]}: ${(e as Error).message}` })
  })

/**
 * The git export seeded with the upstream's own commits: the mirror holds the upstream's branches
 * and tags, and Fossil's mirror state maps each imported check-in to the commit it came from, so
 * `fossil git export` writes only what Fossil adds, onto those commits.
 */
const seedMirror = (mirror: string, imported: Imported) =>
  Effect.gen(function*() {
    yield* gitIn(Path.dirname(mirror), ["init", "--quiet", "-b", imported.mainBranch, mirror])
    yield* gitIn(mirror, ["fetch", "--quiet", "--update-head-ok", imported.upstream, "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"])
    const git = new Map(imported.gitMarks.split("\n").filter((l) => l !== "").map((l) => l.split(" ") as [string, string]))
    yield* Effect.try({
      try: () => {
        Fs.mkdirSync(Path.join(mirror, ".mirror_state"))
        const db = openDatabase(Path.join(mirror, ".mirror_state", "db"))
        try {
          // the schema fossil git export makes and reads
          db.exec(`CREATE TABLE mconfig(key TEXT PRIMARY KEY, Value ANY) WITHOUT ROWID;
            CREATE TABLE mmark(id INTEGER PRIMARY KEY, uuid TEXT, isfile BOOLEAN, githash TEXT, UNIQUE(uuid, isfile));
            CREATE INDEX mmarkx1 ON mmark(githash);`)
          db.prepare("INSERT INTO mconfig(key, Value) VALUES('mainbranch', ?)").run(imported.mainBranch)
          const mark = db.prepare("INSERT INTO mmark(id, uuid, isfile, githash) VALUES(?, ?, 0, ?)")
          db.transaction(() => {
            for (const line of imported.fossilMarks.split("\n")) {
              const [kind, id, uuid] = line.split(" ")
              if (kind === undefined || !kind.startsWith("c") || id === undefined || uuid === undefined) continue
              const hash = git.get(id)
              if (hash !== undefined) mark.run(Number(id.slice(1)), uuid, hash)
            }
          })()
        } finally {
          db.close()
        }
      },
      catch: (e) => new ImportFailed({ message: `the git export's mirror state: ${(e as Error).message}` })
    })
  })

/** The served one's email-url with NAME as its last part. */
const urlFor = (servedUrl: string | undefined, name: string): string | undefined => {
  if (servedUrl === undefined || servedUrl === "") return undefined
  try {
    const url = new URL(servedUrl)
    const parts = url.pathname.replace(/\/+$/, "").split("/")
    parts[parts.length - 1] = name
    url.pathname = parts.join("/") || `/${name}`
    return url.toString().replace(/\/$/, "")
  } catch {
    return undefined
  }
}

export const importRepository = (input: ImportInput, context: ToolContext): Effect.Effect<Handled<ImportOutput>, never, Hosts> => {
  const act = recording(context.dryRun)
  // what was made so far, undone in reverse when a later step fails
  const undo: Array<{ readonly what: string; readonly effect: Effect.Effect<unknown, unknown> }> = []
  const program = Effect.gen(function*() {
    // Fossil's settings need a home, and Fossil runs the web pages with none: the account's own
    if (process.env["HOME"] === undefined) process.env["HOME"] = Os.homedir()
    if (context.repository === undefined) return yield* refuse("import makes a repository beside the served one: name it with --repository REPO before the tool's name")
    const caller = context.caller.user
    if (caller === undefined) return yield* refuse("import makes you the new repository's admin, and this call names no user: sign in")
    const served = canonicalRepository(context.repository)
    if (!Fs.existsSync(served)) return yield* refuse(`no repository file ${served}`)
    const wrongName = checkName(input.name)
    if (wrongName !== undefined) return yield* refuse(wrongName)
    const upstream = checkUpstream(input.upstream)
    if (typeof upstream === "string") return yield* refuse(upstream)
    const repository = Path.join(Path.dirname(served), `${input.name}${Path.extname(served)}`)
    if (Fs.existsSync(repository)) return yield* refuse(`${repository} is already there`)
    const settings = config(served, ["email-url", "login-group-name", "last-git-export-repo"])
    const servedExport = settings.get("last-git-export-repo")
    let mirrors: string
    if (input.mirrors !== undefined) {
      if (!Path.isAbsolute(input.mirrors)) return yield* refuse(`mirrors must be an absolute path, not ${input.mirrors}`)
      try {
        mirrors = Fs.realpathSync(input.mirrors)
      } catch {
        return yield* refuse(`mirrors ${input.mirrors} does not exist`)
      }
    } else if (servedExport !== undefined && servedExport !== "") {
      mirrors = Path.dirname(Path.resolve(Path.dirname(served), servedExport))
    } else {
      return yield* refuse(`${served} has no git export to make this one beside: name the directory with --mirrors DIR`)
    }
    const mirror = Path.join(mirrors, input.name)
    if (Fs.existsSync(mirror)) return yield* refuse(`the git export ${mirror} is already there`)
    const hooks = (yield* readHooks(served).pipe(Effect.mapError((e) => new CallRefused({ message: e.message })))).filter((h) => runsOcx2Hook(h.command))
    const group = settings.get("login-group-name")
    const groupName = group !== undefined && group !== "" ? group : Path.parse(served).name
    const url = urlFor(settings.get("email-url"), input.name)
    act.note("upstream", upstream.local !== undefined ? `the directory ${upstream.local}, read-only in the sandbox` : `${upstream.url}, fetched from the sandbox`)

    const work = Path.join(Path.dirname(served), `.${input.name}.ocx2-import.${process.pid}`)
    const imported = yield* act("import", `in a sandbox: git clone --bare ${upstream.url}; git fast-export --all | fossil import --git -A ${caller}, its own branch as trunk`,
      Effect.gen(function*() {
        Fs.mkdirSync(work, { mode: 0o700 })
        undo.push({ what: `remove ${work}`, effect: Effect.sync(() => Fs.rmSync(work, { recursive: true, force: true })) })
        Fs.chmodSync(work, 0o755)
        return yield* importInSandbox({ upstream: upstream.url, localUpstream: upstream.local, admin: caller, work, ownPaths: [served] }).pipe(
          Effect.provide((yield* Hosts).sandbox())
        )
      }))
    yield* act("place", `${repository}, its admin ${caller} (its password random and kept nowhere)`, Effect.try({
      try: () => {
        // a link fails rather than replace one that appeared meanwhile; one name only, as SQLite wants
        Fs.linkSync(imported!.repository, repository)
        undo.push({ what: `remove ${repository}`, effect: Effect.sync(() => Fs.rmSync(repository, { force: true })) })
        Fs.unlinkSync(imported!.repository)
      },
      catch: (e) => new ImportFailed({ message: `${repository}: ${(e as Error).message}` })
    }))
    yield* act("export", `git export in ${mirror}, seeded with the upstream's commits, ${imported?.mainBranch ?? "its own branch"} as trunk`, Effect.gen(function*() {
      Fs.mkdirSync(mirror)
      undo.push({ what: `remove ${mirror}`, effect: Effect.sync(() => Fs.rmSync(mirror, { recursive: true, force: true })) })
      yield* seedMirror(mirror, imported!)
      const result = yield* Effect.promise(() => exportNow(repository, { mirror, waitSeconds: 60, user: caller }))
      if (result._tag !== "Exported") return yield* Effect.fail(new ImportFailed({ message: `the first export into ${mirror}: ${"said" in result ? result.said : result._tag}` }))
    }))
    const hookWords = hooks.length === 0 ? "none: the served repository has no ocx2-hook" : hooks.map((h) => `${h.type}: ${h.command}`).join("; ")
    for (const h of hooks) {
      yield* act("hook", `fossil hook add --type ${h.type} --command "${h.command}" -R ${repository}`, fossil(["hook", "add", "--type", h.type, "--command", h.command, "-R", repository], caller))
    }
    if (hooks.length > 0) {
      const backoffice = yield* backofficeOf(served).pipe(Effect.mapError((e) => new ImportFailed({ message: e.message })))
      if (backoffice.disabled && backoffice.pollers.length > 0) {
        // the node's poller, run by the served repository's ocx2-hook (docs/locks.md: Fossil's own refuses people's posts)
        const program = programOfHook(hooks[0]!.command) ?? "ocx2-hook"
        yield* act("fast", `backoffice-disable on and ${program} --poll ${repository}, as the served repository's`,
          Effect.gen(function*() {
            yield* setBackofficeDisable(repository).pipe(Effect.mapError((e) => new ImportFailed({ message: e.message })))
            const pid = yield* startPoller(repository, program).pipe(Effect.mapError((e) => new ImportFailed({ message: e.message })))
            undo.push({ what: `end the poller ${pid}`, effect: Effect.sync(() => process.kill(pid, "SIGTERM")) })
          }))
      }
    }
    if (url !== undefined) {
      yield* act("email-url", `${url}, the served one's with ${input.name}`, fossil(["sql", "-R", repository, `REPLACE INTO config(name, value, mtime) VALUES('email-url', '${url.replace(/'/g, "''")}', now())`], caller))
    } else {
      act.note("email-url", `the served repository has none: its administrator sets ${repository}'s`)
    }
    // last, so that little can fail after it; undone first
    yield* act("login group", `${repository} joins ${groupName}${group === undefined || group === "" ? ", made of it and the served repository" : ""}`,
      Effect.gen(function*() {
        undo.push({ what: "leave the login group", effect: leaveGroup(repository, served, group === undefined || group === "", caller) })
        yield* fossil(["login-group", "join", "-R", repository, "--name", groupName, served], caller)
      }))
    yield* Effect.sync(() => Fs.rmSync(work, { recursive: true, force: true }))
    return {
      repository, ...(url !== undefined ? { url } : {}), trunk: imported?.mainBranch ?? "the upstream's own branch", mirror, admin: caller,
      loginGroup: groupName, hook: hookWords
    } satisfies ImportOutput
  })
  // undone on any end but success: a refusal, a failure, or a defect (a throw, a promise rejected)
  return finish(act, program.pipe(
    Effect.tapErrorCause(() =>
      Effect.forEach([...undo].reverse(), (step) => step.effect.pipe(Effect.catchAllCause(() => Effect.void)), { discard: true }))
  ))
}

/** Out of the login group, and the served one back as it was when the import made the group. */
export const leaveGroup = (repository: string, served: string, madeGroup: boolean, user: string) =>
  Effect.gen(function*() {
    yield* Effect.promise(() => runFossil(["login-group", "leave", "-R", repository], { user }))
    // Fossil's leave keeps the last member's login-group-code: a group the import made goes whole
    const left = madeGroup
      ? "DELETE FROM config WHERE name IN ('login-group-code', 'login-group-name') OR name GLOB 'peer-*'"
      : `DELETE FROM config WHERE name GLOB 'peer-repo-*' AND value = '${repository.replace(/'/g, "''")}'`
    yield* Effect.promise(() => runFossil(["sql", "-R", served, left], { user }))
  })

