import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { runFossil } from "../../src/fossil/Command.js"
import { gitExport } from "../../src/tools/export.js"
import { hook } from "../../src/tools/hook.js"
import { gitImport } from "../../src/tools/import.js"
import { leaveGroup } from "../../src/tools/support/ImportRepository.js"
import type { Answer, Tool } from "../../src/tools/Tool.js"
import { createRepository, fossil, webLogin, type RunningServer } from "../support/fossilServer.js"
import { endWatchers, makeWorld, users, waitFor, type World } from "../support/world.js"
import { git, linkGit } from "./gitWorld.js"

// import against the test world served as a directory of repositories (so a new one is served at
// the served one's URL with its own name), in fast mode, with the release's git program in its
// extension root; real git and a real sandbox. The login-group case joins repositories of its own
// (three, none served): the world serves one.

let world: World | undefined
let dir: string
let repos: string
let served: string
let server: RunningServer
let root: string
const mirrors = () => Path.join(dir, "mirrors")

const call = <O>(tool: Tool<any, any, O>, input: object, o: { readonly as?: string; readonly dryRun?: boolean } = {}): Promise<Answer<O>> => world!.call(tool, input, o)

/** an upstream with three branches (main its own), a merge, a lightweight and an annotated tag */
const makeUpstream = (at: string): string => {
  // each commit a second after the one before, so that the test's world does not depend on the machine's speed
  let second = 1_700_000_000
  const g = (args: ReadonlyArray<string>) => {
    const date = `${second++} +0000`
    return git(["-c", "user.name=Dev", "-c", "user.email=dev@example.com", ...args], { cwd: at, env: { GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date } })
  }
  Fs.mkdirSync(at)
  g(["init", "--quiet", "-b", "main"])
  Fs.writeFileSync(Path.join(at, "f"), "1\n")
  g(["add", "f"]); g(["commit", "--quiet", "-m", "c1"])
  g(["checkout", "--quiet", "-b", "feature"])
  Fs.writeFileSync(Path.join(at, "g"), "2\n")
  g(["add", "g"]); g(["commit", "--quiet", "-m", "c2 on feature"])
  g(["checkout", "--quiet", "main"])
  Fs.appendFileSync(Path.join(at, "f"), "3\n")
  g(["commit", "--quiet", "-am", "c3 on main"])
  g(["merge", "--quiet", "--no-edit", "feature"])
  g(["tag", "v1"]); g(["tag", "-a", "v2", "-m", "annotated"])
  g(["checkout", "--quiet", "-b", "other", "HEAD~1"])
  Fs.writeFileSync(Path.join(at, "o"), "o\n")
  g(["add", "o"]); g(["commit", "--quiet", "-m", "c4 on other"])
  g(["checkout", "--quiet", "main"])
  return at
}

const groupSettings = async (repository: string) =>
  (await fossil(["sql", "-R", repository, "SELECT name || '=' || value FROM config WHERE name GLOB 'login-group-*' OR name GLOB 'peer-*' ORDER BY name"])).trim()

beforeAll(async () => {
  world = await makeWorld({
    prefix: "ocx2-import-", checkin: {}, directory: true, fastHooks: true, release: true,
    extroot: (root, dir) => {
      linkGit(Path.join(dir, "ext"), root)
      return Path.join(dir, "ext")
    }
  })
  ;({ dir, root, repository: served, server } = world)
  repos = Path.dirname(served)
  await fossil(["sql", "-R", served, `REPLACE INTO config(name, value, mtime) VALUES('email-url', '${server.url}served', now())`])
  Fs.mkdirSync(mirrors())
  expect((await call(hook, { root })).stopped).toEqual({ reason: "completed" })
  expect((await call(gitExport, { mirror: Path.join(mirrors(), "served") })).stopped).toEqual({ reason: "completed" })
}, 90_000)

