import { describe, expect, it } from "vitest"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { Duration, DurationText, parseDuration, parseSize, Size, SizeText, WholeNumber } from "../../src/protocol/Sizes.js"

describe("sizes (2.9)", () => {
  it.each([
    ["0", 0],
    ["1048576", 1048576],
    ["64K", 65536],
    ["1M", 1048576],
    ["2G", 2 * 1024 ** 3],
    ["1024G", 1024 ** 4]
  ])("%s is %d bytes", (text, bytes) => {
    expect(parseSize(text)).toEqual(Either.right(bytes))
  })

  it.each(["", "K", "2g", "64k", "1.5K", "1 K", " 1K", "1K ", "-1", "+1", "1KB", "1T", "01K", "0x10", "1e3", "１K"])(
    "%j is no size, and the message says what a size is",
    (text) => {
      const result = parseSize(text)
      expect(Either.isLeft(result)).toBe(true)
      expect(Either.getLeft(result).pipe((o) => o._tag === "Some" && o.value)).toContain("is not a whole number of bytes")
    }
  )

  it("a size past what a number holds exactly is refused as too large", () => {
    expect(parseSize("99999999999G")).toEqual(Either.left(`"99999999999G" is too large`))
  })

  it("the Size schema decodes to bytes and encodes the shortest spelling", () => {
    expect(Schema.decodeSync(Size)("2G")).toBe(2147483648)
    expect(Schema.encodeSync(Size)(65536)).toBe("64K")
    expect(Schema.encodeSync(Size)(1000)).toBe("1000")
    expect(Either.isLeft(Schema.decodeUnknownEither(Size)("2 G"))).toBe(true)
    expect(Either.isLeft(Schema.decodeUnknownEither(SizeText)("2g"))).toBe(true)
    expect(Schema.decodeSync(SizeText)("2G")).toBe("2G")
  })
})

describe("durations (2.9 wall)", () => {
  it.each([
    ["0s", 0],
    ["30s", 30],
    ["2m", 120],
    ["8h", 28800],
    ["1d", 86400]
  ])("%s is %d seconds", (text, seconds) => {
    expect(parseDuration(text)).toEqual(Either.right(seconds))
  })

  it.each(["1", "1H", "1.5h", "-1s", "1 s", "01s", "1w", "h", "1hm", "1ms"])("%j is no duration", (text) => {
    expect(parseDuration(text)).toEqual(Either.left(`${JSON.stringify(text)} is not a whole number and s, m, h or d`))
  })

  it("the Duration schema decodes to seconds and encodes the shortest spelling", () => {
    expect(Schema.decodeSync(Duration)("2h")).toBe(7200)
    expect(Schema.encodeSync(Duration)(7200)).toBe("2h")
    expect(Schema.encodeSync(Duration)(90)).toBe("90s")
    expect(Schema.decodeSync(DurationText)("90s")).toBe("90s")
  })
})

describe("cpu: whole seconds, a JSON integer", () => {
  it("takes 0 and 3600, refuses fractions, negatives and text", () => {
    expect(Schema.decodeUnknownSync(WholeNumber)(3600)).toBe(3600)
    expect(Schema.decodeUnknownSync(WholeNumber)(0)).toBe(0)
    for (const bad of [1.5, -1, "3600", Number.NaN]) {
      expect(Either.isLeft(Schema.decodeUnknownEither(WholeNumber)(bad))).toBe(true)
    }
  })
})
