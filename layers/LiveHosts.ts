// Every kind of host this program acts on, as the live layers make them up (a composition module:
// docs/architecture.md, "Layout"); bin/ provides it, and code that learns its host only as it
// runs asks the Hosts service for that host's layer.
import * as Layer from "effect/Layer"
import { Hosts, type HostsService } from "../services/Hosts.js"
import type { ReleaseRoot } from "../services/ReleaseRoot.js"
import * as BwrapSandbox from "./BwrapSandbox.js"
import * as CareDirectoryFs from "./CareDirectoryFs.js"
import * as CloneHost from "./CloneHost.js"
import * as FossilCheckouts from "./FossilCheckouts.js"
import * as ReleaseRootFs from "./ReleaseRootFs.js"
import * as RemoteReceipts from "./RemoteReceipts.js"
import * as ServedHost from "./ServedHost.js"

export const hosts: HostsService = {
  served: ServedHost.layer,
  clone: CloneHost.layer,
  record: ServedHost.record,
  cloneRecord: CloneHost.record,
  serverReceipts: RemoteReceipts.layer,
  care: (root) => CareDirectoryFs.layer({ root }),
  checkouts: FossilCheckouts.layer,
  sandbox: (root) => BwrapSandbox.layer(root === undefined ? {} : BwrapSandbox.ofRoot(root)),
  releaseRoot: ReleaseRootFs.layer
}

/** The Hosts service, and the release roots beside it for code that needs no other host's service. */
export const layer: Layer.Layer<Hosts | ReleaseRoot> = Layer.merge(Layer.succeed(Hosts, hosts), ReleaseRootFs.layer)
