import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Layer from "effect/Layer"
import * as Os from "node:os"
import * as Path from "node:path"
import { Hosts } from "../../../services/Hosts.js"
import { cloneUsers } from "../../root/CloneUsers.js"

/** The Repository and Receipts of one repository file on this host, as the host's layers make them. */
export const localLayers = (path: string) => Layer.unwrapEffect(Effect.map(Hosts, (hosts) => hosts.record(path)))

/**
 * The clone's users of refusal 4, read from the record as a node reads them, with its cache in a
 * directory of this call's own (a tool writes nothing of the node's).
 */
export const cloneUsersNow = Effect.acquireUseRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-clone-users-"))),
  (dir) => cloneUsers(dir),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)
