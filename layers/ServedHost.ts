// The node on the server's host, assembled (a composition module: docs/architecture.md, "Layout"):
// the served file read and written beside the server, its receipts read from the same file,
// ROOT/care, and the sandbox with the node's measure of the host.
import * as Layer from "effect/Layer"
import type { NodePlace, RecordOptions } from "../services/Hosts.js"
import * as BwrapSandbox from "./BwrapSandbox.js"
import * as CareDirectoryFs from "./CareDirectoryFs.js"
import * as FossilReceipts from "./FossilReceipts.js"
import * as FossilRepository from "./FossilRepository.js"

/** One repository file on this host and its receipts. */
export const record = (repository: string, options: RecordOptions = {}) =>
  Layer.mergeAll(
    FossilRepository.layer({ path: repository, ...(options.holdFds !== undefined ? { holdFds: options.holdFds } : {}) }),
    FossilReceipts.layer({ path: repository })
  )

export const layer = (place: NodePlace) =>
  Layer.mergeAll(
    record(place.repository),
    CareDirectoryFs.layer({ root: place.root }),
    BwrapSandbox.layer(BwrapSandbox.ofRoot(place.root))
  )
