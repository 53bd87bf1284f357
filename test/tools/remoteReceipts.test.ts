import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import { afterAll, beforeAll, describe, expect, it, vi } from "@effect/vitest"
import * as FossilReceipts from "../../layers/FossilReceipts.js"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { writeMessage } from "../../src/protocol/Envelope.js"
import * as RemoteReceipts from "../../layers/RemoteReceipts.js"
import { Receipts } from "../../services/Receipts.js"
import { fossil } from "../support/fossilServer.js"
import { makeToolsWorld, type ToolsWorld, users, wanda } from "./world.js"

// The Receipts of a node on a clone's host: the server's receipt tool asked over HTTP through the
// CGI, signed in as the node user. Its answers are the served file's own, as the server's
// viewer may see them.

let world: ToolsWorld

beforeAll(async () => {
  world = await makeToolsWorld()
}, 120_000)

afterAll(async () => {
  await world?.close()
})

const remote = (user: { login: string; password: string }) =>
  RemoteReceipts.make({ url: world.base, user: user.login, password: user.password })

const local = <A, E>(f: (r: typeof Receipts.Service) => Effect.Effect<A, E>) =>
  Effect.scoped(Effect.flatMap(FossilReceipts.make({ path: world.repository }), f))

// real time and a real server: every test is it.live
describe("RemoteReceipts", () => {
  it.live("answers as the served file does, for each hash in the order asked, and a user's capabilities", () =>
    Effect.gen(function*() {
      const missing = "f".repeat(64)
      const hashes = [missing, world.trunk]
      const service = remote(users.builder)
      const asked = yield* service.receipts(hashes)
      expect(asked).toEqual(yield* local((r) => r.receipts(hashes)))
      expect(asked[1]).toMatchObject({ _tag: "Received", sender: "alice" })
      expect(asked[0]).toEqual({ _tag: "NotReceived", hash: missing })
      expect(yield* service.capabilitiesOf("rita")).toBe(world.fullcap("rita"))
      expect(yield* service.capabilitiesOf("nosuchuser")).toBeUndefined()
      // as a layer, for the node's programs
      const viaLayer = yield* Effect.flatMap(Receipts, (r) => r.receipts([world.trunk])).pipe(
        Effect.provide(RemoteReceipts.layer({ url: world.base.replace(/\/$/, ""), user: users.builder.login, password: users.builder.password }))
      )
      expect(viaLayer).toEqual(asked.slice(1))
      // many hashes go in batches, still one answer each in order
      const many = Array.from({ length: 2100 }, (_, i) => (i === 1500 ? world.trunk : i.toString(16).padStart(64, "0")))
      const answers = yield* service.receipts(many)
      expect(answers).toHaveLength(2100)
      expect(answers[1500]).toMatchObject({ _tag: "Received", hash: world.trunk })
    }), 120_000)

  it.live("asks as its user: one without Read (o) is told nothing was received", () =>
    Effect.gen(function*() {
      expect(yield* remote(wanda).receipts([world.trunk])).toEqual([{ _tag: "NotReceived", hash: world.trunk }])
    }), 90_000)

  it.live("refuses a hash that is not full without asking, and says so when the login fails", () =>
    Effect.gen(function*() {
      const bad = yield* Effect.either(remote(users.builder).receipts([world.trunk.slice(0, 10)]))
      expect(Either.isLeft(bad) && bad.left._tag).toBe("InvalidHash")
      const wrong = yield* Effect.either(remote({ login: "builder", password: "wrong" }).receipts([world.trunk]))
      expect(Either.isLeft(wrong) && wrong.left._tag).toBe("ReceiptsUnavailable")
      expect(Either.isLeft(wrong) && wrong.left.message).toContain("login failed")
    }), 90_000)

  it.live("says the newest receipt's number, and holds the question until a newer one arrives (a long poll)", () =>
    Effect.gen(function*() {
      const service = remote(users.builder)
      const newest = yield* service.newest(0, 0)
      expect(newest).toBeGreaterThan(0)
      expect(newest).toBe(yield* local((r) => r.newest(0, 0)))
      // held: it can only answer past `newest` once the ticket below is received
      let answeredAt: number | undefined
      const held = yield* Effect.fork(service.newest(newest!, 20_000).pipe(Effect.tap(() => Effect.sync(() => {
        answeredAt = Date.now()
      }))))
      const postedAt = Date.now()
      yield* Effect.promise(() => fossil(["ticket", "add", "title", "a receipt", "-R", world.repository]))
      const newer = yield* Fiber.join(held)
      expect(newer).toBeGreaterThan(newest!)
      expect(answeredAt).toBeGreaterThanOrEqual(postedAt)
      // nothing newer within the wait: answered when it is over, with the same number
      const started = Date.now()
      expect(yield* service.newest(newer!, 1000)).toBe(newer)
      expect(Date.now() - started).toBeGreaterThanOrEqual(900)
      // a question already answered is answered at once
      expect(yield* service.newest(newest!, 20_000)).toBe(newer)
      // a user without Read is told nothing, and not held
      expect(yield* remote(wanda).newest(0, 20_000)).toBeUndefined()
    }), 120_000)

  it.live("takes from the held question's answer what arrived: the run's receipt and its process user's capabilities, asked no more", () =>
    Effect.gen(function*() {
      const service = remote(users.builder)
      const newest = (yield* service.newest(0, 0))!
      const held = yield* Effect.fork(service.newest(newest, 20_000))
      const posted = yield* Effect.scoped(Effect.flatMap(FossilRepository.make({ path: world.repository }), (r) =>
        r.post({ user: "alice", title: "a run", text: writeMessage({ ocx: 2, to: users.builder.login, run: { process: { user: "rita", command: ["true"] } } }) })))
      expect(yield* Fiber.join(held)).toBeGreaterThan(newest)
      const fetched = vi.spyOn(globalThis, "fetch")
      yield* Effect.gen(function*() {
        const [answer] = yield* service.receipts([posted.hash])
        expect(answer).toEqual((yield* local((r) => r.receipts([posted.hash])))[0])
        expect(answer).toMatchObject({ _tag: "Received", sender: "alice" })
        expect(yield* service.capabilitiesOf("rita")).toBe(world.fullcap("rita"))
        expect(fetched).not.toHaveBeenCalled()
        // a record's receipts with the capabilities asked next: one request, the capabilities remembered
        const other = remote(users.builder)
        yield* other.receipts([world.trunk]) // signed in
        fetched.mockClear()
        expect(yield* other.receipts([posted.hash], { capabilitiesNext: "rita" })).toEqual([answer])
        expect(yield* other.capabilitiesOf("rita")).toBe(world.fullcap("rita"))
        expect(fetched).toHaveBeenCalledTimes(1)
      }).pipe(Effect.ensuring(Effect.sync(() => fetched.mockRestore())))
    }), 120_000)

  it.live("fails with ServerUnreachable when the server is down", () =>
    Effect.gen(function*() {
      const service = remote(users.builder)
      yield* service.receipts([world.trunk]) // signed in while it was up
      yield* Effect.promise(() => world.stopServer())
      // a receipt the server gave a moment ago is remembered for a few seconds (a round asks it three times)
      expect((yield* service.receipts([world.trunk]))[0]?._tag).toBe("Received")
      const questions: ReadonlyArray<Effect.Effect<unknown, { readonly _tag: string; readonly message: string }>> = [
        service.receipts(["0".repeat(64)]),
        remote(users.builder).receipts([world.trunk]),
        remote(users.builder).capabilitiesOf("rita")
      ]
      for (const asked of questions) {
        const down = yield* Effect.either(asked)
        expect(Either.isLeft(down) && down.left._tag).toBe("ServerUnreachable")
        expect(Either.isLeft(down) && down.left.message).toContain(world.base)
      }
    }), 90_000)
})
