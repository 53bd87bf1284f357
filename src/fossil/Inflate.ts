/**
 * A zlib (RFC 1950/1951) decoder for the small streams of blob.content.
 *
 * Why not zlib.inflateSync alone: it builds a native stream object per call, a fixed
 * ~10 µs, more than inflating a forum post of a few hundred bytes here; reading
 * 10,000 posts spent most of its time there. This decoder writes straight into an
 * output of the size Fossil stored in front of the stream, checks the Adler-32 of
 * what it produced, and throws on anything unexpected; `inflateStored` then leaves
 * the stream to node's zlib, so the result is zlib's, and so is any error. Larger
 * outputs go to zlib directly (see jsUpTo).
 *
 * Huffman decoding: a 9-bit lookup table per code, built for the symbols the block
 * uses, and code by code (as zlib's puff.c) for the rare longer codes; the tables are
 * reused between calls, so nothing is allocated but the output.
 */
import * as Zlib from "node:zlib"

class InflateError extends Error {}

/**
 * A Huffman code: a lookup table indexed by the next `bits` input bits (LSB first, as
 * deflate packs them; entry = symbol << 4 | code length) for the codes of at most
 * `primary` bits, where nearly every symbol falls; longer codes (entry 0) are decoded
 * bit by bit from `count` and `symbol` (canonical order), as zlib's puff.c does.
 * A small table is quicker to build than a full 2^15 one, and a post's streams
 * each build their own.
 */
interface Table {
  readonly entries: Int32Array
  bits: number
  readonly count: Uint16Array
  readonly symbol: Uint16Array
}
const primary = 9

const reversed = new Uint16Array(1 << 15)
for (let i = 1; i < 1 << 15; i++) reversed[i] = (reversed[i >> 1]! >> 1) | ((i & 1) << 14)

const next = new Uint16Array(16)
const offs = new Uint16Array(16)

/**
 * Fills t from the k symbols that have a code (syms ascending, lens their code
 * lengths, 1 to 15): symbols without a code cost nothing, and a post's literal
 * alphabet uses few of its 286. Throws when the lengths over-subscribe, or leave the
 * code incomplete where zlib refuses that (`strict`: any but a lone 1-bit code).
 */
const build = (t: Table, syms: Uint16Array, lens: Uint8Array, k: number, strict = true): void => {
  const count = t.count
  count.fill(0)
  let max = 0
  for (let i = 0; i < k; i++) {
    const len = lens[i]!
    count[len] = count[len]! + 1
    if (len > max) max = len
  }
  let left = 1
  let code = 0
  offs[1] = 0
  for (let len = 1; len < 16; len++) {
    left = (left << 1) - count[len]!
    if (left < 0) throw new InflateError("over-subscribed Huffman code")
    code = (code + count[len - 1]!) << 1
    next[len] = code
    if (len < 15) offs[len + 1] = offs[len]! + count[len]!
  }
  if (strict && left > 0 && max > 0 && (t === dynLen || max !== 1)) throw new InflateError("incomplete Huffman code")
  const bits = max === 0 ? 1 : Math.min(max, primary)
  const size = 1 << bits
  const entries = t.entries
  entries.fill(0, 0, size)
  const symbol = t.symbol
  for (let i = 0; i < k; i++) {
    const sym = syms[i]!
    const len = lens[i]!
    symbol[offs[len]!] = sym
    offs[len] = offs[len]! + 1
    if (len > bits) continue
    const c = next[len]!
    next[len] = c + 1
    const entry = (sym << 4) | len
    for (let j = reversed[c]! >> (15 - len); j < size; j += 1 << len) entries[j] = entry
  }
  t.bits = bits
}

/** the symbols with a code, from a full array of code lengths */
const buildFromLengths = (t: Table, lengths: ArrayLike<number>): void => {
  const syms = new Uint16Array(lengths.length)
  const lens = new Uint8Array(lengths.length)
  let k = 0
  for (let sym = 0; sym < lengths.length; sym++) {
    if (lengths[sym] === 0) continue
    syms[k] = sym
    lens[k++] = lengths[sym]!
  }
  build(t, syms, lens, k, false)
}

const lengthBase = Uint16Array.from([3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258])
const lengthExtra = Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0])
const distBase = Uint16Array.from([1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577])
const distExtra = Uint8Array.from([0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13])
const codeLengthOrder = Uint8Array.from([16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15])

