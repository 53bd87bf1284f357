/**
 * Many writers' artifacts in one write on the server's host (src/fossil/WriteSpool.ts): writers at
 * once share a few writes, a writer that died leaves nothing that is ever written, and what
 * recovery withdrew is never written.
 */
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { Repository } from "../../services/Repository.js"
import { composeForumPost } from "../../src/fossil/Artifact.js"
import { addEntry, readEntries, spoolDirOf } from "../../src/fossil/WriteSpool.js"
import { fossil } from "../support/fossilServer.js"
import { makeWorld, type World } from "../support/world.js"

const users = [{ login: "lab", capabilities: "", password: "pw-lab" }, { login: "alice", capabilities: "gio234nrwcy", password: "pw-alice" }]
let world: World | undefined
let repo: string
beforeAll(async () => {
  world = await makeWorld({ prefix: "ocx2-spool-", users, checkin: {}, backoffice: false })
  repo = world.repository
}, 90_000)
afterAll(() => world?.close())

const withRepository = <A, E>(f: (r: typeof Repository.Service) => Effect.Effect<A, E>) =>
  Effect.scoped(Effect.flatMap(FossilRepository.make({ path: repo }), f))
const post = (text: string) => composeForumPost({ user: "lab", date: new Date(), title: text, text })
const receiptOf = (hash: string) => Effect.promise(() => fossil(["sql", "-R", repo, `SELECT rcvid FROM blob WHERE uuid='${hash}'`])).pipe(Effect.map((r) => r.trim()))
/** a pid that was a process's and is no more */
const deadPid = () => {
  const child = ChildProcess.spawnSync("sh", ["-c", "echo $$"], { encoding: "utf8" })
  return Number(child.stdout.trim())
}

// real processes (fossil) and real time (the spool's writers wait for each other)
describe("the node's writes on the server's host", () => {
  it.live("writers at once share writes: 12 posts, every one received from its user, in fewer than 12 receipts", () =>
    Effect.gen(function*() {
      const posts = Array.from({ length: 12 }, (_, i) => post(`together ${i}`))
      yield* Effect.all(posts.map((p) => withRepository((r) => r.put("lab", p))), { concurrency: "unbounded" })
      const receipts = yield* Effect.all(posts.map((p) => receiptOf(p.hash)), { concurrency: "unbounded" })
      for (const r of receipts) expect(r).toMatch(/^\d+$/)
      expect(new Set(receipts).size).toBeLessThan(12)
      const senders = yield* Effect.promise(() => fossil(["sql", "-R", repo,
        `SELECT DISTINCT u.login FROM blob b JOIN rcvfrom r USING(rcvid) JOIN user u ON u.uid=r.uid WHERE b.uuid IN (${posts.map((p) => `'${p.hash}'`).join(",")})`]))
      expect(senders.trim()).toBe("'lab'")
      expect(readEntries(spoolDirOf(repo))).toEqual([])
    }), 120_000)

  it.live("what a dead writer left waiting is never written; what recovery withdrew is never written", () =>
    Effect.gen(function*() {
      const orphan = post("left by a writer that died")
      addEntry(spoolDirOf(repo), "lab", [orphan])
      // the entry names this process; rewrite it as a dead one's
      const [entry] = readEntries(spoolDirOf(repo))
      Fs.writeFileSync(entry!.file, Fs.readFileSync(entry!.file, "utf8").replace(`"pid":${process.pid}`, `"pid":${deadPid()}`))
      const withdrawn = post("withdrawn by recovery")
      addEntry(spoolDirOf(repo), "lab", [withdrawn]) // a live writer's (this process)
      yield* withRepository((r) => r.withdraw([withdrawn.hash]))
      expect(readEntries(spoolDirOf(repo)).map((e) => e.artifacts[0]!.hash)).toEqual([orphan.hash])

      const next = post("the next write")
      yield* withRepository((r) => r.put("lab", next))
      expect(yield* receiptOf(next.hash)).toMatch(/^\d+$/)
      expect(yield* receiptOf(orphan.hash)).toBe("")
      expect(yield* receiptOf(withdrawn.hash)).toBe("")
      expect(readEntries(spoolDirOf(repo))).toEqual([])
    }), 120_000)
})
