import type { Scope } from "./FrameConnection.js"

/** The containers the server runs, by id: what containers::fuse_serve finds (docs/containers.md 9.4). */
export interface RunningContainer {
  readonly id: string
  readonly identity: string
  /** serves a containers::fuse_serve scope naming this container */
  readonly serveTree: (scope: Scope) => void
}

export class Running {
  private readonly byId = new Map<string, RunningContainer>()

  has(id: string): boolean {
    return this.byId.has(id)
  }
  enter(container: RunningContainer): void {
    this.byId.set(container.id, container)
  }
  leave(id: string): void {
    this.byId.delete(id)
  }
  find(identity: string, id: string): RunningContainer | undefined {
    const c = this.byId.get(id)
    return c !== undefined && c.identity === identity ? c : undefined
  }
  mint(random: () => string): string {
    for (;;) {
      const id = random()
      // 32 random bytes never repeat in practice; the check makes "unique among the running" a fact
      if (!this.byId.has(id)) return id
    }
  }
  get size(): number {
    return this.byId.size
  }
}