const table = (): Table => ({ entries: new Int32Array(1 << primary), bits: 0, count: new Uint16Array(16), symbol: new Uint16Array(288) })
const fixedLit = table()
const fixedDist = table()
{
  const l = new Uint8Array(288)
  l.fill(8, 0, 144)
  l.fill(9, 144, 256)
  l.fill(7, 256, 280)
  l.fill(8, 280, 288)
  buildFromLengths(fixedLit, l)
  buildFromLengths(fixedDist, new Uint8Array(30).fill(5))
}

// scratch for dynamic blocks, reused: decoding is synchronous
const dynLit = table()
const dynDist = table()
const dynLen = table()
const lenSyms = new Uint16Array(19)
const lenLens = new Uint8Array(19)
const litSyms = new Uint16Array(288)
const litLens = new Uint8Array(288)
const distSyms = new Uint16Array(30)
const distLens = new Uint8Array(30)

/**
 * A code longer than the table, decoded bit by bit from `bits` (the next input bits,
 * at least 15 of them): canonical order, as puff.c. Returns symbol << 4 | length, or
 * 0 when no code matches.
 */
const slowDecode = (t: Table, bits: number): number => {
  const count = t.count
  let code = 0
  let first = 0
  let index = 0
  for (let len = 1; len < 16; len++) {
    code |= bits & 1
    bits >>>= 1
    const c = count[len]!
    if (code - c < first) return (t.symbol[index + (code - first)]! << 4) | len
    index += c
    first = (first + c) << 1
    code <<= 1
  }
  return 0
}

/**
 * Inflates a zlib stream whose output is exactly `size` bytes. Throws when the stream
 * is not one (bad header, bad code, wrong size, bad Adler-32): callers fall back to zlib.
 *
 * One function with its state in locals (no closures over it): V8 keeps them in
 * registers. The bit buffer holds at most 30 bits (it is filled only below 15, by
 * at most two bytes), so it stays a small integer. Bytes read past the end of the
 * input count as zeros in `over`, and using any of them is an error.
 */
