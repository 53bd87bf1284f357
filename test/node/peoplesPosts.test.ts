import BetterSqlite3 from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { Repository } from "../../services/Repository.js"
import { hookCursorOf, runBackoffice } from "../../src/node/BackofficePoller.js"
import { fossil, webLogin, webNewThread, webReplyOnce, type RunningServer } from "../support/fossilServer.js"
import { makeWorld, users, type World } from "../support/world.js"

// Issue 13 item 3: a person's post through the web form never fails because the node is writing.
// Fossil's forum page reads in a deferred transaction, then asks for the write lock, which SQLite
// refuses at once ("database is locked") while another process holds it; the node's writes take the
// file's lock whole from their first read (unix-excl), so the person's request waits instead.
// The person posts alone here: two people posting at once can refuse each other, node or not.

let world: World | undefined
let dir: string
let repository: string
let server: RunningServer
/** this file's fossil configuration (FOSSIL_HOME), so a test may hold it without touching the host's */
let home: string
beforeAll(async () => {
  home = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-posts-home-"))
  process.env["FOSSIL_HOME"] = home
  // no backoffice after pages: its lease and hook writes are Fossil's own, and would meet the person here at random
  world = await makeWorld({ prefix: "ocx2-posts-", checkin: {}, backoffice: false })
  ;({ dir, repository, server } = world)
}, 120_000)
afterAll(async () => {
  await world?.close()
  delete process.env["FOSSIL_HOME"]
  if (home !== undefined) Fs.rmSync(home, { recursive: true, force: true })
})

describe("a person's posts while the node writes", () => {
  // real processes and real time: the node's writes and the person's web posts meet in the repository
  it.live("all succeed, none refused with database is locked, during a burst of the node's writes", () =>
    Effect.gen(function*() {
      const person = yield* Effect.promise(() => webLogin(server.url, users.runner.login, users.runner.password))
      const thread = yield* Effect.promise(() => webNewThread(server, person, { title: "a thread", text: "hello" }))
      // until both have done enough to meet often: counts, not a time, so a slow machine only takes longer
      const enough = 25
      const giveUp = Date.now() + 50_000
      let nodeWrites = 0
      let posts = 0
      const going = () => (nodeWrites < enough || posts < enough) && Date.now() < giveUp
      // the node writing replies as the node user, back to back (its writes run one at a time)
      const nodeWriter = (i: number) =>
        Effect.whileLoop({
          while: going,
          body: () => nodeReply(thread, `node ${i} ${nodeWrites}`),
          step: () => {
            nodeWrites++
          }
        })
      const refused: Array<string> = []
      const personPosts = async () => {
        while (going()) {
          const t0 = Date.now()
          const r = await webReplyOnce(server, person, { to: thread, text: `a person's reply ${posts}` })
          posts++
          if (r.hash === undefined) refused.push(`HTTP ${r.status}: ${r.body.replace(/<[^>]*>/g, " ").replace(/\s+/g, " ").replace(/^.*Logout/, "").slice(0, 160)}`)
          await new Promise((resolve) => setTimeout(resolve, Math.max(0, 100 - (Date.now() - t0))))
        }
      }
      yield* Effect.all([nodeWriter(0), Effect.promise(personPosts)], { concurrency: "unbounded" })
      expect(nodeWrites).toBeGreaterThanOrEqual(enough)
      expect(posts).toBeGreaterThanOrEqual(enough)
      expect(refused).toEqual([])
    }), 120_000)
})

const nodeReply = (to: string, text: string) =>
  Effect.flatMap(Repository, (r) => r.reply({ user: users.node.login, to, text })).pipe(
    Effect.provide(FossilRepository.layer({ path: repository })))

/** the pids of the fossil processes on the repository whose arguments hold `word` */
const fossilsDoing = (word: string): ReadonlyArray<number> =>
  Fs.readdirSync("/proc").filter((e) => /^\d+$/.test(e)).flatMap((e) => {
    try {
      const argv = Fs.readFileSync(`/proc/${e}/cmdline`, "utf8").split("\0")
      return Path.basename(argv[0] ?? "") === "fossil" && argv.includes(word) && argv.includes(repository) ? [Number(e)] : []
    } catch {
      return []
    }
  })
/** the node's writes into the repository now */
const nodeFossils = () => fossilsDoing("import")

/** who holds which lock on the repository now (/proc/locks), to say what refused a person */
const lockHolders = (): string => {
  const inode = Fs.statSync(repository).ino
  return Fs.readFileSync("/proc/locks", "utf8").split("\n").filter((l) => l.split(/\s+/)[5]?.endsWith(`:${inode}`)).map((l) => {
    const f = l.trim().split(/\s+/)
    let argv = "?"
    try {
      argv = Fs.readFileSync(`/proc/${f[4]}/cmdline`, "utf8").split("\0").join(" ").slice(0, 80)
    } catch { /* gone */ }
    return `${f[3]} ${f[6]}-${f[7]} by ${f[4]} (${argv})`
  }).join("; ")
}

/** asleep in a system call that sleeps (nanosleep, clock_nanosleep): SQLite's busy handler, waiting for a lock */
const asleep = (pid: number) => {
  try {
    return ["35", "230"].includes(Fs.readFileSync(`/proc/${pid}/syscall`, "utf8").split(" ")[0]!)
  } catch {
    return false
  }
}

