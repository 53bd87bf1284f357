/**
 * The zlib decoder for blob.content against node's zlib: every stream zlib makes
 * (all levels and strategies, text and binary, stored/fixed/dynamic blocks) decodes
 * to the same bytes, and a damaged stream gives zlib's answer (its bytes or its error).
 */
import { describe, expect, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as Zlib from "node:zlib"
import { adler32, inflateExact, inflateStored } from "../../src/fossil/Inflate.js"

/** blob.content as Fossil stores it: big-endian size, then the zlib stream */
const stored = (data: Uint8Array, options: Zlib.ZlibOptions): Buffer => {
  const head = Buffer.alloc(4)
  head.writeUInt32BE(data.length)
  return Buffer.concat([head, Zlib.deflateSync(data, options)])
}

const strategies = [
  Zlib.constants.Z_DEFAULT_STRATEGY, Zlib.constants.Z_FILTERED, Zlib.constants.Z_HUFFMAN_ONLY,
  Zlib.constants.Z_RLE, Zlib.constants.Z_FIXED
]

const texty = fc.array(fc.constantFrom(..."aaaabbc \n{}\":,0123456789xyzé€".split("")), { maxLength: 1500 })
  .map((cs) => new Uint8Array(Buffer.from(cs.join(""), "utf8")))
/** long inputs (several blocks, long matches, far distances) from a seed: cheap to generate */
const long = fc.tuple(fc.integer(), fc.integer({ min: 20000, max: 70000 }), fc.integer({ min: 1, max: 8 })).map(([seed, n, bits]) => {
  const out = new Uint8Array(n)
  let x = seed | 1
  for (let i = 0; i < n; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    out[i] = i > 300 && (x & 7) === 0 ? out[i - 300 + (x >>> 24) % 200]! : x & ((1 << bits) - 1)
  }
  return out
})
const data = fc.oneof(texty, fc.uint8Array({ maxLength: 3000 }), long)
const options = fc.record({
  level: fc.integer({ min: 0, max: 9 }),
  strategy: fc.constantFrom(...strategies),
  memLevel: fc.integer({ min: 1, max: 9 }),
  windowBits: fc.integer({ min: 9, max: 15 })
})

const zlibAnswer = (s: Buffer): { ok: Buffer } | { error: true } => {
  try {
    return { ok: Zlib.inflateSync(s.subarray(4)) }
  } catch {
    return { error: true }
  }
}
const ours = (s: Buffer): { ok: Buffer } | { error: true } => {
  try {
    return { ok: inflateStored(s) }
  } catch {
    return { error: true }
  }
}

describe("Inflate", () => {
  it("decodes every stream zlib makes, to zlib's bytes", () => {
    fc.assert(fc.property(data, options, (d, o) => {
      const s = stored(d, o)
      expect(inflateExact(s, 4, d.length).equals(Buffer.from(d))).toBe(true)
      expect(inflateStored(s).equals(Buffer.from(d))).toBe(true)
    }), { numRuns: 300 })
  }, 30_000)

  it("gives zlib's answer for damaged streams and wrong stored sizes", () => {
    // small enough to be decoded here rather than by zlib (inflateStored's jsUpTo)
    const small = texty.filter((d) => d.length <= 1200)
    fc.assert(fc.property(small, options, fc.nat(), fc.integer({ min: 1, max: 255 }), fc.integer({ min: -3, max: 3 }),
      (d, o, at, flip, sizeDelta) => {
        const s = stored(d, o)
        const damaged = Buffer.from(s)
        const i = 4 + (at % (damaged.length - 4))
        damaged[i] = damaged[i]! ^ flip
        expect(ours(damaged)).toEqual(zlibAnswer(damaged))
        const resized = Buffer.from(s)
        resized.writeUInt32BE(Math.max(0, d.length + sizeDelta))
        expect(ours(resized)).toEqual(zlibAnswer(resized))
        const cut = s.subarray(0, 4 + (at % (s.length - 4)))
        expect(ours(cut)).toEqual(zlibAnswer(cut))
      }), { numRuns: 400 })
  }, 30_000)

  it("refuses what is not a zlib stream, so the caller falls back to zlib", () => {
    expect(() => inflateExact(Buffer.from("not a zlib stream at all"), 0, 10)).toThrow()
    const s = stored(Buffer.from("hello hello hello"), {})
    expect(() => inflateExact(s, 4, 16)).toThrow(/stored size/)
    expect(() => inflateExact(s.subarray(0, s.length - 1), 4, 17)).toThrow()
  })

  it("computes Adler-32 as zlib does, also past the modulo's range", () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 20000 }), (d) => {
      const s = Zlib.deflateSync(d, { level: 0 })
      expect(adler32(d)).toBe(s.readUInt32BE(s.length - 4))
    }), { numRuns: 100 })
    const big = new Uint8Array(100000).fill(255)
    expect(adler32(big)).toBe(Zlib.deflateSync(big).readUInt32BE(Zlib.deflateSync(big).length - 4))
  })
})
