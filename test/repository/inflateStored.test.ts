/**
 * blob.content as Fossil stores it (a big-endian size, then a zlib stream) decoded by node's
 * zlib, from a view into a larger buffer as SQLite hands rows over, and a damaged stream refused.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Zlib from "node:zlib"
import { inflateStored } from "../../src/fossil/InflateStored.js"

const stored = (text: string): Buffer => {
  const data = Buffer.from(text, "utf8")
  const head = Buffer.alloc(4)
  head.writeUInt32BE(data.length)
  return Buffer.concat([head, Zlib.deflateSync(data)])
}

describe("inflateStored", () => {
  it("decodes the stream after the size, from a view that does not start at its buffer's start", () => {
    const one = stored("a forum post, {\"ocx\": 2}\n".repeat(20))
    const page = Buffer.concat([Buffer.from("before"), one, Buffer.from("after")])
    const view = new Uint8Array(page.buffer, page.byteOffset + 6, one.length)
    expect(inflateStored(view).toString("utf8")).toBe("a forum post, {\"ocx\": 2}\n".repeat(20))
    expect(inflateStored(page.subarray(6), one.length).toString("utf8")).toBe("a forum post, {\"ocx\": 2}\n".repeat(20))
  })

  it("refuses a damaged stream with zlib's error", () => {
    const damaged = stored("x".repeat(100))
    damaged[6] = damaged[6]! ^ 0xff
    expect(() => inflateStored(damaged)).toThrow()
  })
})
