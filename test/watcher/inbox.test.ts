import { describe, expect, it } from "vitest"
import { arrivalOf, whereSomeSessionListens } from "../../src/node/Deliveries.js"
import type { SessionFile } from "../../src/care/SessionFiles.js"
import { deliveryLine } from "../../src/protocol/Subscriptions.js"
import { defaultDeliveryDiskBound, deliveryDiskBound, parseInboxLine } from "../../src/watcher/Inbox.js"
import { defaultDeliveryBound, deliveryBound } from "../../src/watcher/Session.js"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

// The pure parts of the path from a round to a watcher: what an inbox line means, and what a
// round's item becomes for the filters.

const hash = "a".repeat(64)

describe("an inbox line", () => {
  it("is a stop, a delivery, or nothing", () => {
    expect(parseInboxLine(JSON.stringify({ stop: hash }))).toEqual({ _tag: "Stop", hash })
    const line = deliveryLine({ _tag: "Post", hash, thread: hash, text: "hi\nthere", sender: "alice", order: { rcvid: 1, rid: 2 } })
    expect(parseInboxLine(JSON.stringify({ deliver: hash, line }))).toEqual({ _tag: "Deliver", hash, line })
    expect(JSON.parse(line)).toEqual({ post: hash, from: "alice", text: "hi\nthere" })
    expect(parseInboxLine("not json")).toBeUndefined()
    expect(parseInboxLine("[1]")).toBeUndefined()
    expect(parseInboxLine(JSON.stringify({ deliver: hash }))).toBeUndefined()
    // a line holding a newline would be two lines on the process's STDIN
    expect(parseInboxLine(JSON.stringify({ deliver: hash, line: "a\nb" }))).toBeUndefined()
  })
})

describe("a round's item", () => {
  const at = { hash, rid: 5, rcvid: 3, sender: "alice" }
  it("becomes an arrival: a post in its thread, a change to its ticket, a check-in on its branch", () => {
    expect(arrivalOf({ _tag: "Post", ...at, root: "r", inReplyTo: "r", editOf: undefined, title: undefined, text: "t", mimetype: "text/plain", user: "alice" }))
      .toEqual({ _tag: "Post", hash, sender: "alice", order: { rcvid: 3, rid: 5 }, thread: "r", text: "t" })
    expect(arrivalOf({ _tag: "TicketChange", ...at, ticket: "k", text: "c", mimetype: undefined, user: "alice" }))
      .toEqual({ _tag: "Change", hash, sender: "alice", order: { rcvid: 3, rid: 5 }, ticket: "k", text: "c" })
    expect(arrivalOf({ _tag: "Checkin", ...at, branch: "trunk", comment: "m", user: "alice" }))
      .toEqual({ _tag: "Checkin", hash, sender: "alice", order: { rcvid: 3, rid: 5 }, branch: "trunk", comment: "m" })
    // a check-in on no branch is on none a session names
    expect(arrivalOf({ _tag: "Checkin", ...at, branch: undefined, comment: "m", user: "alice" })).toBeUndefined()
  })

  it("is asked about (on a clone) only where some session listens", () => {
    const sessions: ReadonlyArray<SessionFile> = [
      { run: "x", processUser: "b", thread: "t1", checkins: ["trunk"], hears: ["*"] },
      { run: "y", processUser: "b", ticket: "k1", checkins: [], hears: [] }
    ]
    const order = { rcvid: 1, rid: 1 }
    expect(whereSomeSessionListens(sessions, { _tag: "Post", hash, thread: "t1", text: "", sender: undefined, order })).toBe(true)
    expect(whereSomeSessionListens(sessions, { _tag: "Post", hash, thread: "t2", text: "", sender: undefined, order })).toBe(false)
    expect(whereSomeSessionListens(sessions, { _tag: "Change", hash, ticket: "k1", text: "", sender: undefined, order })).toBe(true)
    expect(whereSomeSessionListens(sessions, { _tag: "Checkin", hash, branch: "trunk", comment: "", sender: undefined, order })).toBe(true)
    expect(whereSomeSessionListens(sessions, { _tag: "Checkin", hash, branch: "side", comment: "", sender: undefined, order })).toBe(false)
  })
})

describe("ROOT/settings/delivery-bound", () => {
  it("sets the bound in bytes; absent it is 1 MiB; anything else is named and the default used", () => {
    const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-bound-"))
    try {
      expect(deliveryBound(root)).toEqual({ bytes: defaultDeliveryBound })
      Fs.mkdirSync(Path.join(root, "settings"))
      const file = Path.join(root, "settings", "delivery-bound")
      Fs.writeFileSync(file, "65536\n")
      expect(deliveryBound(root)).toEqual({ bytes: 65536 })
      for (const bad of ["64K", "0", "-1", "1.5", ""]) {
        Fs.writeFileSync(file, bad)
        const read = deliveryBound(root)
        expect(read.bytes).toBe(defaultDeliveryBound)
        expect(read.problem).toContain("not a number of bytes above 0")
      }
    } finally {
      Fs.rmSync(root, { recursive: true, force: true })
    }
  })
})

describe("ROOT/settings/delivery-disk-bound", () => {
  it("sets the disk bound in bytes; absent it is 1 GiB; anything else is named and the default used", () => {
    const settings = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-disk-bound-"))
    try {
      expect(deliveryDiskBound(settings)).toEqual({ bytes: defaultDeliveryDiskBound })
      expect(defaultDeliveryDiskBound).toBe(1024 ** 3)
      const file = Path.join(settings, "delivery-disk-bound")
      Fs.writeFileSync(file, "524288\n")
      expect(deliveryDiskBound(settings)).toEqual({ bytes: 524288 })
      for (const bad of ["1G", "0", "-1", ""]) {
        Fs.writeFileSync(file, bad)
        expect(deliveryDiskBound(settings).bytes).toBe(defaultDeliveryDiskBound)
        expect(deliveryDiskBound(settings).problem).toContain("not a number of bytes above 0")
      }
    } finally {
      Fs.rmSync(settings, { recursive: true, force: true })
    }
  })
})
