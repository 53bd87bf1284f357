import BetterSqlite3 from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { PlannedStep } from "../../src/protocol/Steps.js"
import { checkinOf } from "../../src/watcher/Workspace.js"
import * as FossilCheckouts from "../../layers/FossilCheckouts.js"
import { makeWorld, users, type World } from "../support/world.js"

// A `files` step names a check-in as Fossil's users do; the watcher resolves it with Fossil's own
// resolver in a read-only `fossil sql`, never `fossil whatis`, which ends with PRAGMA optimize and
// so writes statistics into the repository people post to (docs/locks.md): a read that writes.

let world: World | undefined
let repository: string
let trunk: string
beforeAll(async () => {
  // the server's backoffice off: nothing but the test writes into the repository
  world = await makeWorld({ prefix: "ocx2-checkin-name-", users: [users.admin], checkin: { "hello.txt": "hello\n" }, backoffice: false })
  ;({ repository, trunk } = world)
}, 120_000)
afterAll(() => world?.close())

const step = { index: 1, step: "files", keys: {}, sets: [] } as unknown as PlannedStep
const resolve = (name: string) => Effect.either(checkinOf(step, name, repository)).pipe(Effect.provide(FossilCheckouts.layer))

/** the pids of `fossil whatis` on the repository now */
const whatisFossils = (): ReadonlyArray<number> =>
  Fs.readdirSync("/proc").filter((e) => /^\d+$/.test(e)).flatMap((e) => {
    try {
      const argv = Fs.readFileSync(`/proc/${e}/cmdline`, "utf8").split("\0")
      return Path.basename(argv[0] ?? "") === "fossil" && argv.includes("whatis") && argv.includes(repository) ? [Number(e)] : []
    } catch {
      return []
    }
  })

/** asleep in nanosleep or clock_nanosleep: SQLite's busy handler, waiting for a lock */
const asleep = (pid: number) => {
  try {
    return ["35", "230"].includes(Fs.readFileSync(`/proc/${pid}/syscall`, "utf8").split(" ")[0]!)
  } catch {
    return false
  }
}

describe("a files step's check-in name", () => {
  // real processes: the resolver is a `fossil sql`
  it.live("resolves a branch, a full hash and a prefix as Fossil does, and refuses what names no check-in", () =>
    Effect.gen(function*() {
      expect(trunk).toMatch(/^[0-9a-f]{64}$/)
      expect(yield* resolve("trunk")).toEqual(Either.right(trunk))
      expect(yield* resolve(trunk)).toEqual(Either.right(trunk))
      expect(yield* resolve(trunk.slice(0, 10))).toEqual(Either.right(trunk))
      for (const name of ["no-such-branch", "", "trunk' OR 1=1 --", "x'); DROP TABLE blob; --"]) {
        const r = yield* resolve(name)
        expect(Either.isLeft(r) && JSON.stringify(r.left)).toContain("names no check-in")
      }
      expect(yield* resolve("trunk")).toEqual(Either.right(trunk)) // the quotes above reached nothing
    }), 120_000)

  it("takes no write lock: a person's transaction between its read and its write is not refused meanwhile", async () => {
    const person = new BetterSqlite3(repository, { fileMustExist: true })
    person.pragma("busy_timeout = 15000")
    /** the person reads, the command runs meanwhile, then the person writes: "none", or what refused it */
    const meanwhile = async (command: () => Promise<unknown>): Promise<string> => {
      person.exec("BEGIN")
      try {
        person.prepare("SELECT count(*) FROM blob").get()
        const running = command()
        // done, or holding the write lock and waiting for the person's read to end (busy handler;
        // fossil whatis does so where its closing PRAGMA optimize has statistics to write)
        let done = false
        void running.finally(() => {
          done = true
        })
        const deadline = Date.now() + 30_000
        while (!done && !whatisFossils().some(asleep)) {
          if (Date.now() > deadline) throw new Error("the command neither ended nor waited")
          await new Promise((r) => setTimeout(r, 5))
        }
        let refused = "none"
        try {
          person.prepare("INSERT INTO rcvfrom(uid, mtime, nonce, ipaddr) VALUES(1, julianday('now'), NULL, '127.0.0.1')").run()
          person.exec("COMMIT")
        } catch (e) {
          refused = String(e)
          person.exec("ROLLBACK")
        }
        await running
        return refused
      } finally {
        if (person.inTransaction) person.exec("ROLLBACK")
      }
    }
    try {
      const before = Fs.readFileSync(repository).readUInt32BE(24) // SQLite's change counter
      expect(await meanwhile(() => Effect.runPromise(resolve("trunk")))).toBe("none")
      expect(Fs.readFileSync(repository).readUInt32BE(24)).toBe(before + 1) // the person's commit alone
    } finally {
      person.close()
    }
  }, 120_000)
})
