/**
 * A Hosts for unit tests, made of the test layers: each repository file's record is a test
 * repository and its receipts table, every sandbox the one test launcher (so a test reads what
 * every host launched), the release roots one in-memory table, the workspace steps' Fossil one
 * table of check-ins (layers/TestCheckouts.ts). ROOT/care is the test's to give
 * (absent, opening it fails as a care directory that cannot be opened does).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { CareDirError, type CareDirectory } from "../services/CareDirectory.js"
import { Checkouts } from "../services/Checkouts.js"
import { Hosts, type HostsService, type RecordServices } from "../services/Hosts.js"
import { ReleaseRoot } from "../services/ReleaseRoot.js"
import { Repository } from "../services/Repository.js"
import { SandboxLauncher } from "../services/SandboxLauncher.js"
import * as TestCheckouts from "./TestCheckouts.js"
import * as TestReceipts from "./TestReceipts.js"
import * as TestReleaseRoot from "./TestReleaseRoot.js"
import type { TestRepositoryHandle } from "./TestRepository.js"
import * as TestSandboxLauncher from "./TestSandboxLauncher.js"

export interface TestRecord {
  readonly repository: TestRepositoryHandle
  readonly receipts?: TestReceipts.TestReceiptsOptions
}

export interface TestHostsOptions {
  /** each repository file (a served file or a clone) by its path */
  readonly records?: Readonly<Record<string, TestRecord>>
  /** the server's receipts, as a clone's node asks them over HTTP */
  readonly serverReceipts?: TestReceipts.TestReceiptsOptions
  readonly launcher?: TestSandboxLauncher.TestSandboxLauncher
  /** what the workspace steps ask of Fossil; by default one with no repository */
  readonly checkouts?: TestCheckouts.TestCheckouts
  readonly releaseRoot?: TestReleaseRoot.TestReleaseRoot
  /** ROOT/care of one ROOT */
  readonly care?: (root: string) => Layer.Layer<CareDirectory, CareDirError>
}

export const make = (options: TestHostsOptions = {}) => {
  const launcher = options.launcher ?? TestSandboxLauncher.make()
  const releaseRoot = options.releaseRoot ?? TestReleaseRoot.make()
  const checkouts = options.checkouts ?? TestCheckouts.make()
  const record = (repository: string): Layer.Layer<RecordServices> => {
    const table = options.records?.[repository]
    if (table === undefined) {
      // a test's mistake, not a host's state: it says which file the code under test asked for
      return Layer.effectContext(Effect.dieMessage(`TestHosts: the test gave no record for ${repository}`))
    }
    return Layer.merge(Layer.succeed(Repository, table.repository.service), TestReceipts.layer(table.receipts))
  }
  const care = (root: string): Layer.Layer<CareDirectory, CareDirError> =>
    options.care?.(root) ??
      Layer.fail(new CareDirError({ op: "open", path: `${root}/care`, reason: "the test gave no care directory" }))
  const sandbox = () => Layer.succeed(SandboxLauncher, launcher)
  const hosts: HostsService = {
    served: (place) => Layer.mergeAll(record(place.repository), care(place.root), sandbox()),
    clone: (place) => Layer.mergeAll(record(place.repository), care(place.root), sandbox()),
    record,
    cloneRecord: (place) => record(place.repository),
    serverReceipts: () => TestReceipts.layer(options.serverReceipts),
    care,
    sandbox,
    checkouts: Layer.succeed(Checkouts, checkouts),
    releaseRoot: Layer.succeed(ReleaseRoot, releaseRoot)
  }
  return { hosts, launcher, releaseRoot, checkouts }
}

/** As LiveHosts.layer: the Hosts service, and the release roots beside it. */
export const layer = (options: TestHostsOptions = {}) => {
  const made = make(options)
  return { ...made, layer: Layer.merge(Layer.succeed(Hosts, made.hosts), made.hosts.releaseRoot) }
}
