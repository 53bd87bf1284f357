import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as ChildProcess from "node:child_process"
import { exportLockOf, exportStateFileOf } from "../../src/git/ExportFiles.js"
import { exportDetached } from "../../src/git/ExportHook.js"
import { openDatabase } from "../../src/fossil/Sqlite.js"
import { lastHookLogEntry, type HookLogEntry } from "../../src/root/HookFiles.js"
import { runFossil } from "../../src/fossil/Command.js"
import { gitExport } from "../../src/tools/export.js"
import { hook } from "../../src/tools/hook.js"
import { cloneAs, webLogin, webNewThread, webNewTicket } from "../support/fossilServer.js"
import { users } from "../support/nodeWorld.js"
import { closeHookWorld, waitFor } from "../node/hookWorld.js"
import { git, makeGitWorld, type GitWorld } from "./gitWorld.js"

// export and the hook keeping the export current, against a real fossil server in fast mode
// (the backoffice polls every second) and real git.

let world: GitWorld
beforeAll(async () => {
  world = await makeGitWorld()
}, 120_000)
afterAll(() => closeHookWorld(world))

const head = (): string => git(["rev-parse", "refs/heads/master"], { cwd: world.mirror }).stdout.trim()
const headComment = (): string => git(["log", "-1", "--format=%s", "refs/heads/master"], { cwd: world.mirror }).stdout.trim()
const state = (): string => Fs.readFileSync(exportStateFileOf(Fs.realpathSync(world.repository)), "utf8")
const checkout = () => Path.join(world.dir, "checkout")

/** Waits (SQLite's busy wait, up to 15 s) until no one else holds the file's write lock, and takes none. */
const untilWritable = (file: string) => {
  const db = openDatabase(file, { fileMustExist: true })
  try {
    db.exec("BEGIN IMMEDIATE")
    db.exec("ROLLBACK")
  } finally {
    db.close()
  }
}

/**
 * A check-in on the served file itself, as a person makes one beside the server. Other writers
 * share the file (the server's backoffice, the hook's export), and a commit that read before one
 * of them took it is refused at once with "database is locked", since SQLite does not wait where
 * waiting could deadlock (seen once in CI, on the third check-in). As a person would, it is made
 * again once the file can be written, at most five times.
 */
const commitHere = async (file: string, comment: string) => {
  Fs.writeFileSync(Path.join(checkout(), file), `${comment}\n`)
  for (const args of [["addremove"], ["commit", "--no-warnings", "-m", comment]]) {
    for (let attempt = 1; ; attempt++) {
      const r = await runFossil(args, { user: "alice", cwd: checkout() })
      if (r.code === 0) break
      if (attempt === 5 || !`${r.stderr}${r.stdout}`.includes("database is locked")) {
        throw new Error(`fossil ${args.join(" ")} (attempt ${attempt}): ${r.stderr}${r.stdout}`)
      }
      untilWritable(world.repository)
    }
  }
}

const hookLog = () => Path.join(world.root, "node", "hook.log")
const hookEntries = (): ReadonlyArray<HookLogEntry> =>
  Fs.existsSync(hookLog()) ? Fs.readFileSync(hookLog(), "utf8").trim().split("\n").map((l) => JSON.parse(l) as HookLogEntry) : []

