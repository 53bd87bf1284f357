/**
 * The last `max` bytes of a stream, memory bounded whatever the child writes: whole
 * chunks are kept in a list and dropped from the front once the rest is enough, so
 * each byte is copied at most once more when the tail is read.
 */
export class ByteTail {
  private chunks: Array<Uint8Array> = []
  private kept = 0
  total = 0

  constructor(readonly max: number) {}

  push(chunk: Uint8Array): void {
    this.total += chunk.length
    if (this.max <= 0 || chunk.length === 0) return
    if (chunk.length >= this.max) {
      this.chunks = [chunk.subarray(chunk.length - this.max)]
      this.kept = this.max
      return
    }
    this.chunks.push(chunk)
    this.kept += chunk.length
    while (this.kept - this.chunks[0]!.length >= this.max) this.kept -= this.chunks.shift()!.length
  }

  bytes(): Uint8Array {
    const out = new Uint8Array(Math.min(this.kept, this.max))
    let skip = this.kept - out.length
    let at = 0
    for (const c of this.chunks) {
      const part = skip >= c.length ? c.subarray(c.length) : c.subarray(skip)
      skip = Math.max(0, skip - c.length)
      out.set(part, at)
      at += part.length
    }
    return out
  }
}
