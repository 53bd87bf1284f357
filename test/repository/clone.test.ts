/**
 * Writes from a clone: pushed over Fossil's sync protocol with the user's password,
 * received by the server from that user, confirmed by the server returning them; and
 * the faults: a server that is down, a wrong password, a user without check-in, a
 * phantom. Nothing is written twice.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Path from "node:path"
import BetterSqlite3 from "better-sqlite3"
import * as FossilReceipts from "../../layers/FossilReceipts.js"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { Receipts } from "../../services/Receipts.js"
import { Repository } from "../../services/Repository.js"
import { composeForumPost } from "../../src/fossil/Artifact.js"
import {
  cloneAs, fossil, freePort, pushArtifacts, type RunningServer, webLogin,
  webNewThread, webPage
} from "../support/fossilServer.js"
import { makeWorld, type World } from "../support/world.js"

const users = [
  { login: "alice", capabilities: "gio234nrwcy", password: "pw-alice" },
  { login: "lab", capabilities: "oiy", password: "pw-lab" },
  { login: "dave", capabilities: "go2", password: "pw-dave" }
]

let world: World | undefined
let dir: string
let server: RunningServer
let repo: string
let clone: string
let root: string

beforeAll(async () => {
  world = await makeWorld({ prefix: "ocx2-test-", users, checkin: {} })
  ;({ dir, server, repository: repo } = world)
  root = await webNewThread(server, await webLogin(server.url, "alice", "pw-alice"), { title: "Run", text: "run here" })
  clone = await cloneAs(server.url, "lab", "pw-lab", Path.join(dir, "lab.fossil"))
}, 90_000)

afterAll(async () => {
  await world?.close()
})

const onClone = <A, E>(effect: Effect.Effect<A, E, Repository>, url = server.url, passwords: Record<string, string> = { lab: "pw-lab", dave: "pw-dave" }) =>
  Effect.runPromise(Effect.scoped(effect.pipe(Effect.provide(FossilRepository.layer({ path: clone, server: { url, passwords } })))))

const receiptOf = (hash: string) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(Receipts, (r) => r.receipts([hash])).pipe(Effect.provide(FossilReceipts.layer({ path: repo })))))

const blobCount = (hash: string) => {
  const db = new BetterSqlite3(repo, { readonly: true })
  try {
    return (db.prepare("SELECT count(*) AS n FROM blob WHERE uuid = ?").get(hash) as { n: number }).n
  } finally {
    db.close()
  }
}

describe("writes from a clone", () => {
  it("a reply written by the service as lab is received from lab, in the right thread; a retry sends nothing", async () => {
    const artifact = composeForumPost({ user: "lab", date: new Date(), root, replyTo: root, text: "started" })
    const result = await onClone(Effect.gen(function*() {
      const repository = yield* Repository
      const first = yield* repository.put("lab", artifact)
      const again = yield* repository.put("lab", artifact)
      const reply = yield* repository.reply({ user: "lab", to: root, text: "ended" })
      return { first, again, reply }
    }))
    expect(result.first).toEqual({ hash: artifact.hash, receipt: undefined, sent: true })
    expect(result.again.sent).toBe(false)
    expect(result.reply.root).toBe(root)
    expect(blobCount(artifact.hash)).toBe(1)
    for (const hash of [artifact.hash, result.reply.hash]) {
      expect((await receiptOf(hash))[0]).toMatchObject({ _tag: "Received", sender: "lab" })
    }
    const served = await Effect.runPromise(Effect.scoped(Effect.flatMap(Repository, (r) => r.thread(root)).pipe(
      Effect.provide(FossilRepository.layer({ path: repo })))))
    expect(served.map((p) => [p.hash, p.sender, p.inReplyTo])).toEqual([
      [root, "alice", undefined], [artifact.hash, "lab", root], [result.reply.hash, "lab", root]
    ])
    // the clone learns of them at its next pull, senders unknown there
    await fossil(["pull", "-R", clone], "lab")
    const onCloneThread = await onClone(Effect.flatMap(Repository, (r) => r.thread(root)))
    // a pull brings artifacts in hash order: a clone cannot know server order, only what it holds
    expect(onCloneThread.map((p) => p.hash).sort()).toEqual([root, artifact.hash, result.reply.hash].sort())
    expect(onCloneThread.every((p) => p.sender === undefined)).toBe(true)
  })

  it("a tag and an unversioned file from the clone are received from lab", async () => {
    const checkin = (await fossil(["sql", "-R", repo, "SELECT uuid FROM blob JOIN event ON objid = rid WHERE type = 'ci'"])).trim().replace(/'/g, "")
    const result = await onClone(Effect.gen(function*() {
      const repository = yield* Repository
      const tag = yield* repository.tag({ user: "lab", checkin, name: "ci", value: "fail: exit 1 (against x)" })
      const uv = yield* repository.putUnversioned({ user: "lab", name: "builds/out.txt", content: "built" })
      return { tag, uv }
    }))
    expect((await receiptOf(result.tag.hash))[0]).toMatchObject({ _tag: "Received", sender: "lab" })
    expect(await fossil(["tag", "list", "--raw", checkin, "-R", repo])).toContain("ci=fail: exit 1 (against x)")
    expect(await fossil(["uv", "cat", "builds/out.txt", "-R", repo])).toBe("built")
    const list = await Effect.runPromise(Effect.scoped(Effect.flatMap(Repository, (r) => r.unversioned()).pipe(
      Effect.provide(FossilRepository.layer({ path: repo })))))
    expect(list.find((f) => f.name === "builds/out.txt")).toMatchObject({ sender: "lab", hash: result.uv.hash })
    expect((await webPage(`${server.url}uv/builds/out.txt`, await webLogin(server.url, "alice", "pw-alice"))).text).toContain("built")
  })

  it("a post pushed by lab whose U card claims alice is received from lab", async () => {
    const claimed = composeForumPost({ user: "alice", date: new Date(), root, replyTo: root, text: "claims alice" })
    await pushArtifacts(clone, "lab", [claimed])
    expect((await receiptOf(claimed.hash))[0]).toMatchObject({ _tag: "Received", sender: "lab" })
  })
})

describe("faults", () => {
  it("a server that is down: ServerUnreachable, nothing written", async () => {
    const port = await freePort()
    const failure = await onClone(Effect.either(Effect.flatMap(Repository, (r) => r.reply({ user: "lab", to: root, text: "lost" }))), `http://127.0.0.1:${port}/`)
    expect(Either.isLeft(failure) && failure.left._tag).toBe("ServerUnreachable")
    expect(Either.isLeft(failure) && failure.left.message).toContain(`127.0.0.1:${port}`)
  })

  it("a wrong password: WriteRefused naming login failed; a user without check-in: not authorized", async () => {
    const artifact = composeForumPost({ user: "lab", date: new Date(), root, replyTo: root, text: "refused" })
    const wrong = await onClone(Effect.either(Effect.flatMap(Repository, (r) => r.put("lab", artifact))), server.url, { lab: "nope" })
    expect(Either.isLeft(wrong) && wrong.left._tag).toBe("WriteRefused")
    expect(Either.isLeft(wrong) && wrong.left.message).toMatch(/login failed/)
    const dave = await onClone(Effect.either(Effect.flatMap(Repository, (r) => r.put("dave", artifact))))
    expect(Either.isLeft(dave) && dave.left._tag).toBe("WriteRefused")
    expect(Either.isLeft(dave) && dave.left.message).toMatch(/not authorized/)
    const nobodyKnown = await onClone(Effect.either(Effect.flatMap(Repository, (r) => r.put("zed", artifact))))
    expect(Either.isLeft(nobodyKnown) && nobodyKnown.left.message).toMatch(/no password/)
    expect(blobCount(artifact.hash)).toBe(0)
  })

  it("a phantom: reading it or answering it is a PhantomArtifact error; its receipt says not received", async () => {
    const missing = composeForumPost({ user: "alice", date: new Date(), title: "never sent", text: "x" })
    const orphan = composeForumPost({ user: "alice", date: new Date(), root: missing.hash, replyTo: missing.hash, text: "orphan" })
    await pushArtifacts(clone, "lab", [orphan])
    const result = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const repository = yield* Repository
      return {
        read: yield* Effect.either(repository.artifact(missing.hash)),
        reply: yield* Effect.either(repository.reply({ user: "alice", to: missing.hash, text: "to a phantom" })),
        bad: yield* Effect.either(repository.thread("not-a-hash"))
      }
    }).pipe(Effect.provide(FossilRepository.layer({ path: repo })))))
    expect(Either.isLeft(result.read) && result.read.left._tag).toBe("PhantomArtifact")
    expect(Either.isLeft(result.reply) && result.reply.left._tag).toBe("PhantomArtifact")
    expect(Either.isLeft(result.bad) && result.bad.left._tag).toBe("InvalidInput")
    expect((await receiptOf(missing.hash))[0]).toEqual({ _tag: "NotReceived", hash: missing.hash })
  })

  it("a repository file that is not there: RepositoryUnavailable", async () => {
    const r = await Effect.runPromise(Effect.scoped(Effect.either(Effect.flatMap(Repository, (x) => x.codes())).pipe(
      Effect.provide(FossilRepository.layer({ path: Path.join(dir, "missing.fossil") })))))
    expect(Either.isLeft(r) && r.left._tag).toBe("RepositoryUnavailable")
    expect(Either.isLeft(r) && r.left.message).toContain("missing.fossil")
  })
})
