/**
 * The kernel names files by node id, the client by path: this table keeps the one for the other.
 * A node lives from the LOOKUP that made it to the FORGET that brings its lookups back to zero
 * (the root, node 1, always). Node ids are never reused, so a stale id names nothing rather than
 * another file. A rename moves the node and everything under it; an unlink or rmdir detaches it
 * (a file still open keeps its node, but its path names nothing any more).
 */
export interface Node {
  readonly id: bigint
  path: string
  lookups: bigint
  detached: boolean
}

export const rootId = 1n

export const childPath = (parent: string, name: string): string => (parent === "" ? name : `${parent}/${name}`)

export class Inodes {
  private readonly byId = new Map<bigint, Node>()
  private readonly byPath = new Map<string, Node>()
  private next = 2n

  constructor() {
    const root: Node = { id: rootId, path: "", lookups: 1n, detached: false }
    this.byId.set(rootId, root)
    this.byPath.set("", root)
  }

  get(id: bigint): Node | undefined {
    return this.byId.get(id)
  }

  get size(): number {
    return this.byId.size
  }

  /** a LOOKUP (or CREATE, MKDIR) answered: the node for PATH, one lookup more */
  lookedUp(path: string): Node {
    let node = this.byPath.get(path)
    if (node === undefined) {
      node = { id: this.next++, path, lookups: 0n, detached: false }
      this.byId.set(node.id, node)
      this.byPath.set(path, node)
    }
    node.lookups++
    return node
  }

  /** FORGET: the kernel dropped N lookups of the node */
  forget(id: bigint, n: bigint): void {
    const node = this.byId.get(id)
    if (node === undefined || id === rootId) return
    node.lookups -= n
    if (node.lookups > 0n) return
    this.byId.delete(id)
    if (!node.detached && this.byPath.get(node.path) === node) this.byPath.delete(node.path)
  }

  /** PATH was removed */
  detach(path: string): void {
    const node = this.byPath.get(path)
    if (node === undefined) return
    node.detached = true
    this.byPath.delete(path)
  }

  /** FROM was renamed to TO (replacing whatever TO was): FROM and everything under it move */
  move(from: string, to: string): void {
    this.detach(to)
    this.relocate(from, to, new Map())
  }

  /** FROM and TO were exchanged (RENAME_EXCHANGE) */
  exchange(a: string, b: string): void {
    const moved = new Map<string, Node>()
    this.take(a, b, moved)
    this.take(b, a, moved)
    for (const [path, node] of moved) this.byPath.set(path, node)
  }

  private relocate(from: string, to: string, moved: Map<string, Node>): void {
    this.take(from, to, moved)
    for (const [path, node] of moved) this.byPath.set(path, node)
  }

  /** takes the nodes at FROM and under it out of the path map, renamed under TO, into MOVED */
  private take(from: string, to: string, moved: Map<string, Node>): void {
    const prefix = `${from}/`
    for (const [path, node] of [...this.byPath]) {
      if (path !== from && !path.startsWith(prefix)) continue
      if (moved.get(path) === node) continue
      this.byPath.delete(path)
      node.path = to + path.slice(from.length)
      moved.set(node.path, node)
    }
  }
}
