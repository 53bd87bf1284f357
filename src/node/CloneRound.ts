import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Path from "node:path"
import * as BwrapSandbox from "../../layers/BwrapSandbox.js"
import * as CareDirectoryFs from "../../layers/CareDirectoryFs.js"
import * as FossilRepository from "../../layers/FossilRepository.js"
import * as RemoteReceipts from "../../layers/RemoteReceipts.js"
import { CareDirectory } from "../../services/CareDirectory.js"
import { Receipts } from "../../services/Receipts.js"
import { Repository, serverOrder, type Cursor } from "../../services/Repository.js"
import { readMessage } from "../protocol/Envelope.js"
import { releasePaths } from "../release/ReleasePaths.js"
import type { Passwords } from "./ClonePasswords.js"
import * as ClonePull from "./ClonePull.js"
import { advanceCursor, cursorFileOf, readCursor } from "./HookFiles.js"
import type { NodeConfig } from "./NodeConfig.js"
import { type Act, decideRun, type RunDecision } from "./Round.js"

// One call of the node on a clone's host (seed 001, "Add a node on another host"), after the
// pull: what the pull brought (the clone's receipts after the node's cursor) is read, the
// server is asked who sent each run and stop (the clone's own receipts name only its pulls),
// and each is decided in the server's order by the same decideRun the server's hook uses.
// An artifact whose sender the server has not said is decided again at the next call: the
// cursor stays before the first of them.

interface Found {
  readonly hash: string
  readonly kind: "run" | "stop"
  /** the run a stop names */
  readonly re: string | undefined
  /** its place in the clone, for the cursor */
  readonly local: Cursor
}

export interface CloneRoundResult {
  readonly from: Cursor
  readonly to: Cursor
  readonly decisions: ReadonlyArray<RunDecision>
}

const described = <E, R>(run: string, effect: Effect.Effect<string, E, R>) =>
  effect.pipe(
    Effect.catchAll((e) => Effect.succeed(`failed: ${String((e as { message?: unknown })?.message ?? e).split("\n")[0]}`)),
    Effect.map((action): RunDecision => ({ run, action }))
  )

const before = (c: Cursor): Cursor => (c.rid > 0 ? { rcvid: c.rcvid, rid: c.rid - 1 } : { rcvid: c.rcvid - 1, rid: Number.MAX_SAFE_INTEGER })

/** Runs for the node user, and every stop, the clone received after `from` (in the clone's order). */
const readFound = (config: NodeConfig, from: Cursor) =>
  Effect.gen(function*() {
    const repository = yield* Repository
    const found: Array<Found> = []
    let cursor = from
    for (;;) {
      const batch = yield* repository.readAfter(cursor, 1000)
      for (const item of batch.items) {
        if (item._tag !== "Post" && item._tag !== "TicketChange") continue
        const reading = readMessage(item.text)
        if (reading._tag !== "Message") continue
        const local = { rcvid: item.rcvid, rid: item.rid }
        if (reading.kind === "run" && reading.to === config.nodeUser) found.push({ hash: item.hash, kind: "run", re: undefined, local })
        else if (reading.kind === "stop" && reading.re !== undefined) found.push({ hash: item.hash, kind: "stop", re: reading.re, local })
      }
      cursor = batch.cursor
      if (!batch.more) break
    }
    return { found, cursor }
  })

/** The round after the pull: decide what arrived after the cursor, in server order; the cursor moved past what was decided. */
export const cloneRound = (config: NodeConfig, act: Act, options: { readonly watcherProgram: string }) =>
  Effect.gen(function*() {
    const care = yield* CareDirectory
    const repository = yield* Repository
    const receipts = yield* Receipts
    return yield* care.withRoundLock(Effect.gen(function*() {
      const cursorFile = cursorFileOf(config.root, config.repository, config.nodeUser)
      const from = readCursor(cursorFile)
      if (from === undefined) return yield* Effect.fail(new Error(`the node has not started on ${config.repository}: run ocx2 node with --check`))
      const { serverCode } = yield* repository.codes()
      const read = yield* readFound(config, from)
      const answers = read.found.length === 0 ? [] : yield* receipts.receipts(read.found.map((f) => f.hash))
      const known: Array<{ found: Found; rcvid: number; rid: number }> = []
      const unknown: Array<Found> = []
      read.found.forEach((found, i) => {
        const answer = answers[i]
        if (answer?._tag === "Received") known.push({ found, rcvid: answer.rcvid, rid: answer.rid })
        else unknown.push(found)
      })
      known.sort(serverOrder)
      const decisions: Array<RunDecision> = []
      for (const { found } of known) {
        decisions.push(yield* described(found.re ?? found.hash, found.kind === "run"
          ? decideRun(config, serverCode, found.hash, { _tag: "Arrival" }, act, options)
          : decideRun(config, serverCode, found.re!, { _tag: "Stop" }, act, { ...options, stop: found.hash })))
      }
      for (const found of unknown) {
        decisions.push({
          run: found.re ?? found.hash,
          action: `the server has not said who sent ${found.kind === "stop" ? `the stop ${found.hash}` : "the run"}: decided again at the next call`
        })
      }
      // the cursor stays before the first artifact the server has not said the sender of
      const firstUnknown = [...unknown].sort((a, b) => serverOrder(a.local, b.local))[0]
      const to = firstUnknown === undefined ? read.cursor : before(firstUnknown.local)
      yield* act("cursor", `${cursorFile} = ${JSON.stringify(to)}`, Effect.sync(() => advanceCursor(cursorFile, to)))
      return { from, to, decisions } satisfies CloneRoundResult
    }))
  })

/**
 * The layers of a node on a clone's host: the clone (writes pushed to the server as the node
 * user; a run's record read after a pull, unless `pull` is false, as in a dry run), the server's
 * receipts asked as the node user, the care directory, the sandbox.
 */
export const cloneNodeLayer = (config: NodeConfig, passwords: Passwords, options: { readonly pull: boolean; readonly holdFds?: ReadonlyArray<number> }) => {
  const serverUrl = config.serverUrl ?? ""
  const repositoryConfig: FossilRepository.FossilRepositoryConfig = {
    path: config.repository,
    server: { url: serverUrl, passwords: { [passwords.user]: passwords.password } },
    ...(options.holdFds !== undefined ? { holdFds: options.holdFds } : {})
  }
  return Layer.mergeAll(
    options.pull ? ClonePull.layer(repositoryConfig) : FossilRepository.layer(repositoryConfig),
    RemoteReceipts.layer({ url: serverUrl, user: passwords.user, password: passwords.password }),
    CareDirectoryFs.layer({ root: config.root }),
    BwrapSandbox.layer({ capabilitiesCache: Path.join(releasePaths(config.root).node, "capabilities.json") })
  )
}

/** Only the record's two services, for a watcher that builds its own care directory and sandbox. */
export const cloneRecordLayer = (config: NodeConfig, passwords: Passwords, holdFds: ReadonlyArray<number>) => {
  const serverUrl = config.serverUrl ?? ""
  return Layer.mergeAll(
    ClonePull.layer({ path: config.repository, server: { url: serverUrl, passwords: { [passwords.user]: passwords.password } }, holdFds }),
    RemoteReceipts.layer({ url: serverUrl, user: passwords.user, password: passwords.password })
  )
}
