import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Os from "node:os"
import * as Path from "node:path"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as RemoteReceipts from "../../layers/RemoteReceipts.js"

// A long poll's answer with arrived, from a page that is not the real one: whatever it says is
// checked before any of it is believed, and a malformed or hostile answer is refused whole with a
// clear error, none of it remembered. The real page's answers: remoteReceipts.test.ts.

const run = "a".repeat(64)
const other = "b".repeat(64)
let server: Http.Server
let base: string
/** what the page answers next to newer_than, and every question it was asked */
let answer: (input: Record<string, unknown>) => unknown
const asked: Array<Record<string, unknown>> = []
/** what the page says of capabilities_of */
let capabilitiesAnswer: (user: string) => unknown = (user) => ({ user })

beforeAll(async () => {
  server = Http.createServer((request, response) => {
    let body = ""
    request.on("data", (chunk) => (body += chunk))
    request.on("end", () => {
      if (request.url === "/login") {
        response.writeHead(302, { "Set-Cookie": "fossil-0123=builder-session; Path=/", Location: "/" })
        return response.end()
      }
      const input = JSON.parse(body) as Record<string, unknown>
      asked.push(input)
      response.writeHead(200, { "Content-Type": "application/json" })
      response.end(JSON.stringify(input["newer_than"] !== undefined
        ? answer(input)
        // a question by artifacts: none received (so an answer remembered is told apart from one asked)
        : { stopped: { reason: "completed" }, output: { receipts: ((input["artifacts"] ?? []) as Array<string>).map((hash) => ({ hash, received: false })), ...(input["capabilities_of"] !== undefined ? { capabilities_of: capabilitiesAnswer(input["capabilities_of"] as string) } : {}) } }))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
})

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve))
})

const row = (extra: object = {}) => ({ hash: run, received: true, sender: "alice", capabilities: "oi", rcvid: 8, rid: 40, ...extra })
const completed = (output: object) => ({ stopped: { reason: "completed" }, output: { receipts: [], ...output } })
const service = () => RemoteReceipts.make({ url: base, user: "builder", password: "pw" })

