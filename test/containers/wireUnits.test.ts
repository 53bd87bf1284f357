import fc from "fast-check"
import { describe, expect, it, vi } from "vitest"
import { decodeFrame, encodeFrame, FrameType, headerLength } from "../../src/containers/Frames.js"
import { memberText } from "../../src/containers/JsonText.js"
import { decodeVolumeRefusal, volumeRefusalAnswer } from "../../src/containers/Wire.js"

// a loaded machine may be slow; nothing here waits on time, only on what it waits for
vi.setConfig({ testTimeout: 300_000 })

/** Pure parts of the wire: the frame header, the exact text of a JSON member, refusal bytes. */
describe("the wire, unit by unit", () => {
  it("a frame is 9 bytes of header and its payload, both ways", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 6 }), fc.nat({ max: 0xffffffff }), fc.nat({ max: 0xffffffff }), fc.uint8Array(), (type, scope, channel, payload) => {
        const frame = encodeFrame(type as FrameType, scope, channel, payload)
        expect(frame.length).toBe(headerLength + payload.length)
        expect(frame.readUInt32BE(1)).toBe(scope)
        expect(decodeFrame(frame)).toEqual({ type, scope, channel, payload: Buffer.from(payload) })
      })
    )
    expect(decodeFrame(Buffer.alloc(8))).toBeUndefined()
    expect(decodeFrame(Buffer.from([7, 0, 0, 0, 0, 0, 0, 0, 0]))).toBeUndefined()
  })

  it("memberText gives a member's exact text, the last of duplicates, for any JSON", () => {
    expect(memberText(`{"a":1,"arguments" : [1.0000000000000000001, "\\"}"] ,"z":2}`, "arguments")).toBe(`[1.0000000000000000001, "\\"}"]`)
    expect(memberText(`{"arguments":1,"arguments":{"x":"}"}}`, "arguments")).toBe(`{"x":"}"}`)
    expect(memberText(`{"b":true}`, "arguments")).toBeUndefined()
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), fc.jsonValue(), (rest, value) => {
        const text = JSON.stringify({ ...rest, arguments: value }, null, Math.random() < 0.5 ? 1 : undefined)
        expect(JSON.parse(memberText(text, "arguments")!)).toEqual(JSON.parse(text).arguments)
      })
    )
  })

  it("a volume refusal is its byte, the name with its length, and for 5 the mode", () => {
    expect(volumeRefusalAnswer(5, "vol", "persistent")).toEqual(Buffer.concat([Buffer.from([5, 0, 3]), Buffer.from("volpersistent")]))
    expect(decodeVolumeRefusal(volumeRefusalAnswer(2, "é"))).toEqual({ byte: 2, name: "é" })
    expect(decodeVolumeRefusal(volumeRefusalAnswer(5, "v", "read_only"))).toEqual({ byte: 5, name: "v", mode: "read_only" })
  })
})
