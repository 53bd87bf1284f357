import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { Repository } from "../../services/Repository.js"
import { createRepository, makeTempDir, startServer, webLogin, webNewThread, webReplyOnce, type RunningServer } from "../support/fossilServer.js"
import { users } from "../support/nodeWorld.js"

// Issue 13 item 3: a person's post through the web form never fails because the node is writing.
// Fossil's forum page reads in a deferred transaction, then asks for the write lock, which SQLite
// refuses at once ("database is locked") while another process holds it; the node's writes take the
// file's lock whole from their first read (unix-excl), so the person's request waits instead.
// The person posts alone here: two people posting at once can refuse each other, node or not.

let dir: string
let repository: string
let server: RunningServer
beforeAll(async () => {
  dir = makeTempDir("ocx2-posts-")
  repository = await createRepository(Path.join(dir, "served.fossil"), Object.values(users))
  server = await startServer(repository)
}, 60_000)
afterAll(async () => {
  await server?.stop()
  Fs.rmSync(dir, { recursive: true, force: true })
})

describe("a person's posts while the node writes", () => {
  it("all succeed, none refused with database is locked, during a burst of the node's writes", async () => {
    const person = await webLogin(server.url, users.runner.login, users.runner.password)
    const thread = await webNewThread(server, person, { title: "a thread", text: "hello" })
    // until both have done enough to meet often: counts, not a time, so a slow machine only takes longer
    const enough = 25
    const giveUp = Date.now() + 50_000
    let nodeWrites = 0
    let posts = 0
    const going = () => (nodeWrites < enough || posts < enough) && Date.now() < giveUp
    // the node writing replies as the node user, back to back (its writes run one at a time)
    const nodeWriter = async (i: number) => {
      while (going()) {
        await Effect.runPromise(Effect.flatMap(Repository, (r) => r.reply({ user: users.node.login, to: thread, text: `node ${i} ${nodeWrites}` })).pipe(
          Effect.provide(FossilRepository.layer({ path: repository }))))
        nodeWrites++
      }
    }
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
    await Promise.all([nodeWriter(0), personPosts()])
    expect(nodeWrites).toBeGreaterThanOrEqual(enough)
    expect(posts).toBeGreaterThanOrEqual(enough)
    expect(refused).toEqual([])
  }, 60_000)
})