// a real HTTP server: every test is it.live
describe("a long poll's answer with arrived", () => {
  it.live("is remembered when well formed: the round after the pull asks the page nothing", () =>
    Effect.gen(function*() {
      answer = () => completed({ newest: 9, arrived: { receipts: [row()], process_users: [{ user: "rita", capabilities: "oi" }, { user: "nobody-here" }], complete: true } })
      const receipts = service()
      expect(yield* receipts.newest(7, 1000)).toBe(9)
      expect(asked.at(-1)).toMatchObject({ newer_than: 7, wait: 1, arrived: true })
      const count = asked.length
      expect(yield* receipts.receipts([run])).toEqual([{ _tag: "Received", hash: run, sender: "alice", capabilities: "oi", rcvid: 8, rid: 40 }])
      expect(yield* receipts.capabilitiesOf("rita")).toBe("oi")
      expect(yield* receipts.capabilitiesOf("nobody-here")).toBeUndefined()
      expect(asked.length).toBe(count)
      // what it did not say is asked as before
      expect(yield* receipts.receipts([other])).toEqual([{ _tag: "NotReceived", hash: other }])
      expect(asked.length).toBe(count + 1)
    }))

  const hostile: ReadonlyArray<[string, unknown, RegExp]> = [
    ["a receipt from before the question", completed({ newest: 9, arrived: { receipts: [row({ rcvid: 7 })], process_users: [], complete: true } }), /receipt 7, not after 7 up to 9/],
    ["a receipt newer than the newest", completed({ newest: 9, arrived: { receipts: [row({ rcvid: 10 })], process_users: [], complete: true } }), /not after 7 up to 9/],
    ["a row not received", completed({ newest: 9, arrived: { receipts: [row({ received: false })], process_users: [], complete: true } }), /is not a receipt/],
    ["a row with no sender", completed({ newest: 9, arrived: { receipts: [row({ sender: undefined })], process_users: [], complete: true } }), /names no sender/],
    ["a short hash", completed({ newest: 9, arrived: { receipts: [row({ hash: "abc" })], process_users: [], complete: true } }), /has no full hash/],
    ["a hash twice", completed({ newest: 9, arrived: { receipts: [row(), row({ rid: 41 })], process_users: [], complete: true } }), /repeats/],
    ["a row number that is not one", completed({ newest: 9, arrived: { receipts: [row({ rid: "40" })], process_users: [], complete: true } }), /no receipt number or row number/],
    ["capabilities that are not a string", completed({ newest: 9, arrived: { receipts: [], process_users: [{ user: "rita", capabilities: 5 }], complete: true } }), /not a string/],
    ["a process user with no login", completed({ newest: 9, arrived: { receipts: [], process_users: [{ capabilities: "oi" }], complete: true } }), /has no login/],
    ["arrived not an object", completed({ newest: 9, arrived: "everything" }), /arrived is not an object/],
    ["no arrived at all", completed({ newest: 9 }), /holds no arrived/],
    ["a newest that is no receipt number", completed({ newest: 9.5, arrived: { receipts: [], process_users: [], complete: true } }), /newest is not a receipt number/],
    ["too many rows", completed({ newest: 5000, arrived: { receipts: Array.from({ length: 1001 }, (_, i) => row({ hash: i.toString(16).padStart(64, "0"), rcvid: 8 })), process_users: [], complete: true } }), /more than 1000 rows/]
  ]
  for (const [what, given, says] of hostile) {
    it.live(`is refused whole, none of it remembered: ${what}`, () =>
      Effect.gen(function*() {
        answer = () => given
        const receipts = service()
        const refused = yield* Effect.either(receipts.newest(7, 1000))
        expect(Either.isLeft(refused) && refused.left._tag).toBe("ReceiptsUnavailable")
        expect(Either.isLeft(refused) && refused.left.message).toMatch(says)
        // the hash it named is asked of the page, which says it was not received
        expect(yield* receipts.receipts([run])).toEqual([{ _tag: "NotReceived", hash: run }])
        expect(yield* receipts.capabilitiesOf("rita")).toBeUndefined()
      }))
  }

  it.live("is not asked of a page that predates it: that page's refusal asks the number alone from then on", () =>
    Effect.gen(function*() {
      answer = (input) => input["arrived"] !== undefined
        ? { stopped: { reason: "refused", message: "arrived: is unexpected" } }
        : completed({ newest: 9 })
      const receipts = service()
      // the refusal answers with the number asked: nothing pulled, the question asked again
      expect(yield* receipts.newest(7, 1000)).toBe(7)
      expect(yield* receipts.newest(7, 1000)).toBe(9)
      expect(asked.at(-1)).toEqual({ newer_than: 7, wait: 1 })
    }))

  it.live("a record's receipts ask its process user's capabilities in the same request, and the answer must name that user", () =>
    Effect.gen(function*() {
      capabilitiesAnswer = (user) => ({ user, capabilities: "oi" })
      const receipts = service()
      const count = asked.length
      expect(yield* receipts.receipts([other], { capabilitiesNext: "rita" })).toEqual([{ _tag: "NotReceived", hash: other }])
      expect(asked.at(-1)).toEqual({ artifacts: [other], capabilities_of: "rita" })
      expect(yield* receipts.capabilitiesOf("rita")).toBe("oi")
      expect(asked.length).toBe(count + 1)
      // a page that answers about someone else is refused, and nothing is remembered of it
      capabilitiesAnswer = () => ({ user: "admin", capabilities: "s" })
      const hostile = service()
      const refused = yield* Effect.either(hostile.receipts([other], { capabilitiesNext: "rita" }))
      expect(Either.isLeft(refused) && refused.left.message).toMatch(/capabilities_of does not name rita/)
      capabilitiesAnswer = (user) => ({ user })
      expect(yield* hostile.capabilitiesOf("rita")).toBeUndefined()
    }))

  it.scopedLive("is shared with the node's other processes on the host: another instance answers from the file, for the same server and user only", () =>
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-shared-receipts-"))),
        (d) => Effect.sync(() => Fs.rmSync(d, { recursive: true, force: true }))
      )
      const file = Path.join(dir, "node", "receipts-remembered.json")
      const sharing = (user = "builder") => RemoteReceipts.make({ url: base, user, password: "pw", shareWith: file })
      answer = () => completed({ newest: 9, arrived: { receipts: [row()], process_users: [{ user: "rita", capabilities: "oi" }], complete: true } })
      expect(yield* sharing().newest(7, 1000)).toBe(9)
      expect(Fs.statSync(file).mode & 0o777).toBe(0o600)
      const count = asked.length
      // another process (a watcher) reads them there: no question asked
      const watcher = sharing()
      expect(yield* watcher.receipts([run], { capabilitiesNext: "rita" })).toEqual([{ _tag: "Received", hash: run, sender: "alice", capabilities: "oi", rcvid: 8, rid: 40 }])
      expect(yield* watcher.capabilitiesOf("rita")).toBe("oi")
      expect(asked.length).toBe(count)
      // another user sees what the server shows that user: it asks
      expect(yield* sharing("carol").receipts([run])).toEqual([{ _tag: "NotReceived", hash: run }])
      expect(asked.length).toBe(count + 1)
      // an entry older than the memory's span, or a damaged file, is not believed: asked again
      const kept = JSON.parse(Fs.readFileSync(file, "utf8")) as { receipts: Array<{ at: number }> }
      Fs.writeFileSync(file, JSON.stringify({ ...kept, receipts: kept.receipts.map((r) => ({ ...r, at: r.at - 6000 })) }))
      expect(yield* sharing().receipts([run])).toEqual([{ _tag: "NotReceived", hash: run }])
      Fs.writeFileSync(file, JSON.stringify({ ...kept, receipts: kept.receipts.map((r) => ({ ...r, sender: 5 })) }))
      expect(yield* sharing().receipts([run])).toEqual([{ _tag: "NotReceived", hash: run }])
      Fs.writeFileSync(file, "{ not json")
      expect(yield* sharing().receipts([run])).toEqual([{ _tag: "NotReceived", hash: run }])
      expect(asked.length).toBe(count + 4)
    }))
})