export const inflateExact = (input: Uint8Array, start: number, size: number, end: number = input.length): Buffer => {
  if (end - start < 6) throw new InflateError("stream too short")
  const cmf = input[start]!
  const flg = input[start + 1]!
  if ((cmf & 0x0f) !== 8 || (cmf >> 4) > 7 || ((cmf << 8) | flg) % 31 !== 0 || (flg & 0x20) !== 0) {
    throw new InflateError("not a zlib stream")
  }
  const out = Buffer.allocUnsafe(size)
  let at = start + 2
  let o = 0
  let bitbuf = 0
  let bitcnt = 0
  let over = 0
  let last = 0
  do {
    if (bitcnt < 15) {
      if (at + 1 < end) {
        bitbuf |= (input[at]! | (input[at + 1]! << 8)) << bitcnt
        at += 2
        bitcnt += 16
      } else {
        while (bitcnt < 15) {
          if (at < end) bitbuf |= input[at++]! << bitcnt
          else over++
          bitcnt += 8
        }
      }
    }
    last = bitbuf & 1
    const type = (bitbuf >>> 1) & 3
    bitbuf >>>= 3
    bitcnt -= 3
    let lit: Table
    let dist: Table
    if (type === 0) {
      // to the byte boundary: whole bytes still in the buffer go back to the input
      at -= (bitcnt >> 3) - over
      if (at > end) throw new InflateError("input ends early")
      over = 0
      bitbuf = 0
      bitcnt = 0
      if (at + 4 > end) throw new InflateError("input ends early")
      const len = input[at]! | (input[at + 1]! << 8)
      const nlen = input[at + 2]! | (input[at + 3]! << 8)
      at += 4
      if (len !== (~nlen & 0xffff)) throw new InflateError("bad stored block")
      if (at + len > end || o + len > size) throw new InflateError("stored block out of range")
      out.set(input.subarray(at, at + len), o)
      at += len
      o += len
      continue
    } else if (type === 1) {
      lit = fixedLit
      dist = fixedDist
    } else if (type === 2) {
      // 14 bits of counts, then 3 bits per code length code
      if (bitcnt < 15) {
        if (at + 1 < end) {
          bitbuf |= (input[at]! | (input[at + 1]! << 8)) << bitcnt
          at += 2
          bitcnt += 16
        } else {
          while (bitcnt < 15) {
            if (at < end) bitbuf |= input[at++]! << bitcnt
            else over++
            bitcnt += 8
          }
        }
      }
      const nlen = (bitbuf & 31) + 257
      const ndist = ((bitbuf >>> 5) & 31) + 1
      const ncode = ((bitbuf >>> 10) & 15) + 4
      bitbuf >>>= 14
      bitcnt -= 14
      if (nlen > 286 || ndist > 30) throw new InflateError("bad counts")
      let k = 0
      for (let i = 0; i < ncode; i++) {
        if (bitcnt < 15) {
          if (at + 1 < end) {
            bitbuf |= (input[at]! | (input[at + 1]! << 8)) << bitcnt
            at += 2
            bitcnt += 16
          } else {
            while (bitcnt < 15) {
              if (at < end) bitbuf |= input[at++]! << bitcnt
              else over++
              bitcnt += 8
            }
          }
        }
        const len = bitbuf & 7
        bitbuf >>>= 3
        bitcnt -= 3
        if (len === 0) continue
        // they come in a fixed order of symbols: keep the few there are sorted
        const sym = codeLengthOrder[i]!
        let j = k++
        while (j > 0 && lenSyms[j - 1]! > sym) {
          lenSyms[j] = lenSyms[j - 1]!
          lenLens[j] = lenLens[j - 1]!
          j--
        }
        lenSyms[j] = sym
        lenLens[j] = len
      }
      build(dynLen, lenSyms, lenLens, k)
      // code length codes are at most 7 bits: the table holds them all
      const lenEntries = dynLen.entries
      const lenMask = (1 << dynLen.bits) - 1
      // literal/length then distance code lengths, one sequence (a repeat may cross over)
      const total = nlen + ndist
      let nlit = 0
      let ndst = 0
      let prev = -1
      let eob = false
      let i = 0
      while (i < total) {
        if (bitcnt < 15) {
          if (at + 1 < end) {
            bitbuf |= (input[at]! | (input[at + 1]! << 8)) << bitcnt
            at += 2
            bitcnt += 16
          } else {
            while (bitcnt < 15) {
              if (at < end) bitbuf |= input[at++]! << bitcnt
              else over++
              bitcnt += 8
            }
          }
        }
        const entry = lenEntries[bitbuf & lenMask]!
        if (entry === 0) throw new InflateError("bad code length code")
        bitbuf >>>= entry & 15
        bitcnt -= entry & 15
        const sym = entry >> 4
        let len: number
        let times: number
        if (sym < 16) {
          len = sym
          times = 1
        } else if (sym === 16) {
          if (prev < 0) throw new InflateError("repeat with no first length")
          len = prev
          times = 3 + (bitbuf & 3)
          bitbuf >>>= 2
          bitcnt -= 2
        } else if (sym === 17) {
          len = 0
          times = 3 + (bitbuf & 7)
          bitbuf >>>= 3
          bitcnt -= 3
        } else {
          len = 0
          times = 11 + (bitbuf & 127)
          bitbuf >>>= 7
          bitcnt -= 7
        }
        prev = len
        if (i + times > total) throw new InflateError("too many lengths")
        if (len === 0) {
          i += times
          continue
        }
        for (; times > 0; times--, i++) {
          if (i < nlen) {
            if (i === 256) eob = true
            litSyms[nlit] = i
            litLens[nlit++] = len
          } else {
            distSyms[ndst] = i - nlen
            distLens[ndst++] = len
          }
        }
      }
      if (!eob) throw new InflateError("no end-of-block code")
      build(dynLit, litSyms, litLens, nlit)
      build(dynDist, distSyms, distLens, ndst)
      lit = dynLit
      dist = dynDist
    } else {
      throw new InflateError("bad block type")
    }
    const litEntries = lit.entries
    const litMask = (1 << lit.bits) - 1
    const distEntries = dist.entries
    const distMask = (1 << dist.bits) - 1
    for (;;) {
      if (bitcnt < 15) {
        // two bytes at a time while they last: at most 30 bits, still a small integer
        if (at + 1 < end) {
          bitbuf |= (input[at]! | (input[at + 1]! << 8)) << bitcnt
          at += 2
          bitcnt += 16
        } else {
          while (bitcnt < 15) {
            if (at < end) bitbuf |= input[at++]! << bitcnt
            else over++
            bitcnt += 8
          }
        }
      }
      let entry = litEntries[bitbuf & litMask]!
      if (entry === 0) {
        entry = slowDecode(lit, bitbuf)
        if (entry === 0) throw new InflateError("bad literal/length code")
      }
      bitbuf >>>= entry & 15
      bitcnt -= entry & 15
      let sym = entry >> 4
      if (sym < 256) {
        if (o >= size) throw new InflateError("output longer than stored size")
        out[o++] = sym
        continue
      }
      if (sym === 256) break
      sym -= 257
      if (sym >= 29) throw new InflateError("bad length code")
      // up to 5 extra bits: the 15 bits filled cover them when the code was short; refill otherwise
      if (bitcnt < 15) {
        if (at + 1 < end) {
          bitbuf |= (input[at]! | (input[at + 1]! << 8)) << bitcnt
          at += 2
          bitcnt += 16
        } else {
          while (bitcnt < 15) {
            if (at < end) bitbuf |= input[at++]! << bitcnt
            else over++
            bitcnt += 8
          }
        }
      }
      const lextra = lengthExtra[sym]!
      const len = lengthBase[sym]! + (bitbuf & ((1 << lextra) - 1))
      bitbuf >>>= lextra
      bitcnt -= lextra
      if (bitcnt < 15) {
        if (at + 1 < end) {
          bitbuf |= (input[at]! | (input[at + 1]! << 8)) << bitcnt
          at += 2
          bitcnt += 16
        } else {
          while (bitcnt < 15) {
            if (at < end) bitbuf |= input[at++]! << bitcnt
            else over++
            bitcnt += 8
          }
        }
      }
      let dentry = distEntries[bitbuf & distMask]!
      if (dentry === 0) {
        dentry = slowDecode(dist, bitbuf)
        if (dentry === 0) throw new InflateError("bad distance code")
      }
      bitbuf >>>= dentry & 15
      bitcnt -= dentry & 15
      const dsym = dentry >> 4
      if (dsym >= 30) throw new InflateError("bad distance code")
      if (bitcnt < 15) {
        if (at + 1 < end) {
          bitbuf |= (input[at]! | (input[at + 1]! << 8)) << bitcnt
          at += 2
          bitcnt += 16
        } else {
          while (bitcnt < 15) {
            if (at < end) bitbuf |= input[at++]! << bitcnt
            else over++
            bitcnt += 8
          }
        }
      }
      const dextra = distExtra[dsym]!
      const d = distBase[dsym]! + (bitbuf & ((1 << dextra) - 1))
      bitbuf >>>= dextra
      bitcnt -= dextra
      if (d > o) throw new InflateError("distance too far back")
      if (o + len > size) throw new InflateError("output longer than stored size")
      let from = o - d
      if (len > 32 && d >= len) {
        out.copyWithin(o, from, from + len)
        o += len
      } else {
        const stop = o + len
        while (o < stop) out[o++] = out[from++]!
      }
    }
    if (over > 0 && bitcnt < 8 * over) throw new InflateError("input ends early")
  } while (last === 0)
  if (over > 0 && bitcnt < 8 * over) throw new InflateError("input ends early")
  if (o !== size) throw new InflateError("output shorter than stored size")
  // the Adler-32 starts at the next byte boundary: whole bytes still in the buffer go back
  at -= (bitcnt >> 3) - over
  if (at + 4 > end) throw new InflateError("no Adler-32")
  const expected = ((input[at]! << 24) | (input[at + 1]! << 16) | (input[at + 2]! << 8) | input[at + 3]!) >>> 0
  if (adler32(out) !== expected) throw new InflateError("Adler-32 mismatch")
  return out
}

