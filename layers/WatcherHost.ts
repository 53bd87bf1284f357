// The watcher's host, assembled (a composition module: docs/architecture.md, "Layout"): only what
// a watcher acts through, so that its program (bin/ocx2-watcher.ts), started once per run, loads
// no layer of the node's rounds, of a tool call or of the release roots: its run's record on the
// server's host or on a clone's, ROOT/care, the sandbox and the workspace steps' Fossil.
import type { WatcherHostsService } from "../services/Hosts.js"
import * as BwrapSandbox from "./BwrapSandbox.js"
import * as CareDirectoryFs from "./CareDirectoryFs.js"
import * as CloneHost from "./CloneHost.js"
import * as FossilCheckouts from "./FossilCheckouts.js"
import * as ServedHost from "./ServedHost.js"

export const hosts: WatcherHostsService = {
  record: ServedHost.record,
  cloneRecord: CloneHost.record,
  care: (root) => CareDirectoryFs.layer({ root }),
  checkouts: FossilCheckouts.layer,
  sandbox: (root) => BwrapSandbox.layer(root === undefined ? {} : BwrapSandbox.ofRoot(root))
}
