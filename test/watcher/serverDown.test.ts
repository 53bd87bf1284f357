import { describe, expect, it } from "vitest"
import { ReceiptsUnavailable, ServerUnreachable } from "../../services/Receipts.js"
import { RepositoryUnavailable, WriteFailed, WriteNotConfirmed, WriteRefused } from "../../services/Repository.js"
import { serverDown } from "../../src/watcher/Outbox.js"

describe("which failures are the server down, waited out by the watcher", () => {
  it("the server unreachable, or its receipts unavailable", () => {
    expect(serverDown(new ServerUnreachable({ url: "http://127.0.0.1:1", reason: "ECONNREFUSED" }))).toBe(true)
    expect(serverDown(new ReceiptsUnavailable({ path: "http://127.0.0.1:1", reason: "HTTP 502" }))).toBe(true)
  })
  it("a write not confirmed because the server did not return it, not because another sent it", () => {
    expect(serverDown(new WriteNotConfirmed({ hash: "a".repeat(64), reason: "the server does not return it" }))).toBe(true)
    expect(serverDown(new WriteNotConfirmed({ hash: "a".repeat(64), reason: "the server received it from mallory" }))).toBe(false)
  })
  it("a write or a pull that failed on the way to the server; not one that failed on this host", () => {
    expect(serverDown(new WriteFailed({ operation: "push", reason: "xfer: fetch failed" }))).toBe(true)
    expect(serverDown(new WriteFailed({ operation: "post", reason: "no space left on device" }))).toBe(false)
    expect(serverDown(new RepositoryUnavailable({ path: "/c.fossil", reason: "fossil pull -R /c.fossil: exited 1" }))).toBe(true)
    expect(serverDown(new RepositoryUnavailable({ path: "/c.fossil", reason: "not a repository" }))).toBe(false)
  })
  it("nothing else: a refusal, an error of another kind", () => {
    expect(serverDown(new WriteRefused({ user: "alice", reason: "not authorized" }))).toBe(false)
    expect(serverDown(new Error("HTTP 502"))).toBe(false)
    expect(serverDown(undefined)).toBe(false)
  })
})
