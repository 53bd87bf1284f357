// The node on a clone's host, assembled (a composition module: docs/architecture.md, "Layout"):
// the clone, whose writes are pushed to the server as the node user, the server's receipts asked
// over HTTP as that user, ROOT/care, and the sandbox with the node's measure of the host.
import * as Layer from "effect/Layer"
import * as Path from "node:path"
import { releasePaths } from "../src/release/ReleasePaths.js"
import type { ClonePlace, RecordOptions } from "../services/Hosts.js"
import * as BwrapSandbox from "./BwrapSandbox.js"
import * as CareDirectoryFs from "./CareDirectoryFs.js"
import * as ClonePullRepository from "./ClonePullRepository.js"
import * as FossilRepository from "./FossilRepository.js"
import * as RemoteReceipts from "./RemoteReceipts.js"

const repositoryConfig = (place: ClonePlace, options: RecordOptions): FossilRepository.FossilRepositoryConfig => ({
  path: place.repository,
  server: { url: place.serverUrl, passwords: { [place.user]: place.password } },
  ...(options.holdFds !== undefined ? { holdFds: options.holdFds } : {})
})

// what the server said shared by the node's processes here: a watcher reads what the supervisor just learnt
const receipts = (place: ClonePlace) =>
  RemoteReceipts.layer({ url: place.serverUrl, user: place.user, password: place.password, shareWith: Path.join(releasePaths(place.root).node, "receipts-remembered.json") })

/** The clone's record, a run's record read after a pull (a watcher builds its own care directory and sandbox). */
export const record = (place: ClonePlace, options: RecordOptions = {}) =>
  Layer.mergeAll(ClonePullRepository.layer(repositoryConfig(place, options)), receipts(place))

/** A run's record is read after a pull unless `pull` is false (a dry run pulls nothing). */
export const layer = (place: ClonePlace, options: RecordOptions & { readonly pull: boolean }) =>
  Layer.mergeAll(
    options.pull ? ClonePullRepository.layer(repositoryConfig(place, options)) : FossilRepository.layer(repositoryConfig(place, options)),
    receipts(place),
    CareDirectoryFs.layer({ root: place.root }),
    BwrapSandbox.layer(BwrapSandbox.ofRoot(place.root))
  )
