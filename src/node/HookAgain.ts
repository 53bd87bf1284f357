// The hook's retrier (issue 37, item 6): `ocx2-hook --again [--root ROOT] --log LOG REPOSITORY`. A
// node without a supervisor has no process that outlives a receipt, so a round that failed or held
// its runs back for want of room on ROOT (DiskRoom.ts) would leave them until the next receipt. The
// hook then starts this, detached: it runs the hook's round again as RoundAgain.ts plans it (at
// once when ROOT has room again, else with backoff) until no message waits after the cursor, or
// until a supervisor runs for the node (which tries again itself), then ends. One a node: it holds
// an abstract Unix socket named after the node's cursor file, which needs no room on any disk.

import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as Net from "node:net"
import { RoundsAgain } from "./RoundAgain.js"

export interface AgainNode {
  readonly root: string
  readonly repository: string
  readonly user: string
  /** the node's cursor file: the retrier's name */
  readonly cursorFile: string
}

export interface AgainDeps {
  /** the node the hook's arguments name, or undefined */
  readonly nodeOf: (argv: ReadonlyArray<string>, program: string | undefined) => AgainNode | undefined
  /** whether a message the round acts on still waits after the cursor */
  readonly waits: (node: AgainNode) => boolean
  /** whether ROOT is short of room (the round would hold its runs back) */
  readonly short: (node: AgainNode) => boolean
  /** whether the node's supervisor runs */
  readonly supervised: (node: AgainNode) => boolean
  /** one call of the hook, its round included */
  readonly hook: (argv: ReadonlyArray<string>, program: string | undefined, options: { readonly again: boolean }) => Promise<unknown>
}

/** Started by the hook after a round that left a message waiting: what it says in its log. */
export const startAgain = (argv: ReadonlyArray<string>, program: string | undefined): string => {
  if (program === undefined) return "a message still waits after the cursor, and no program to try the round again: the next receipt does"
  const child = ChildProcess.spawn(process.execPath, [program, "--again", ...argv], { detached: true, stdio: "ignore", cwd: "/" })
  child.on("error", () => {})
  child.unref()
  return `a message still waits after the cursor: ocx2-hook --again (pid ${child.pid ?? "?"}) tries the round again, ` +
    "at once when ROOT has room again, else after 1 s, 2 s, ... up to 30 s, until none waits"
}

/** The retrier's name: one a node on the host. */
const againName = (node: AgainNode): string =>
  `\0ocx2-again-${Crypto.createHash("sha1").update(node.cursorFile).digest("hex").slice(0, 20)}`

/** Holds the name, or undefined when another retrier holds it. */
const holdName = (name: string): Promise<Net.Server | undefined> =>
  new Promise((resolve) => {
    const server = Net.createServer((socket) => socket.destroy())
    server.once("error", () => resolve(undefined))
    server.listen({ path: name }, () => resolve(server))
  })

/** The retrier's whole life. */
export const againMain = async (argv: ReadonlyArray<string>, program: string | undefined, deps: AgainDeps): Promise<void> => {
  const node = deps.nodeOf(argv, program)
  if (node === undefined) return
  const held = await holdName(againName(node))
  if (held === undefined) return // another one tries already
  try {
    await new Promise<void>((done) => {
      const again: RoundsAgain = new RoundsAgain({
        waits: () => !deps.supervised(node) && deps.waits(node),
        short: () => deps.short(node),
        run: () => void deps.hook(argv, program, { again: true }).catch(() => undefined).finally(() => again.roundDone()),
        idle: done
      })
      // the round that started it has just left the message waiting: its first try follows the first backoff
      again.roundDone()
    })
  } finally {
    held.close()
  }
}
