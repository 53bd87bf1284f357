// 2.3 and 2.4: capability letters and which messages count.

/** A sender as the server's receipt names it, with Fossil's effective capabilities (fullcap). */
export interface Sender {
  readonly login: string
  readonly capabilities: string
}

export const isAdminOrSetup = (capabilities: string | undefined): boolean =>
  capabilities !== undefined && (capabilities.includes("a") || capabilities.includes("s"))

/** `R`: may send runs within ROOT/settings/capability-R.json */
export const holdsR = (capabilities: string | undefined): boolean =>
  capabilities !== undefined && capabilities.includes("R")

/** The kinds ocx2 reads; every other kind counts never (it is for another reader). */
export type ReplyKind = "started" | "ended" | "stop" | "publish"

/**
 * Whether a reply counts (2.4): `started` and `ended` from the run's `to`, `stop` and
 * `publish` from admin or setup. An unknown sender counts for nothing.
 */
export const replyCounts = (kind: ReplyKind, sender: Sender | undefined, runTo: string): boolean => {
  if (sender === undefined) return false
  switch (kind) {
    case "started":
    case "ended":
      return sender.login === runTo
    case "stop":
    case "publish":
      return isAdminOrSetup(sender.capabilities)
  }
}

/** Server order (2.0): `blob.rcvid`, then `blob.rid`. */
export interface ServerOrder {
  readonly rcvid: number
  readonly rid: number
}

export const compareServerOrder = (a: ServerOrder, b: ServerOrder): number =>
  a.rcvid !== b.rcvid ? a.rcvid - b.rcvid : a.rid - b.rid