export const adler32 = (data: Uint8Array): number => {
  let a = 1
  let b = 0
  const n = data.length
  let i = 0
  while (i < n) {
    // 3800 keeps b below 2^31 before the modulo (zlib's NMAX is 5552 for unsigned 32 bits)
    const stop = Math.min(i + 3800, n)
    for (; i < stop; i++) {
      a += data[i]!
      b += a
    }
    a %= 65521
    b %= 65521
  }
  return ((b << 16) | a) >>> 0
}

/**
 * Up to this many bytes out, decoding here is quicker than node's zlib (measured:
 * 300 bytes 7 µs vs 12 µs, 1000 bytes 13 µs vs 14 µs, 3000 bytes 29 µs vs 16 µs):
 * zlib's cost is mostly a fixed one per call, this decoder's grows with the output.
 */
const jsUpTo = 1200

/**
 * blob.content as Fossil stores it: a 4-byte big-endian uncompressed size, then a
 * zlib stream (its first `length` bytes). Small ones are decoded here, large or
 * unexpected ones by node's zlib.
 */
export const inflateStored = (stored: Uint8Array, length: number = stored.length): Buffer => {
  if (length >= 4) {
    const size = ((stored[0]! << 24) | (stored[1]! << 16) | (stored[2]! << 8) | stored[3]!) >>> 0
    if (size <= jsUpTo) {
      try {
        return inflateExact(stored, 4, size, length)
      } catch {
        // fall through: zlib decides, and its error is the one reported
      }
    }
  }
  return Zlib.inflateSync(Buffer.from(stored.buffer, stored.byteOffset + 4, length - 4))
}
