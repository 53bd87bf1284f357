/**
 * An in-memory Receipts for unit tests: answers from a table of receipts and users,
 * with the same hiding rules as the local layer; `unreachable` makes every call fail
 * as a server that does not answer would.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { grants } from "../src/fossil/Fullcap.js"
import { isFullHash } from "../src/fossil/Hash.js"
import {
  InvalidHash, type ReceiptAnswer, Receipts, type ReceiptsService, ServerUnreachable
} from "../services/Receipts.js"

export interface TestReceipt {
  readonly hash: string
  readonly sender: string
  readonly rcvid: number
  readonly rid: number
  readonly private?: boolean
}

export interface TestReceiptsOptions {
  readonly receipts?: ReadonlyArray<TestReceipt>
  /** login -> effective capabilities (fullcap) */
  readonly users?: Readonly<Record<string, string>>
  readonly unreachable?: boolean
}

export const make = (options: TestReceiptsOptions = {}): ReceiptsService => {
  const users = options.users ?? {}
  const down = () => new ServerUnreachable({ url: "test://receipts", reason: "the test server is down" })
  return {
    receipts: (hashes, o) =>
      Effect.gen(function*() {
        if (options.unreachable === true) return yield* down()
        const bad = hashes.find((h) => !isFullHash(h))
        if (bad !== undefined) return yield* new InvalidHash({ hash: bad })
        const caps = o?.caller === undefined ? undefined : users[o.caller] ?? users["nobody"] ?? ""
        return hashes.map((hash): ReceiptAnswer => {
          const r = options.receipts?.find((x) => x.hash === hash)
          const hidden = caps !== undefined && (!grants(caps, "o") || (r?.private === true && !grants(caps, "x")))
          return r === undefined || hidden
            ? { _tag: "NotReceived", hash }
            : { _tag: "Received", hash, sender: r.sender, capabilities: users[r.sender] ?? "", rcvid: r.rcvid, rid: r.rid }
        })
      }),
    capabilitiesOf: (login) => (options.unreachable === true ? Effect.fail(down()) : Effect.succeed(users[login])),
    // the table is fixed: nothing newer ever arrives, so a wait is not waited
    newest: (_after, _waitMs, o) => {
      if (options.unreachable === true) return Effect.fail(down())
      const caps = o?.caller === undefined ? undefined : users[o.caller] ?? users["nobody"] ?? ""
      return Effect.succeed(caps !== undefined && !grants(caps, "o") ? undefined : Math.max(0, ...(options.receipts ?? []).map((r) => r.rcvid)))
    }
  }
}

export const layer = (options: TestReceiptsOptions = {}) => Layer.succeed(Receipts, make(options))
