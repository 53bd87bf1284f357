/**
 * A writer that stopped mid-commit leaves its journal hot: SQLite lets only a connection that may
 * write roll it back, and a read-only one fails every read (SQLITE_READONLY_ROLLBACK) until then.
 * Nodes, hooks and pages read the repository read-only, so after a Fossil killed mid-commit
 * (seen in this suite: a test server's backoffice ended by SIGKILL) they read nothing, on a quiet
 * repository for good. Here a real writer is killed with its pages already in the file; readers
 * then roll the file back to its last commit, as Fossil would on its next open, and read on.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import BetterSqlite3 from "better-sqlite3"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as FossilReceipts from "../../layers/FossilReceipts.js"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { Receipts } from "../../services/Receipts.js"
import { Repository } from "../../services/Repository.js"
import { fossil, makeTempDir } from "../../src/demo/LocalServer.js"
import { openDatabase } from "../../src/fossil/Sqlite.js"
import { makeReleaseRoot } from "../support/world.js"

const addonPackage = createRequire(import.meta.url).resolve("better-sqlite3")

let dir: string
let root: string
beforeAll(() => {
  dir = makeTempDir("ocx2-hotjournal-")
  // a release root as accept leaves it, its programs with the caches this checkout's build made
  root = Path.join(dir, "root")
  makeReleaseRoot(root)
})
afterAll(() => {
  if (process.env.OCX2_KEEP_TEST_DIR === undefined) Fs.rmSync(dir, { recursive: true, force: true })
})

const newRepository = async (name: string): Promise<{ readonly file: string; readonly projectCode: string }> => {
  const file = Path.join(dir, name)
  await fossil(["new", file], "root")
  const db = new BetterSqlite3(file, { readonly: true })
  try {
    return { file, projectCode: db.prepare<[], { value: string }>("SELECT value FROM config WHERE name = 'project-code'").get()!.value }
  } finally {
    db.close()
  }
}

/**
 * A writer changes the project code and adds a megabyte of rows in one transaction, with a
 * one-page cache so its changed pages go into the file before any commit, then is killed.
 */
const killWriterMidCommit = async (file: string): Promise<void> => {
  const script = `
    const Database = require(${JSON.stringify(addonPackage)})
    const db = new Database(${JSON.stringify(file)})
    db.pragma("cache_size = 1")
    db.exec("BEGIN IMMEDIATE")
    db.exec("UPDATE config SET value = 'changed' WHERE name = 'project-code'")
    const add = db.prepare("INSERT INTO config VALUES (?, ?, 0)")
    for (let i = 0; i < 200; i++) add.run("uncommitted-" + i, "v".repeat(5000))
    process.stdout.write("written\\n")
    setInterval(() => {}, 1000)`
  const sizeBefore = Fs.statSync(file).size
  const child = ChildProcess.spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] })
  const exited = new Promise((r) => child.once("exit", r))
  await new Promise<void>((resolve, reject) => {
    child.stdout.once("data", () => resolve())
    child.once("exit", (code) => reject(new Error(`the writer exited (${code}) before it wrote`)))
  })
  child.kill("SIGKILL")
  await exited
  // the uncommitted pages are in the file, and only the journal can undo them
  expect(Fs.statSync(file).size).toBeGreaterThan(sizeBefore)
  expect(Fs.statSync(`${file}-journal`).size).toBeGreaterThan(0)
}

/** ROOT/current/ocx2 as a service manager starts it (from /, a bare environment), under `wrapper` */
const shipped = (wrapper: ReadonlyArray<string>, args: ReadonlyArray<string>) => {
  const program = [process.execPath, Path.join(root, "current", "ocx2"), ...args]
  const [command, ...rest] = [...wrapper, ...program]
  return ChildProcess.spawnSync(command!, rest, { cwd: "/", env: { PATH: "/usr/bin:/bin", HOME: dir }, encoding: "utf8" })
}

/** what a read-only connection of SQLite's own makes of the file now */
const plainRead = (file: string): string => {
  const db = new BetterSqlite3(file, { readonly: true })
  try {
    return JSON.stringify(db.prepare("SELECT count(*) AS n FROM config").get())
  } catch (e) {
    return (e as { code?: string }).code ?? String(e)
  } finally {
    db.close()
  }
}

const lastCommit = (file: string, projectCode: string) => {
  const db = new BetterSqlite3(file, { readonly: true })
  try {
    expect(db.prepare("SELECT value FROM config WHERE name = 'project-code'").get()).toEqual({ value: projectCode })
    expect(db.prepare("SELECT count(*) AS n FROM config WHERE name LIKE 'uncommitted-%'").get()).toEqual({ n: 0 })
    expect(db.pragma("integrity_check", { simple: true })).toBe("ok")
  } finally {
    db.close()
  }
}