afterAll(async () => {
  await server?.stop()
  // what ran under the world's directory: the hooks' rounds, the imported repositories' backoffices
  if (dir !== undefined) endWatchers(dir)
  await world?.close()
})

describe("import", () => {
  it("refuses a bad name, a repository or export already there, a bad upstream, and a caller without setup", async () => {
    const upstream = makeUpstream(Path.join(dir, "upstream"))
    for (const name of ["../x", ".hidden", "-x", "a b", "a/b", ""]) {
      const r = await call(gitImport, { upstream, name })
      expect(r.stopped.reason, name).toBe("refused")
      expect(r.stopped.message, name).toMatch(/is not a repository name: letters, digits, \., _ and - only/)
    }
    expect((await call(gitImport, { upstream, name: "served" })).stopped.message).toBe(`${served} is already there`)
    Fs.mkdirSync(Path.join(mirrors(), "taken"))
    expect((await call(gitImport, { upstream, name: "taken" })).stopped.message).toBe(`the git export ${Path.join(mirrors(), "taken")} is already there`)
    expect((await call(gitImport, { upstream: "ext::sh -c touch% /tmp/x", name: "y" })).stopped.message).toMatch(/neither a git URL nor a directory/)
    expect((await call(gitImport, { upstream: "file:///etc", name: "y" })).stopped.message).toMatch(/only http, https and git URLs/)
    expect((await call(gitImport, { upstream: dir, name: "y" })).stopped.message).toMatch(/is not a git repository/)
    expect((await call(gitImport, { upstream, name: "y" }, { as: users.builder.login })).stopped.message).toBe("import needs Fossil's setup capability (s)")
    expect(Fs.readdirSync(repos).filter((f) => !f.includes("served.fossil"))).toEqual([])
  }, 120_000)

  it("--dry-run says what it would do and makes nothing", async () => {
    const r = await call(gitImport, { upstream: Path.join(dir, "upstream"), name: "dry" }, { dryRun: true })
    expect(r.stopped).toEqual({ reason: "dry_run" })
    expect(r.operations.filter((o) => !o.done).map((o) => o.op)).toEqual(["import", "place", "export", "hook", "fast", "email-url", "login group"])
    expect(Fs.readdirSync(repos).filter((f) => !f.includes("served.fossil"))).toEqual([])
    expect(Fs.existsSync(Path.join(mirrors(), "dry"))).toBe(false)
  }, 120_000)

  it("a failing import (a bad upstream) leaves no file, no setting and no login-group member", async () => {
    const before = await groupSettings(served)
    const r = await call(gitImport, { upstream: "http://127.0.0.1:9/nothing.git", name: "failed" })
    expect(r.stopped.reason).toBe("failed")
    expect(r.stopped.message).toMatch(/^the import of http:\/\/127\.0\.0\.1:9\/nothing\.git exited \d+: .*(unable to access|Could not connect|Failed to connect)/)
    expect(Fs.readdirSync(repos).filter((f) => !f.includes("served.fossil"))).toEqual([])
    expect(Fs.existsSync(Path.join(mirrors(), "failed"))).toBe(false)
    expect(await groupSettings(served)).toBe(before)
  }, 120_000)

  it.live("an import undone after joining leaves the login group, and a group it made goes whole", () =>
    Effect.gen(function*() {
      const a = yield* Effect.promise(() => createRepository(Path.join(dir, "alone.fossil"), []))
      const b = yield* Effect.promise(() => createRepository(Path.join(dir, "joining.fossil"), []))
      yield* Effect.promise(() => fossil(["login-group", "join", "-R", b, "--name", "alone", a]))
      expect(yield* Effect.promise(() => groupSettings(a))).toContain("login-group-name=alone")
      yield* leaveGroup(b, a, true, "alice")
      expect(yield* Effect.promise(() => groupSettings(a))).toBe("")
      expect(yield* Effect.promise(() => groupSettings(b))).toBe("")
      // a group that was there before stays, without the one that left
      const c = yield* Effect.promise(() => createRepository(Path.join(dir, "third.fossil"), []))
      yield* Effect.promise(() => fossil(["login-group", "join", "-R", b, "--name", "pair", a]))
      yield* Effect.promise(() => fossil(["login-group", "join", "-R", c, a]))
      yield* leaveGroup(c, a, false, "alice")
      expect(yield* Effect.promise(() => groupSettings(a))).toContain("login-group-name=pair")
      expect(yield* Effect.promise(() => groupSettings(a))).not.toContain(c)
      expect(yield* Effect.promise(() => groupSettings(a))).toContain(b)
    }), 120_000)

  it("makes a served repository of the upstream: trunk its own branch, in the login group, its export a fast-forward of its commits", async () => {
    const upstream = Path.join(dir, "upstream")
    const r = await call(gitImport, { upstream, name: "imported" })
    expect(r.stopped, JSON.stringify(r)).toEqual({ reason: "completed" })
    const imported = Path.join(repos, "imported.fossil")
    expect(r.output).toEqual({
      repository: imported, url: `${server.url}imported`, trunk: "main", mirror: Path.join(mirrors(), "imported"), admin: users.admin.login,
      loginGroup: "served", hook: expect.stringContaining("ocx2-hook")
    })
    // nothing of the work left beside it, and no password kept anywhere
    // (a journal of Fossil's backoffice may come and go beside them)
    expect(Fs.readdirSync(repos).filter((f) => !f.startsWith(".") && !/-(journal|wal|shm)$/.test(f)).sort()).toEqual(["imported.fossil", "served.fossil"])
    expect(Fs.readdirSync(repos).filter((f) => f.includes("ocx2-import"))).toEqual([])
    expect(JSON.stringify(r)).not.toMatch(/password is/)

    // trunk is the upstream's main: its tip the merge
    expect(await fossil(["info", "trunk", "-R", imported])).toMatch(/comment:\s+Merge branch 'feature'/)
    // its admin the caller, its one user besides Fossil's own
    expect((await fossil(["user", "capabilities", users.admin.login, "-R", imported])).trim()).toBe("s")
    const branches = (await fossil(["branch", "ls", "-R", imported])).split("\n").map((l) => l.trim()).filter((l) => l !== "").sort()
    expect(branches).toEqual(["feature", "other", "trunk"])
    // each commit on the branch whose first-parent line holds it, and on no other
    const branchOf = async (comment: string) =>
      (await fossil(["sql", "-R", imported, `SELECT group_concat(substr(tag.tagname, 5), ' ') FROM tagxref JOIN tag USING(tagid) JOIN event ON event.objid = tagxref.rid WHERE event.comment GLOB '${comment}*' AND tag.tagname GLOB 'sym-*' AND tagxref.tagtype > 0`])).trim()
    expect(await branchOf("c1")).toBe("'trunk'")
    expect(await branchOf("c3 on main")).toBe("'trunk'")
    expect(await branchOf("c2 on feature")).toBe("'feature'")
    expect(await branchOf("c4 on other")).toBe("'other'")

    // its export holds the upstream's own commits and tags
    const mirror = Path.join(mirrors(), "imported")
    const upstreamHead = git(["rev-parse", "main"], { cwd: upstream }).stdout.trim()
    expect(git(["rev-parse", "refs/heads/main"], { cwd: mirror }).stdout.trim()).toBe(upstreamHead)
    for (const ref of ["feature", "other"]) {
      expect(git(["rev-parse", `refs/heads/${ref}`], { cwd: mirror }).stdout.trim()).toBe(git(["rev-parse", ref], { cwd: upstream }).stdout.trim())
    }
    expect(git(["tag"], { cwd: mirror }).stdout.trim().split("\n")).toEqual(["v1", "v2"])

    // served at the served one's URL with its name, and its email-url says so
    const page = await fetch(`${server.url}imported/timeline`)
    expect(page.status).toBe(200)
    expect(await page.text()).toContain("Merge branch")
    expect((await fossil(["sql", "-R", imported, "SELECT value FROM config WHERE name = 'email-url'"])).trim()).toBe(`'${server.url}imported'`)

    // one login: signed in to the served repository is signed in to the new one
    const alice = await webLogin(`${server.url}served/`, users.admin.login, users.admin.password)
    const there = await fetch(`${server.url}imported/login`, { headers: { Cookie: alice.cookie } })
    expect(await there.text()).toMatch(/logged in as\s*<b>alice<\/b>|logged in as.*alice/i)
    expect(await groupSettings(imported)).toContain(`login-group-name=served`)

    // a check-in on it reaches its export through the hook, as a fast-forward of the upstream's commits
    const checkout = Path.join(dir, "imported-checkout")
    Fs.mkdirSync(checkout)
    for (const args of [["open", imported, "trunk"], ["addremove"], ["commit", "--no-warnings", "-m", "made in Fossil"]]) {
      if (args[0] === "addremove") Fs.writeFileSync(Path.join(checkout, "fossil.txt"), "from fossil\n")
      const ran = await runFossil(args, { user: users.admin.login, cwd: checkout })
      expect(ran.code, `${args.join(" ")}: ${ran.stderr}`).toBe(0)
    }
    const head = await waitFor(() => {
      const subject = git(["log", "-1", "--format=%s", "refs/heads/main"], { cwd: mirror }).stdout.trim()
      return subject === "made in Fossil" ? git(["rev-parse", "refs/heads/main"], { cwd: mirror }).stdout.trim() : undefined
    }, 60_000, 200)
    expect(head, "the new check-in reached the export").toBeDefined()
    expect(git(["rev-parse", `${head}^`], { cwd: mirror }).stdout.trim()).toBe(upstreamHead)
    expect(git(["merge-base", "--is-ancestor", upstreamHead, head!], { cwd: mirror, allowFail: true }).code).toBe(0)
    // the upstream can take it as a fast-forward
    const ff = git(["fetch", mirror, "refs/heads/main:refs/heads/main"], { cwd: upstream, allowFail: true })
    expect(ff.code, ff.stderr).not.toBe(0) // main is checked out there; a bare clone shows it
    const bare = Path.join(dir, "upstream-bare.git")
    git(["clone", "--quiet", "--bare", upstream, bare])
    git(["fetch", "--quiet", mirror, "refs/heads/main:refs/heads/main"], { cwd: bare })
    expect(git(["rev-parse", "refs/heads/main"], { cwd: bare }).stdout.trim()).toBe(head)
  }, 180_000)

  it("imports from a git URL: the served repository's own export, fetched over HTTP from the sandbox", async () => {
    const url = `${server.url}served/ext/git/served.git`
    const elsewhere = Path.join(dir, "elsewhere")
    Fs.mkdirSync(elsewhere)
    const r = await call(gitImport, { upstream: url, name: "fromhttp", mirrors: elsewhere })
    expect(r.stopped, JSON.stringify(r)).toEqual({ reason: "completed" })
    expect(r.operations[0]).toEqual({ op: "upstream", detail: `${url}, fetched from the sandbox`, done: true })
    expect(r.output).toMatchObject({ repository: Path.join(repos, "fromhttp.fossil"), trunk: "master", mirror: Path.join(elsewhere, "fromhttp") })
    const servedMirror = Path.join(mirrors(), "served")
    expect(git(["rev-parse", "refs/heads/master"], { cwd: Path.join(elsewhere, "fromhttp") }).stdout.trim())
      .toBe(git(["rev-parse", "refs/heads/master"], { cwd: servedMirror }).stdout.trim())
    expect(await fossil(["info", "trunk", "-R", Path.join(repos, "fromhttp.fossil")])).toMatch(/comment:\s+initial empty check-in/)
  }, 120_000)
})