const until = async (probe: () => boolean, what: string, ms = 30_000) => {
  const deadline = Date.now() + ms
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`waited ${ms} ms for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** the person's write after its read (content_put's INSERT INTO rcvfrom) and commit: "none", or what refused it */
const personWrites = (person: BetterSqlite3.Database): string => {
  try {
    person.prepare("INSERT INTO rcvfrom(uid, mtime, nonce, ipaddr) VALUES(1, julianday('now'), NULL, '127.0.0.1')").run()
    person.exec("COMMIT")
    return "none"
  } catch (e) {
    const refused = `${String(e)}; locks: ${lockHolders()}`
    person.exec("ROLLBACK")
    return refused
  }
}

describe("a person's transaction the node's write meets half-way (locks, no timing)", () => {
  // real processes: the node's fossil and this test's SQLite connection meet on the repository's locks
  it.live("the node's write waits for it: the person's write after its read is not refused", () =>
    Effect.gen(function*() {
      const thread = yield* Effect.promise(async () =>
        webNewThread(server, await webLogin(server.url, users.runner.login, users.runner.password), { title: "half-way", text: "hello" }))
      // Fossil's forum page: a deferred transaction that reads, then writes (content_put's INSERT INTO rcvfrom)
      const person = new BetterSqlite3(repository, { fileMustExist: true })
      person.pragma("busy_timeout = 15000")
      let nodeDone = false
      yield* Effect.gen(function*() {
        person.exec("BEGIN")
        person.prepare("SELECT count(*) FROM blob").get()
        const write = yield* Effect.fork(nodeReply(thread, "the node writes meanwhile").pipe(Effect.ensuring(Effect.sync(() => {
          nodeDone = true
        }))))
        // the node's fossil has met the person's transaction: it waits for a lock (busy handler)
        yield* Effect.promise(() => until(() => nodeFossils().some(asleep), "the node's fossil to wait for a lock"))
        expect(personWrites(person)).toBe("none")
        expect(nodeDone).toBe(false) // the node waited for the person, not the other way round
        const written = yield* Fiber.join(write)
        expect(written.receipt?.sender).toBe(users.node.login)
      }).pipe(Effect.ensuring(Effect.sync(() => {
        if (person.inTransaction) person.exec("ROLLBACK")
        person.close()
      })))
    }), 120_000)

  it.live("the node's write neither waits for nor holds the host's fossil configuration", () =>
    Effect.gen(function*() {
      const thread = yield* Effect.promise(async () =>
        webNewThread(server, await webLogin(server.url, users.runner.login, users.runner.password), { title: "configuration", text: "hello" }))
      // the configuration every fossil on the host reads (FOSSIL_HOME/.fossil here), held by another
      const config = Path.join(home, ".fossil")
      expect(Fs.existsSync(config)).toBe(true) // made by the fossil commands that made the repository
      const other = new BetterSqlite3(config, { fileMustExist: true })
      yield* Effect.gen(function*() {
        other.exec("BEGIN EXCLUSIVE")
        const written = yield* nodeReply(thread, "written while another holds the configuration")
        expect(written.receipt?.sender).toBe(users.node.login)
      }).pipe(Effect.ensuring(Effect.sync(() => {
        if (other.inTransaction) other.exec("ROLLBACK")
        other.close()
      })))
    }), 120_000)

  it("the backoffice of fast mode's poller runs the hook after the person's write, which is not refused", async () => {
    // Fossil's backoffice runs the after-receive hook and records its cursor inside a write
    // transaction (BEGIN IMMEDIATE); the node's poller runs it exclusively (src/node/BackofficePoller.ts)
    const ran = Path.join(dir, "hook-ran")
    await fossil(["hook", "add", "--type", "after-receive", "--command", `echo ran >> ${ran}`, "-R", repository])
    try {
      await webNewThread(server, await webLogin(server.url, users.runner.login, users.runner.password), { title: "backoffice", text: "hello" })
      const before = hookCursorOf(repository)!
      expect(before.cursor).toBeLessThan(before.newest)
      const person = new BetterSqlite3(repository, { fileMustExist: true })
      person.pragma("busy_timeout = 15000")
      try {
        person.exec("BEGIN")
        person.prepare("SELECT count(*) FROM blob").get()
        let done = false
        const backoffice = runBackoffice(repository).finally(() => {
          done = true
        })
        // the backoffice has met the person's transaction: it waits for a lock (busy handler)
        await until(() => fossilsDoing("backoffice").some(asleep), "the backoffice to wait for a lock")
        expect(personWrites(person)).toBe("none")
        expect(done).toBe(false) // the backoffice waited for the person, not the other way round
        expect(await backoffice).toBe(0)
        // and then ran the hook, its cursor past the person's receipt too
        const after = hookCursorOf(repository)!
        expect(after.cursor).toBe(after.newest)
        expect(after.newest).toBeGreaterThan(before.newest)
        await until(() => Fs.existsSync(ran), "the hook's mark")
      } finally {
        if (person.inTransaction) person.exec("ROLLBACK")
        person.close()
      }
    } finally {
      await fossil(["hook", "delete", "all", "-R", repository]).catch(() => "")
    }
  }, 120_000)
})
