/**
 * What arrives on one stream (a scope's main stream, a channel), in order, until its end.
 * A consumer either takes items one by one or listens; items that came before are given first.
 */
export class StreamInbox<T> {
  private readonly items: Array<T> = []
  private ended = false
  private waiter: ((item: T | undefined) => void) | undefined
  private listener: ((item: T) => void) | undefined
  private endListener: (() => void) | undefined

  push(item: T): void {
    if (this.ended) return
    if (this.listener !== undefined) return this.listener(item)
    if (this.waiter !== undefined) {
      const waiter = this.waiter
      this.waiter = undefined
      return waiter(item)
    }
    this.items.push(item)
  }

  end(): void {
    if (this.ended) return
    this.ended = true
    if (this.waiter !== undefined) {
      const waiter = this.waiter
      this.waiter = undefined
      waiter(undefined)
    }
    if (this.listener !== undefined && this.items.length === 0) this.endListener?.()
  }

  get isEnded(): boolean {
    return this.ended && this.items.length === 0
  }

  /** the next item, or undefined once the stream ended */
  take(): Promise<T | undefined> {
    const item = this.items.shift()
    if (item !== undefined) return Promise.resolve(item)
    if (this.ended) return Promise.resolve(undefined)
    return new Promise((resolve) => (this.waiter = resolve))
  }

  /** every item from now on (those waiting first), then onEnd once */
  listen(onItem: (item: T) => void, onEnd: () => void): void {
    this.listener = onItem
    this.endListener = onEnd
    while (this.items.length > 0) onItem(this.items.shift()!)
    if (this.ended) onEnd()
  }
}
