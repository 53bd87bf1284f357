/**
 * Fossil's delta format (delta.c): a header "SIZE\n", then commands
 * "N@OFFSET," (copy N bytes of the source from OFFSET), "N:BYTES" (N literal bytes)
 * and "CKSUM;" (end). Integers are base-64 in Fossil's own digit order.
 */
const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~"
const value = new Int8Array(128).fill(-1)
for (let i = 0; i < digits.length; i++) value[digits.charCodeAt(i)] = i

export class DeltaError extends Error {}

export const applyDelta = (source: Uint8Array, delta: Uint8Array): Buffer => {
  let at = 0
  const int = (): number => {
    let n = 0
    let d: number
    const start = at
    while (at < delta.length && (d = value[delta[at]!] ?? -1) >= 0) {
      n = n * 64 + d
      at++
    }
    if (at === start) throw new DeltaError(`delta: number expected at byte ${start}`)
    return n
  }
  const size = int()
  if (delta[at++] !== 0x0a) throw new DeltaError("delta: bad header")
  const out = Buffer.alloc(size)
  const src = Buffer.from(source.buffer, source.byteOffset, source.byteLength)
  const del = Buffer.from(delta.buffer, delta.byteOffset, delta.byteLength)
  let o = 0
  for (;;) {
    if (at >= delta.length) throw new DeltaError("delta: unterminated")
    const n = int()
    const op = delta[at++]
    if (op === 0x40) { // '@': copy from the source
      const from = int()
      if (delta[at++] !== 0x2c) throw new DeltaError("delta: ',' expected after a copy")
      if (from + n > src.length || o + n > size) throw new DeltaError("delta: copy out of range")
      src.copy(out, o, from, from + n)
      o += n
    } else if (op === 0x3a) { // ':': literal bytes
      if (at + n > delta.length || o + n > size) throw new DeltaError("delta: literal out of range")
      del.copy(out, o, at, at + n)
      o += n
      at += n
    } else if (op === 0x3b) { // ';': end (the checksum is not checked: the caller re-hashes)
      if (o !== size) throw new DeltaError(`delta: produced ${o} bytes, header says ${size}`)
      return out
    } else {
      throw new DeltaError(`delta: unknown operator ${String(op)}`)
    }
  }
}