describe("export", () => {
  it("is refused to a user without setup, and until a first export names its directory", async () => {
    const refused = await world.call(gitExport, {}, { as: users.builder.login })
    expect(refused.stopped).toEqual({ reason: "refused", message: "export needs Fossil's setup capability (s)" })
    const none = await world.call(gitExport, {}, { dryRun: true })
    expect(none.stopped.reason).toBe("refused")
    expect(none.stopped.message).toMatch(/no git export yet: give the directory for the first one with --mirror DIR/)
    const relative = await world.call(gitExport, { mirror: "mirror" })
    expect(relative.stopped.message).toBe("mirror must be an absolute path, not mirror")
    const notEmpty = await world.call(gitExport, { mirror: checkout() })
    expect(notEmpty.stopped.message).toMatch(/is neither empty nor a git export/)
    expect(Fs.existsSync(Path.join(checkout(), ".git"))).toBe(false)
  }, 120_000)

  it("makes the first export into --mirror DIR, where fossil git export then keeps it", async () => {
    const made = await world.call(gitExport, { mirror: world.mirror })
    expect(made.stopped, JSON.stringify(made)).toEqual({ reason: "completed" })
    expect(made.output).toMatchObject({ mirror: world.mirror, autopush: "off" })
    expect((made.output as { exported: string }).exported).toMatch(/2 check-ins added/)
    expect(headComment()).toBe("the first check-in")
    const setting = await runFossil(["sql", "-R", world.repository, "SELECT value FROM config WHERE name = 'last-git-export-repo'"], { user: "alice" })
    expect(setting.stdout.trim()).toBe(`'${world.mirror}'`)
  }, 120_000)

  it("--dry-run says what awaits and changes nothing; the export then brings it", async () => {
    // a check-in on the served file itself, before the hook is installed
    await commitHere("second.txt", "the second check-in")
    const before = { head: head(), state: state() }
    const dry = await world.call(gitExport, {}, { dryRun: true })
    expect(dry.stopped).toEqual({ reason: "dry_run" })
    expect(dry.operations).toEqual([
      { op: "awaits", detail: `1 check-in awaiting export, in ${world.mirror}`, done: true },
      { op: "autopush", detail: "off", done: true },
      { op: "export", detail: expect.stringMatching(/^fossil git export -R .*served\.fossil, holding served\.fossil's export lock$/), done: false }
    ])
    expect(dry.output).toMatchObject({ awaits: "1 check-in awaiting export", autopush: "off", lastExport: expect.anything() })
    expect({ head: head(), state: state() }).toEqual(before)

    const done = await world.call(gitExport, {})
    expect(done.stopped).toEqual({ reason: "completed" })
    expect((done.output as { exported: string }).exported).toMatch(/1 check-ins added/)
    expect(headComment()).toBe("the second check-in")
    const again = await world.call(gitExport, {})
    expect(again.output).toMatchObject({ awaits: "up-to-date", exported: "no changes" })
  }, 120_000)

  it("a failing export is refused with what Fossil said, kept as the last failure, and says so in the dry run", async () => {
    const gitDir = Path.join(world.mirror, ".git")
    const aside = Path.join(world.dir, "git-aside")
    await commitHere("third.txt", "the third check-in")
    Fs.renameSync(gitDir, aside)
    Fs.writeFileSync(gitDir, "not a git directory\n")
    try {
      const failed = await world.call(gitExport, {})
      expect(failed.stopped.reason).toBe("refused")
      expect(failed.stopped.message).toMatch(new RegExp(`^fossil git export into ${world.mirror} failed: .+`))
      const dry = await world.call(gitExport, {}, { dryRun: true })
      const lastFailure = dry.operations.find((o) => o.op === "last failure")
      expect(lastFailure?.detail).toContain(failed.stopped.message!.replace(/^fossil git export into \S+ failed: /, ""))
      expect(dry.output).toMatchObject({ lastFailure: { said: expect.any(String) } })
    } finally {
      Fs.rmSync(gitDir)
      Fs.renameSync(aside, gitDir)
    }
    const recovered = await world.call(gitExport, {})
    expect(recovered.stopped).toEqual({ reason: "completed" })
    expect(headComment()).toBe("the third check-in")
  }, 120_000)

  it("--autopush pushes each export to a git remote from then on, and the dry run says where", async () => {
    const bare = Path.join(world.dir, "pushed.git")
    git(["init", "--quiet", "--bare", bare])
    const wrong = await world.call(gitExport, { autopush: "ext::sh -c true" })
    expect(wrong.stopped.message).toMatch(/^autopush ext::sh -c true is not a git remote/)
    const set = await world.call(gitExport, { autopush: bare })
    expect(set.stopped, JSON.stringify(set)).toEqual({ reason: "completed" })
    expect(git(["rev-parse", "refs/heads/master"], { cwd: bare }).stdout.trim()).toBe(head())
    await commitHere("fourth.txt", "the fourth check-in")
    const dry = await world.call(gitExport, {}, { dryRun: true })
    expect(dry.operations.slice(0, 2)).toEqual([
      { op: "awaits", detail: `1 check-in awaiting export, in ${world.mirror}`, done: true },
      { op: "autopush", detail: bare, done: true }
    ])
    expect((await world.call(gitExport, {})).stopped).toEqual({ reason: "completed" })
    expect(headComment()).toBe("the fourth check-in")
    expect(git(["log", "-1", "--format=%s", "refs/heads/master"], { cwd: bare }).stdout.trim()).toBe("the fourth check-in")
  }, 120_000)
})

describe("the hook keeps the export current", () => {
  it("exports a check-in pushed to Fossil, detached, after the hook's receipt", async () => {
    const installed = await world.call(hook, { root: world.root })
    expect(installed.stopped).toEqual({ reason: "completed" })
    const clone = await cloneAs(world.server.url, users.admin.login, users.admin.password, Path.join(world.dir, "alice.fossil"))
    const mine = Path.join(world.dir, "alice-checkout")
    Fs.mkdirSync(mine)
    const opened = await runFossil(["open", clone], { user: "alice", cwd: mine })
    expect(opened.code, opened.stderr).toBe(0)
    await world.commitAndPush(mine, "pushed.txt", "pushed\n", "a check-in pushed to the server")
    const exported = await waitFor(() => (headComment() === "a check-in pushed to the server" ? true : undefined), 60_000)
    expect(exported, `the export's head is still: ${headComment()}; hook log: ${JSON.stringify(hookEntries())}`).toBe(true)
    const entry = hookEntries().find((e) => e.did.some((d) => d.startsWith("a check-in arrived after the git export")))
    expect(entry?.did[0]).toMatch(/^a check-in arrived after the git export \(rid \d+\): exporting to .*mirror, detached \(pid \d+\)$/)
  }, 90_000)

  it("a post, a ticket change or a tag alone exports nothing", async () => {
    // the exporter of the check-in before writes its state after the export: let it finish
    const lock = exportLockOf(Fs.realpathSync(world.repository))
    await waitFor(() => (ChildProcess.spawnSync("flock", ["--nonblock", lock, "true"]).status === 0 ? true : undefined), 30_000, 20)
    const before = state()
    const alice = await webLogin(world.server.url, users.admin.login, users.admin.password)
    const post = await webNewThread(world.server, alice, { title: "just talk", text: "no code here" })
    const entry = await waitFor(() => hookEntries().find((e) => e.given.includes(post)), 60_000)
    expect(entry, "the hook ran for the post").toBeDefined()
    expect(entry!.did.some((d) => /git export/.test(d))).toBe(false)
    const ticket = await webNewTicket(alice, { title: "a ticket", icomment: "no code either" })
    expect(ticket).toMatch(/^[0-9a-f]+$/)
    // a tag on trunk, pushed from a clone
    const clone = Path.join(world.dir, "alice.fossil")
    const tagged = await runFossil(["tag", "add", "--raw", "reviewed", "trunk", "-R", clone], { user: "alice" })
    expect(tagged.code, tagged.stderr).toBe(0)
    const pushed = await runFossil(["push", "-R", clone], { user: "alice" })
    expect(pushed.code, pushed.stderr).toBe(0)
    // the tag's control artifact, as the hook is given it
    const tagHash = /([0-9a-f]{64})/.exec((await runFossil(["sql", "-R", clone,
      "SELECT uuid FROM blob WHERE rid = (SELECT max(srcid) FROM tagxref WHERE tagid = (SELECT tagid FROM tag WHERE tagname = 'reviewed'))"], { user: "alice" })).stdout)?.[1]
    expect(tagHash).toBeDefined()
    const tagEntry = await waitFor(() => hookEntries().find((e) => e.given.includes(tagHash!)), 60_000)
    expect(tagEntry, "the hook ran for the tag").toBeDefined()
    const after = hookEntries().filter((e) => e.at > entry!.at)
    expect(after.flatMap((e) => e.did).filter((d) => /git export/.test(d))).toEqual([])
    expect(state()).toBe(before)
    expect(lastHookLogEntry(hookLog())).toBeDefined()
  }, 90_000)

  it("a burst of exporters: while one exports, one waits and the rest end at once", async () => {
    const served = Fs.realpathSync(world.repository)
    // an export running: its lock held by this process's open file, released when it is closed
    const held = Fs.openSync(exportLockOf(served), "a")
    expect(ChildProcess.spawnSync("flock", ["--exclusive", "--nonblock", "3"], { stdio: ["ignore", "ignore", "ignore", held] }).status).toBe(0)
    const burst = [1, 2, 3, 4].map(() => exportDetached(served))
    try {
      const early = await waitFor(async () => {
        const settled = await Promise.all(burst.map((p) => Promise.race([p, new Promise<"pending">((r) => setTimeout(() => r("pending"), 10))])))
        return settled.filter((r) => r === "pending").length === 1 ? settled : undefined
      }, 30_000, 50)
      expect(early?.filter((r) => r !== "pending").map((r) => (r as { _tag: string })._tag)).toEqual(["Queued", "Queued", "Queued"])
    } finally {
      Fs.closeSync(held)
    }
    // the one that waited exports once the lock is free (nothing new here: current)
    expect((await Promise.all(burst)).map((r) => r._tag).sort()).toEqual(["Current", "Queued", "Queued", "Queued"])
  }, 120_000)
})
