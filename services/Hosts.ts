// The services of each kind of host, for code that learns where it acts only once it runs (a
// round's node, a tool call's repository file, a watcher's run). Such code asks this service for
// the layer of its host and provides it itself; which live layers make up a host is decided in
// one place, the composition modules under layers/ that bin/ provides (docs/architecture.md,
// "Layout"), and a test provides layers of its own.

import * as Context from "effect/Context"
import type * as Layer from "effect/Layer"
import type { CareDirError, CareDirectory } from "./CareDirectory.js"
import type { Checkouts } from "./Checkouts.js"
import type { Receipts } from "./Receipts.js"
import type { ReleaseRoot } from "./ReleaseRoot.js"
import type { Repository } from "./Repository.js"
import type { SandboxLauncher } from "./SandboxLauncher.js"

/** A node's repository on its host: the repository file, and the node's ROOT. */
export interface NodePlace {
  readonly repository: string
  readonly root: string
}

/** A node on a clone's host: its clone and ROOT, the server it reaches, and the node user it pushes as. */
export interface ClonePlace extends NodePlace {
  readonly serverUrl: string
  readonly user: string
  readonly password: string
}

export interface RecordOptions {
  /** descriptors every `fossil` child inherits (the run's lock, held while a write is in flight) */
  readonly holdFds?: ReadonlyArray<number>
}

/** A record's two services: the repository and who the server received each artifact from. */
export type RecordServices = Repository | Receipts

/** Everything a node's round acts through. */
export type NodeServices = RecordServices | CareDirectory | SandboxLauncher

export interface HostsService {
  /** The node on the server's host: the served file read and written beside the server, its receipts, ROOT/care, the sandbox. */
  readonly served: (place: NodePlace) => Layer.Layer<NodeServices, CareDirError>
  /**
   * The node on a clone's host: the clone (writes pushed to the server as the node user; a run's
   * record read after a pull unless `pull` is false, as in a dry run), the server's receipts asked
   * as the node user, ROOT/care, the sandbox.
   */
  readonly clone: (place: ClonePlace, options: RecordOptions & { readonly pull: boolean }) => Layer.Layer<NodeServices, CareDirError>
  /** One repository file on this host and its receipts (a tool call, a watcher on the server's host). */
  readonly record: (repository: string, options?: RecordOptions) => Layer.Layer<RecordServices>
  /** A clone's record as a watcher on a clone's host reads it: pulled before each read of a run's record. */
  readonly cloneRecord: (place: ClonePlace, options?: RecordOptions) => Layer.Layer<RecordServices>
  /** The server's receipts, asked over HTTP as a user: the clone's node signs in with them. */
  readonly serverReceipts: (server: { readonly url: string; readonly user: string; readonly password: string }) => Layer.Layer<Receipts>
  /** ROOT/care of one ROOT. */
  readonly care: (root: string) => Layer.Layer<CareDirectory, CareDirError>
  /** The sandbox of a node's ROOT, its measure of the host kept in ROOT/node (none: measured at each start). */
  readonly sandbox: (root?: string) => Layer.Layer<SandboxLauncher>
  /** What a run's workspace steps ask of Fossil on this host (a watcher's). */
  readonly checkouts: Layer.Layer<Checkouts>
  /** The release roots of this host (a program's root, the release it serves). */
  readonly releaseRoot: Layer.Layer<ReleaseRoot>
}

/**
 * What a watcher asks of its host, and all its program is given (layers/WatcherHost.ts): its run's
 * record on the server's host or a clone's, ROOT/care, the sandbox, the workspace steps' Fossil.
 */
export type WatcherHostsService = Pick<HostsService, "record" | "cloneRecord" | "care" | "sandbox" | "checkouts">

export class Hosts extends Context.Tag("ocx2/Hosts")<Hosts, HostsService>() {}