describe("a journal left hot by a writer killed mid-commit", () => {
  it("fails SQLite's own read-only reads; a reader opened with openDatabase rolls the file back to its last commit and reads", async () => {
    const { file, projectCode } = await newRepository("opened.fossil")
    await killWriterMidCommit(file)
    // the state this is about: without the roll-back, no read-only read succeeds
    expect(plainRead(file)).toBe("SQLITE_READONLY_ROLLBACK")
    const db = openDatabase(file, { readonly: true, fileMustExist: true })
    try {
      expect(db.prepare("SELECT value FROM config WHERE name = 'project-code'").get()).toEqual({ value: projectCode })
    } finally {
      db.close()
    }
    lastCommit(file, projectCode)
    expect(plainRead(file)).not.toBe("SQLITE_READONLY_ROLLBACK")
    // and Fossil reads it as its own
    expect((await fossil(["sql", "-R", file, "SELECT value FROM config WHERE name = 'project-code'"], "root")).trim()).toBe(`'${projectCode}'`)
  })

  it.live("the repository and receipts services, holding their connections across the writer's death, read on", () =>
    Effect.gen(function*() {
      for (const service of ["repository", "receipts"] as const) {
        const { file, projectCode } = yield* Effect.promise(() => newRepository(`held-${service}.fossil`))
        yield* Effect.gen(function*() {
          const repository = yield* Repository
          const receipts = yield* Receipts
          const read = service === "repository"
            ? repository.codes().pipe(Effect.map((c) => c.projectCode))
            : receipts.capabilitiesOf("root")
          // the connection is open (a watcher's, held for its run's life) when the writer dies
          const before = yield* read
          // root, who made the repository, holds every capability
          expect(before).toEqual(service === "repository" ? projectCode : expect.stringMatching(/^[a-zA-Z0-9]{20,}$/))
          yield* Effect.promise(() => killWriterMidCommit(file))
          expect(plainRead(file)).toBe("SQLITE_READONLY_ROLLBACK")
          expect(yield* read).toBe(before)
        }).pipe(Effect.provide(Layer.merge(FossilRepository.layer({ path: file }), FossilReceipts.layer({ path: file }))), Effect.scoped)
        lastCommit(file, projectCode)
      }
    }))

  it("as installed: ROOT/current/ocx2, through its code cache, rolls the file back to its last commit and answers, twice", async () => {
    for (const call of [1, 2]) {
      const { file, projectCode } = await newRepository(`shipped-${call}.fossil`)
      await killWriterMidCommit(file)
      expect(plainRead(file)).toBe("SQLITE_READONLY_ROLLBACK")
      const r = shipped([], ["--json", "--repository", file, "--user", "root", "status"])
      expect(r.status, r.stderr).toBe(0)
      const answer = JSON.parse(r.stdout) as { stopped: { reason: string }; output: { caller: { user: string; capabilities: string } } }
      expect(answer.stopped.reason).toBe("completed")
      expect(answer.output.caller).toEqual({ user: "root", capabilities: expect.stringMatching(/^[a-zA-Z0-9]{20,}$/) })
      lastCommit(file, projectCode)
      // the second call runs through the code cache the build or the first call left
      expect(Fs.existsSync(Path.join(root, "current", "ocx2.cjs.cache"))).toBe(true)
    }
  })

  it("as installed, a reader that may not write the file says what is wrong and what mends it, and leaves the journal", async () => {
    const { file, projectCode } = await newRepository("readonly.fossil")
    await killWriterMidCommit(file)
    // the shipped program in a sandbox where every file is read-only
    const r = shipped(["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--die-with-parent"],
      ["--json", "--repository", file, "--user", "root", "status"])
    expect(r.status, r.stderr).toBe(1)
    const answer = JSON.parse(r.stdout) as { stopped: { reason: string; message: string } }
    expect(answer.stopped.reason).toBe("refused")
    expect(answer.stopped.message).toContain(
      `${file}: a writer stopped mid-commit and left ${file}-journal, which this reader cannot roll back ` +
        `(attempt to write a readonly database); any fossil command that opens the repository does it`
    )
    // nothing was lost: the journal is still there, and a reader that may write mends the file
    expect(Fs.statSync(`${file}-journal`).size).toBeGreaterThan(0)
    expect(plainRead(file)).toBe("SQLITE_READONLY_ROLLBACK")
    openDatabase(file, { readonly: true, fileMustExist: true }).close()
    lastCommit(file, projectCode)
  })
})
