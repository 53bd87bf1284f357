// What a spare does before it waits: it goes through a watcher's steps on a run of its own
// making, touching nothing of the node's (no run's file, nothing launched, nothing sent): a lock
// in a temporary care directory of its own, the newest post's record read from the repository,
// the run decided, planned and described. A run's path runs through a native addon loaded on
// first use, schema decoders built on their first use and code V8 has not yet compiled;
// rehearsed, the run the spare takes finds them ready (docs/architecture.md has bench/launch's
// figures).

import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { CareDirectory } from "../../services/CareDirectory.js"
import type { WatcherHostsService } from "../../services/Hosts.js"
import { Receipts } from "../../services/Receipts.js"
import { makeTempDir, sweepTempDirs } from "../care/TempDirs.js"
import { openDatabase, preloadSqlite } from "../fossil/Sqlite.js"
import { cloneEntryOf } from "../root/CloneFiles.js"
import { cloneUsers } from "../root/CloneUsers.js"
import { readRunRecord } from "../pickup/RunRecord.js"
import { hostSettings, nodeOwnPaths, type NodeConfig } from "../root/NodeConfig.js"
import { readMessage, writeMessage } from "../protocol/Envelope.js"
import { endedMessage, startedMessage, startedValues } from "../protocol/Messages.js"
import { checkRun } from "../protocol/Refusals.js"
import { releasePaths } from "../release/ReleasePaths.js"
import { collectGarbage } from "./Collect.js"
import { launchSpec } from "./LaunchPlan.js"

const rehearsedRun = (config: NodeConfig) => ({
  ocx: 2,
  to: config.nodeUser,
  run: {
    objective: "a rehearsal",
    workspace: [{ step: "directory", at: "$$root$$/work/$$run$$" }],
    sandbox: {
      uid: 65534, gid: 65534, linux_capabilities: [], network: false, isolate_terminal: true, ends_with_parent: true,
      proc: "/proc", dev: "/dev", tmp: "/tmp", read_only: ["/usr"], read_write: ["$$workspace$$"], homes: [], created_files: []
    },
    limits: { wall: "1m" },
    process: { user: "nobody", command: ["sh", "-c", "true"], env: { PATH: "/usr/bin:/bin" } }
  }
})

const everything = { sandbox: true, wall: true, cpu: true, file_size: true, processes: true, memory: true, notes: [] }

/** The newest forum post, whose record a rehearsal reads (any hash will do when there is none). */
const newestPost = (repository: string): string => {
  const db = openDatabase(repository, { readonly: true, fileMustExist: true })
  try {
    const row = db.prepare("SELECT b.uuid AS uuid FROM forumpost f JOIN blob b ON b.rid = f.fpid ORDER BY f.fmtime DESC LIMIT 1").get() as
      | { uuid: string }
      | undefined
    return row?.uuid ?? "0".repeat(64)
  } finally {
    db.close()
  }
}

/** A child with pipes, as the sandbox's and fossil's are started (Node's first spawn costs the most). */
const rehearseSpawn = Effect.async<void>((resume) => {
  const child = ChildProcess.spawn("/usr/bin/true", [], { stdio: ["pipe", "pipe", "pipe"] })
  child.once("error", () => resume(Effect.void))
  child.once("close", () => resume(Effect.void))
})

/** A lock taken and a record read, as a watcher's first steps are. */
const rehearseRecord = (config: NodeConfig, hosts: WatcherHostsService) =>
  Effect.scoped(Effect.gen(function*() {
    const care = yield* CareDirectory
    const lock = yield* care.lockRun("rehearsal")
    yield* Effect.either(care.lockUser("rehearsal"))
    // on a served repository, what arrived since the node last looked is read as a run's check
    // reads it, its cache left as it is (nothing written under ROOT); a clone's senders are the
    // server's to say
    const served = cloneEntryOf(config.root, config.repository) === undefined
    yield* Effect.either(readRunRecord(newestPost(config.repository)).pipe(
      Effect.zipRight(served ? cloneUsers(releasePaths(config.root).node, { keep: false }) : Effect.void)
    )).pipe(
      Effect.zipRight(Effect.either(Effect.flatMap(Receipts, (r) => r.capabilitiesOf("nobody")))),
      Effect.provide(hosts.record(config.repository, { holdFds: [lock.fd] }))
    )
  })).pipe(
    // a care directory of its own, outside ROOT: a spare must never make again a ROOT being removed
    Effect.provide(Layer.unwrapScoped(Effect.map(
      Effect.acquireRelease(
        Effect.sync(() => makeTempDir("ocx2-rehearsal-")),
        (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
      ),
      (dir) => hosts.care(dir)
    )))
  )

/** The whole rehearsal; whatever fails in it only warms less. */
export const warmUp = (config: NodeConfig, hosts: WatcherHostsService): Promise<void> => {
  try {
    // what killed processes left in the temporary directory (src/care/TempDirs.ts)
    sweepTempDirs()
    preloadSqlite()
    rehearseDecision(config)
  } catch {
    // a rehearsal only warms
  }
  return Effect.runPromise(Effect.zipRight(rehearseSpawn, rehearseRecord(config, hosts)).pipe(Effect.catchAllCause(() => Effect.void)))
    // a full collection now, while nothing waits: the rehearsal's garbage is not the run's to collect
    .then(collectGarbage)
}

const rehearseDecision = (config: NodeConfig): void => {
  const runHash = "0".repeat(64)
  const reading = readMessage(writeMessage(rehearsedRun(config)))
  if (reading._tag !== "Message") return
  const check = checkRun({
    message: reading,
    runHash,
    sender: { login: "rehearsal", capabilities: "s" },
    processUserCapabilities: "",
    cloneUsers: new Set(),
    host: hostSettings(config, everything)
  })
  if (Either.isLeft(check)) return
  const values = { ...check.right.start, workspace: `${config.root}/work/${runHash}` }
  launchSpec(check.right, values, { runHash, releaseDir: releasePaths(config.root).current, ownPaths: nodeOwnPaths(config) })
  JSON.stringify(startedMessage(runHash, { values: startedValues(values), limits: check.right.run.limits }))
  JSON.stringify(endedMessage(runHash, { outcome: "exited", exit: 0 }))
  // the fiber runtime every step of the watcher runs on
  Effect.runSync(Effect.scoped(Effect.gen(function*() {
    yield* Effect.acquireRelease(Effect.succeed(1), () => Effect.void)
    for (let i = 0; i < 50; i++) yield* Effect.either(Effect.try(() => i))
  })))
}
