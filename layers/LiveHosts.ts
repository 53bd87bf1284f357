// Every kind of host this program acts on, as the live layers make them up (a composition module:
// docs/architecture.md, "Layout"); bin/ provides it, and code that learns its host only as it
// runs asks the Hosts service for that host's layer. A watcher's part is its own module
// (WatcherHost), which the watcher's program is given alone.
import * as Layer from "effect/Layer"
import { Hosts, type HostsService } from "../services/Hosts.js"
import type { ReleaseRoot } from "../services/ReleaseRoot.js"
import * as CloneHost from "./CloneHost.js"
import * as ReleaseRootFs from "./ReleaseRootFs.js"
import * as RemoteReceipts from "./RemoteReceipts.js"
import * as ServedHost from "./ServedHost.js"
import * as WatcherHost from "./WatcherHost.js"

export const hosts: HostsService = {
  ...WatcherHost.hosts,
  served: ServedHost.layer,
  clone: CloneHost.layer,
  serverReceipts: RemoteReceipts.layer,
  releaseRoot: ReleaseRootFs.layer
}

/** The Hosts service, and the release roots beside it for code that needs no other host's service. */
export const layer: Layer.Layer<Hosts | ReleaseRoot> = Layer.merge(Layer.succeed(Hosts, hosts), ReleaseRootFs.layer)
