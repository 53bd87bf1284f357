/**
 * The requests of one FUSE connection as fusemountfd copies them to its stdout, one after the
 * other: each starts with its own length (the kernel's in-header), so the stream is cut by it.
 */
export class Requests {
  private pending: Array<Buffer> = []
  private held = 0

  constructor(private readonly onRequest: (request: Buffer) => void) {}

  push(chunk: Buffer): void {
    this.pending.push(chunk)
    this.held += chunk.length
    for (;;) {
      if (this.held < 4) return
      if (this.pending[0]!.length < 4) this.join()
      const length = this.pending[0]!.readUInt32LE(0)
      if (length < 4 || this.held < length) return
      if (this.pending[0]!.length < length) this.join()
      const first = this.pending[0]!
      const request = first.subarray(0, length)
      if (first.length === length) this.pending.shift()
      else this.pending[0] = first.subarray(length)
      this.held -= length
      this.onRequest(request)
    }
  }

  private join(): void {
    this.pending = [Buffer.concat(this.pending)]
  }
}
