import BetterSqlite3 from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { PlannedStep } from "../../src/protocol/Steps.js"
import { runFossil } from "../../src/fossil/Command.js"
import { checkinOf } from "../../src/watcher/Workspace.js"
import * as FossilCheckouts from "../../layers/FossilCheckouts.js"
import { createRepository, fossil, makeTempDir } from "../support/fossilServer.js"
import { users } from "../support/nodeWorld.js"

// A `files` step names a check-in as Fossil's users do; the watcher resolves it with Fossil's own
// resolver in a read-only `fossil sql`, never `fossil whatis`, which ends with PRAGMA optimize and
// so writes statistics into the repository people post to (docs/locks.md): a read that writes.

let dir: string
let repository: string
let trunk: string
beforeAll(async () => {
  dir = makeTempDir("ocx2-checkin-name-")
  repository = await createRepository(Path.join(dir, "served.fossil"), [users.admin])
  const checkout = Path.join(dir, "checkout")
  Fs.mkdirSync(checkout)
  const inCheckout = async (args: ReadonlyArray<string>) => {
    const r = await runFossil(args, { user: "alice", cwd: checkout })
    if (r.code !== 0) throw new Error(`fossil ${args.join(" ")}: ${r.stderr}${r.stdout}`)
  }
  await inCheckout(["open", repository])
  Fs.writeFileSync(Path.join(checkout, "hello.txt"), "hello\n")
  await inCheckout(["add", "hello.txt"])
  await inCheckout(["commit", "-m", "a check-in", "--user-override", "alice"])
  await inCheckout(["close"])
  trunk = (await fossil(["sql", "-R", repository, "SELECT uuid FROM blob WHERE rid = (SELECT objid FROM event WHERE type = 'ci' ORDER BY mtime DESC LIMIT 1)"])).trim().replace(/'/g, "")
}, 60_000)
afterAll(() => {
  Fs.rmSync(dir, { recursive: true, force: true })
})

const step = { index: 1, step: "files", keys: {}, sets: [] } as unknown as PlannedStep
const resolve = (name: string) =>
  Effect.runPromise(Effect.either(checkinOf(step, name, repository)).pipe(Effect.provide(FossilCheckouts.layer)))

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
  it("resolves a branch, a full hash and a prefix as Fossil does, and refuses what names no check-in", async () => {
    expect(trunk).toMatch(/^[0-9a-f]{64}$/)
    expect(await resolve("trunk")).toEqual(Either.right(trunk))
    expect(await resolve(trunk)).toEqual(Either.right(trunk))
    expect(await resolve(trunk.slice(0, 10))).toEqual(Either.right(trunk))
    for (const name of ["no-such-branch", "", "trunk' OR 1=1 --", "x'); DROP TABLE blob; --"]) {
      const r = await resolve(name)
      expect(Either.isLeft(r) && JSON.stringify(r.left)).toContain("names no check-in")
    }
    expect(await resolve("trunk")).toEqual(Either.right(trunk)) // the quotes above reached nothing
  }, 60_000)

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
      expect(await meanwhile(() => resolve("trunk"))).toBe("none")
      expect(Fs.readFileSync(repository).readUInt32BE(24)).toBe(before + 1) // the person's commit alone
    } finally {
      person.close()
    }
  }, 60_000)
})
