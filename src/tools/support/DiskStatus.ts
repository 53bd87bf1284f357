// ROOT's room as status and the run page give it (src/root/DiskRoom.ts): whether the node holds new
// runs back, and whether any waits for it.

import * as Schema from "effect/Schema"
import { diskRoom, holdsBack } from "../../root/DiskRoom.js"
import { workWaits } from "../../node/HookFast.js"

export const DiskOutput = Schema.Struct({
  state: Schema.Literal("room", "low", "full", "unknown").annotations({
    description: "room: new runs start; low: ROOT's free space is below ROOT/settings/min-free-space (1 GiB unless set) and new runs are " +
      "held back; full: under 1 MiB free, held back too; unknown: the free space could not be read"
  }),
  free: Schema.Number.annotations({ description: "bytes free on ROOT's filesystem (for an unprivileged writer)" }),
  size: Schema.Number.annotations({ description: "the filesystem's size in bytes" }),
  minFree: Schema.Number.annotations({ description: "the free space below which new runs are held back (bytes)" }),
  waiting: Schema.optionalWith(Schema.Boolean.annotations({
    description: "true: a run (or stop or publish) waits after the node's cursor, held back or not yet read; it is read again as soon as there is room"
  }), { exact: true }),
  words: Schema.String
}).annotations({ description: "room on ROOT's filesystem, and whether the node holds new runs back for want of it" })
export type DiskOutput = typeof DiskOutput.Type

/** ROOT's room; with the node, whether something waits after its cursor. */
export const diskOf = (root: string, node: { readonly repository: string; readonly user: string } | undefined): DiskOutput => {
  const room = diskRoom(root)
  let waiting: boolean | undefined
  try {
    waiting = node === undefined ? undefined : workWaits(root, node.repository, node.user)
  } catch {
    waiting = undefined // the repository busy a moment: said nothing of
  }
  const words = holdsBack(room) && waiting === true ? `${room.words}. A run waits for it now.` : room.words
  return {
    state: room.state, free: room.free, size: room.size, minFree: room.minFree,
    ...(waiting !== undefined ? { waiting } : {}),
    words
  }
}

/** On a waiting run's page: why it has not started, when that is the node's room. */
export const heldForRoom = (root: string): string | undefined => {
  const room = diskRoom(root)
  return holdsBack(room) ? `This run's node holds new runs back: ${room.words}.` : undefined
}
