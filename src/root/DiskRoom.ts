// Room on ROOT's filesystem (issue 37, item 6). A run handed to a watcher on a full disk fails half
// way: its lock, outbox or workspace cannot be written, and it gets neither `started` nor an answer.
// So below ROOT/settings/min-free-space (1 GiB unless set) the node's rounds hand no new run to a
// watcher: the cursor stays before the first run held back, and the run is decided the moment the
// room is back (src/node/RoundAgain.ts looks again). Runs already in care are not touched. One
// statfs(2) a look: the hook, which asks on every round it loads, stays cheap. No Effect here: the
// hook's bundle (src/node/HookFast.ts) and status read it too.

import * as Fs from "node:fs"
import * as Path from "node:path"
import { releasePaths } from "../release/ReleasePaths.js"

export const defaultMinFreeSpace = 1024 * 1024 * 1024

/** Below this much free, ROOT is said to be full rather than low: no run's files would fit. */
const fullBelow = 1024 * 1024

export const minFreeSpaceFile = (root: string): string => Path.join(releasePaths(root).settings, "min-free-space")

const units: Readonly<Record<string, number>> = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 }

/** A number of bytes, or with a binary unit (512M, 2G, 2GiB); 0 holds nothing back. Undefined when it is neither. */
export const parseBytes = (text: string): number | undefined => {
  const m = /^(\d+)\s*(?:([kmgt])(?:i?b)?)?$/i.exec(text.trim())
  if (m === null) return undefined
  const n = Number(m[1]) * units[(m[2] ?? "").toLowerCase()]!
  return Number.isSafeInteger(n) ? n : undefined
}

/** The setting, and what was wrong with the file when it could not be used (the default is then). */
export const minFreeSpace = (root: string): { readonly bytes: number; readonly problem?: string } => {
  const file = minFreeSpaceFile(root)
  let text: string
  try {
    text = Fs.readFileSync(file, "utf8").trim()
  } catch {
    return { bytes: defaultMinFreeSpace } // not set
  }
  const bytes = parseBytes(text)
  return bytes !== undefined
    ? { bytes }
    : { bytes: defaultMinFreeSpace, problem: `${file} holds ${JSON.stringify(text.slice(0, 40))}, not a number of bytes: ${defaultMinFreeSpace} is used` }
}

export interface DiskRoom {
  /** room: new runs start; low: below the setting; full: below 1 MiB; unknown: statfs failed (nothing is held back) */
  readonly state: "room" | "low" | "full" | "unknown"
  /** bytes an unprivileged writer may still use on ROOT's filesystem */
  readonly free: number
  readonly size: number
  readonly minFree: number
  readonly words: string
}

const sized = (bytes: number): string => {
  for (const [unit, n] of [["GiB", 1024 ** 3], ["MiB", 1024 ** 2], ["KiB", 1024]] as const) {
    if (bytes >= n) return `${(bytes / n).toFixed(bytes % n === 0 ? 0 : 1)} ${unit}`
  }
  return `${bytes} bytes`
}

/** ROOT's room now: one statfs. */
export const diskRoom = (root: string): DiskRoom => {
  const { bytes: minFree, problem } = minFreeSpace(root)
  const setting = `${minFreeSpaceFile(root)}${problem !== undefined ? ` (${problem})` : ""}`
  let free: number
  let size: number
  try {
    const s = Fs.statfsSync(root)
    free = s.bavail * s.bsize
    size = s.blocks * s.bsize
  } catch (e) {
    return { state: "unknown", free: 0, size: 0, minFree, words: `the free space of ${root} cannot be read (${(e as Error).message}): nothing is held back` }
  }
  const state = free >= minFree ? "room" : free < fullBelow ? "full" : "low"
  const words = state === "room"
    ? `${sized(free)} free of ${sized(size)} on ${root}, at least the ${sized(minFree)} of ${setting}: new runs start`
    : `${root} is ${state === "full" ? "full" : "low on space"}: ${sized(free)} free of ${sized(size)}, below the ${sized(minFree)} of ${setting}; ` +
      "new runs are held back (not started, not refused) until there is room, and are then started without a new post; runs already in care go on"
  return { state, free, size, minFree, words }
}

/** Whether a round holds new runs back in this room. */
export const holdsBack = (room: DiskRoom): boolean => room.state === "low" || room.state === "full"

interface Ordered {
  readonly rcvid: number
  readonly rid: number
}

/**
 * What a round read, cut before its first run when the room is short: the messages and arrivals
 * before that run are acted on as ever (a stop reaches a running watcher, a session is given its
 * posts), and the cursor stays just before the run, so the next round reads it again. The run held
 * back, or undefined when nothing was.
 */
export const holdStartsBack = <M extends Ordered & { readonly kind: string; readonly run: string }, A extends { readonly order: Ordered }, C extends Ordered>(
  room: DiskRoom,
  found: { readonly messages: ReadonlyArray<M>; readonly arrivals: ReadonlyArray<A>; readonly cursor: C }
): { readonly messages: ReadonlyArray<M>; readonly arrivals: ReadonlyArray<A>; readonly cursor: Ordered; readonly held: string | undefined } => {
  const first = holdsBack(room) ? found.messages.find((m) => m.kind === "run") : undefined
  if (first === undefined) return { ...found, held: undefined }
  const before = (o: Ordered) => o.rcvid < first.rcvid || (o.rcvid === first.rcvid && o.rid < first.rid)
  return {
    messages: found.messages.filter(before),
    arrivals: found.arrivals.filter((a) => before(a.order)),
    // the reader's order is (rcvid, rid): after this, the run is the first thing read
    cursor: { rcvid: first.rcvid, rid: first.rid - 1 },
    held: first.run
  }
}
