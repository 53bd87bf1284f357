// Issue 37 item 7: a clone's round whose decision of a run fails (the server not reached while the
// run's record is read) leaves its cursor before that run, so the next call decides it. The real
// round (CloneRound) on a real clone of a real `fossil server`, its receipts asked over HTTP; only
// the question for one run's record is made to fail, as a server that went down for that moment.
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as BwrapSandbox from "../../layers/BwrapSandbox.js"
import * as CareDirectoryFs from "../../layers/CareDirectoryFs.js"
import * as FossilRepository from "../../layers/FossilRepository.js"
import * as RemoteReceipts from "../../layers/RemoteReceipts.js"
import { Receipts, ServerUnreachable } from "../../services/Receipts.js"
import { cloneRound } from "../../src/node/CloneRound.js"
import { pullClone } from "../../src/fossil/Pull.js"
import { openDatabase } from "../../src/fossil/Sqlite.js"
import { actNow } from "../../src/operations/Operations.js"
import { releasePaths } from "../../src/release/ReleasePaths.js"
import { canonicalRepository, cursorFileOf, readCursor } from "../../src/root/HookFiles.js"
import type { NodeConfig } from "../../src/root/NodeConfig.js"
import { fossil } from "../support/fossilServer.js"
import { closeCloneWorld, cloneUsers, type CloneWorld, makeCloneWorld, postRun, runNode, useThisBuild, waitForKind } from "./cloneWorld.js"
import { dist } from "./hookWorld.js"

let world: CloneWorld
let config: NodeConfig
beforeAll(async () => {
  world = await makeCloneWorld("ocx2-clone-failed-")
  useThisBuild(world, dist)
  // a process user of its own for the second run, so the two need not wait for each other
  await fossil(["user", "new", "builder-other", "builder-other@example.com", "builder-other-pw", "-R", world.served])
  await fossil(["user", "capabilities", "builder-other", "oi", "-R", world.served])
  expect((await runNode(world, ["--check"])).stopped).toEqual({ reason: "completed" })
  config = {
    root: world.root,
    repository: canonicalRepository(world.clone),
    nodeUser: cloneUsers.lab2.login,
    serverUrl: world.url,
    passwordsFile: world.passwords
  }
}, 120_000)
afterAll(() => closeCloneWorld(world))

/** The clone's node services, as CloneHost assembles them, its receipts failing while `fails` says so. */
const layerFailing = (fails: (hashes: ReadonlyArray<string>, capabilitiesNext: string | undefined) => boolean) => {
  const remote = RemoteReceipts.layer({
    url: world.url, user: cloneUsers.lab2.login, password: cloneUsers.lab2.password,
    shareWith: Path.join(releasePaths(world.root).node, "receipts-remembered.json")
  })
  const receipts = Layer.effect(Receipts, Effect.map(Receipts, (real) => ({
    ...real,
    receipts: (hashes, options) => fails(hashes, options?.capabilitiesNext)
      ? Effect.fail(new ServerUnreachable({ url: world.url, reason: "the test's server could not be reached" }))
      : real.receipts(hashes, options)
  }))).pipe(Layer.provide(remote))
  return Layer.mergeAll(
    FossilRepository.layer({ path: config.repository, server: { url: world.url, passwords: { [cloneUsers.lab2.login]: cloneUsers.lab2.password } } }),
    receipts,
    CareDirectoryFs.layer({ root: world.root }),
    BwrapSandbox.layer(BwrapSandbox.ofRoot(world.root))
  )
}

/** Where the clone received an artifact: the cursor's terms. */
const inClone = (hash: string) => {
  const db = openDatabase(world.clone, { readonly: true, fileMustExist: true })
  try {
    return db.prepare<[string], { rcvid: number; rid: number }>("SELECT rcvid, rid FROM blob WHERE uuid = ?").get(hash)!
  } finally {
    db.close()
  }
}
const after = (a: { rcvid: number; rid: number }, b: { rcvid: number; rid: number }) => a.rcvid > b.rcvid || (a.rcvid === b.rcvid && a.rid > b.rid)

describe("a clone's round whose decision of a run fails", () => {
  it.live("keeps its cursor before that run, and the next round decides it: each run started and ended once", () => Effect.gen(function*() {
    const script = "echo x >> $$workspace$$/launched"
    const workspace = { workspace: [{ step: "directory", at: "$$root$$/work/$$run$$" }] }
    const failing = yield* Effect.promise(() => postRun(world, script, {}, workspace))
    const other = yield* Effect.promise(() => postRun(world, script, { user: "builder-other" }, workspace))
    yield* pullClone(config.repository)
    const failingAt = inClone(failing)
    // only the failing run's record (asked with its process user's capabilities) meets the outage
    const first = yield* cloneRound(config, actNow, { watcherProgram: Path.join(world.root, "current", "ocx2-watcher") }).pipe(
      Effect.provide(layerFailing((hashes, next) => hashes[0] === failing && next !== undefined))
    )
    const firstOf = (run: string) => first.decisions.find((d) => d.run === run)?.action
    expect(firstOf(failing), JSON.stringify(first.decisions)).toMatch(/^failed: .*could not be reached/)
    const cursor = readCursor(cursorFileOf(config.root, config.repository, config.nodeUser))!
    expect(after(failingAt, cursor), `cursor ${JSON.stringify(cursor)}, the run at ${JSON.stringify(failingAt)}`).toBe(true)
    expect(firstOf(failing)).toMatch(/decided again at the next call/)
    expect(first.failed).toEqual([failing])

    // the next call, the server answering: the run is decided, and the other is not started twice
    const second = yield* cloneRound(config, actNow, { watcherProgram: Path.join(world.root, "current", "ocx2-watcher") }).pipe(
      Effect.provide(layerFailing(() => false))
    )
    expect(second.decisions.find((d) => d.run === failing)?.action, JSON.stringify(second.decisions)).toMatch(/^handed to a watcher/)
    expect(second.failed).toEqual([])
    const moved = readCursor(cursorFileOf(config.root, config.repository, config.nodeUser))!
    expect(!after(failingAt, moved), `cursor ${JSON.stringify(moved)}, the run at ${JSON.stringify(failingAt)}: ${JSON.stringify(second)}`).toBe(true)
    for (const run of [failing, other]) {
      const replies = yield* waitForKind(world, run, "ended", 90_000, 200)
      expect(replies.map((m) => [m.kind, m.sender])).toEqual([["started", "lab2"], ["ended", "lab2"]])
    }
  }), 180_000)
})
