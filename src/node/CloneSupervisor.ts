// The node's supervisor on a clone's host (docs/architecture.md, "The supervisor"): `ocx2 node`'s
// call (src/node/CloneNode.ts) made in the process, the node starting first (every open run
// decided), then a pull and the round over what it brought each time the server says something
// arrived. It asks the server's OCX page for its newest receipt's number and holds the question
// open until a newer one arrives (the receipt tool's newer-than and wait: a long poll), and pulls
// the moment it is answered. A page too old to hold the question, or `--short-cycle`, makes it pull
// every half second instead; a server that fails is tried again less and less often. It keeps the
// node's spare watcher waiting and the roll of its watchers, as the server's supervisor does: a
// watcher's end is seen at once and its run decided again (lost, or handed on), between two pulls.

import * as Effect from "effect/Effect"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Fs from "node:fs"
import { actNow, recording } from "../operations/Operations.js"
import { Hosts, type HostsService, type NodeServices } from "../../services/Hosts.js"
import { Receipts } from "../../services/Receipts.js"
import { runCloneNode } from "./CloneNode.js"
import { clonePlaceOf, readPasswordsFile } from "../root/ClonePasswords.js"
import { pullClone } from "../fossil/Pull.js"
import { cloneRound } from "./CloneRound.js"
import type { NodeConfig } from "../root/NodeConfig.js"
import { watcherOf } from "./Round.js"
import { ensureSpare } from "../pickup/SpareClient.js"
import { processStartTime, readSupervisorInfo, type SupervisorFiles, type SupervisorInfo, writeSupervisorInfo } from "../root/SupervisorFiles.js"
import { firstLine, logTo } from "./SupervisorLog.js"
import { RollKeeper } from "./RollKeeper.js"
import { releasePaths } from "../release/ReleasePaths.js"

/** How long a clone's supervisor waits between two pulls on the short cycle (from the end of one to the start of the next). */
export const cloneEveryMs = 500
/** How long the server's page is asked to hold the question: under the 25 s the page allows. */
const longPollMs = 20_000
/** How long the short cycle is kept before a page that could not hold the question is asked again (its server upgraded). */
const askPageAgainMs = 10 * 60_000
/** The longest pause between two tries at a server that fails. */
const backoffMaxMs = 30_000

export interface CloneSupervisorOptions {
  /** pull every half second, never asking the page to hold a question (a proxy that cuts held requests) */
  readonly shortCycle: boolean
}

export const superviseClone = (
  config: NodeConfig,
  files: SupervisorFiles,
  lockFd: number,
  program: string | undefined,
  options: CloneSupervisorOptions,
  hosts: HostsService
): Promise<number> =>
  new Promise((resolveExit) => {
    const since = new Date().toISOString()
    const started = processStartTime(process.pid) ?? ""
    let rounds = 0
    let lastRound: SupervisorInfo["lastRound"]
    let stopping = false
    const stopped = new AbortController()
    let lastFailure: string | undefined
    const log = logTo(files, config)
    const writeInfo = () =>
      writeSupervisorInfo(files.info, {
        pid: process.pid, started, since, repository: config.repository, node: config.nodeUser, mode: "clone",
        watchers: keeper.roll.snapshot(), rounds, ...(lastRound !== undefined ? { lastRound } : {})
      })
    /** a pause that a stop ends at once */
    const pause = (ms: number) =>
      new Promise<void>((resolve) => {
        if (stopped.signal.aborted) return resolve()
        const timer = setTimeout(resolve, ms)
        stopped.signal.addEventListener("abort", () => {
          clearTimeout(timer)
          resolve()
        }, { once: true })
      })

    // the next run's watcher waiting ready (the spare), as on the server's host: started with the node,
    // and again a while after a hand-off, once the run it took has had its start to itself
    let spareTimer: NodeJS.Timeout | undefined
    const spareSoon = (afterMs: number) => {
      if (spareTimer !== undefined || stopping) return
      spareTimer = setTimeout(() => {
        spareTimer = undefined
        ensureSpare(config, watcherOf(config.root)).catch(() => undefined)
      }, afterMs)
    }

    // after the node's start (which signed in and checked the clone and the passwords file), each
    // step is a pull and the round over what it brought: no sign-in, and the server is asked who
    // sent what only when something arrived
    let runtime: ManagedRuntime.ManagedRuntime<NodeServices, unknown> | undefined

    // one piece of work at a time: a pull and its round, or what the roll found (a watcher's end, runs
    // waiting for their process user); the long poll itself waits outside
    let chain: Promise<unknown> = Promise.resolve()
    const exclusive = <A>(task: () => Promise<A>): Promise<A> => {
      const next = chain.then(task, task)
      chain = next.catch(() => undefined)
      return next
    }
    // the roll of the node's watchers on this host, as on the server's (src/node/RollKeeper.ts)
    const care = releasePaths(config.root).care
    let draining = false
    const keeper: RollKeeper = new RollKeeper({
      config, care, log, watcherProgram: () => watcherOf(config.root),
      run: (effect) => runtime!.runPromise(effect),
      changed: () => writeInfo(),
      wake: () => {
        if (draining || stopping || runtime === undefined) return
        draining = true
        void exclusive(async () => {
          draining = false
          while (!stopping && keeper.pending) {
            if (keeper.ended.size > 0) await keeper.decideEnded()
            else await keeper.lookAtWaiting().catch((e) => log({ did: [`looking at the waiting runs failed: ${firstLine(e)}`] }))
          }
        })
      }
    })
    let careWatch: Fs.FSWatcher | undefined
    const keepRoll = () => {
      Fs.mkdirSync(care, { recursive: true, mode: 0o700 })
      careWatch = Fs.watch(care, { persistent: true }, (_event, name) => {
        if (name !== null) keeper.heard(name)
      }).on("error", (e) => log({ did: [`inotify on ${care} failed: ${firstLine(e)}; a watcher's end is seen at the node's next start`] }))
      const taken = keeper.start()
      return taken
    }
    /** when the server's page last answered that something arrived (epoch ms): where a pickup's time goes is logged from it */
    let answeredAt: number | undefined
    const pullAndDecide = () => exclusive(async () => {
      rounds++
      const began = Date.now()
      let pulledAt = began
      const decided = await runtime!.runPromise(Effect.gen(function*() {
        yield* pullClone(config.repository)
        pulledAt = Date.now()
        return yield* cloneRound(config, actNow, { watcherProgram: watcherOf(config.root) })
      }))
      const took = { ...(answeredAt !== undefined ? { answered: new Date(answeredAt).toISOString(), waitedMs: began - answeredAt } : {}), pullMs: pulledAt - began, roundMs: Date.now() - pulledAt }
      answeredAt = undefined
      const did = decided.decisions.map((d) => `${d.run}: ${d.action}`)
      if (decided.decisions.some((d) => d.action.startsWith("handed"))) spareSoon(1000)
      if (did.length > 0) {
        lastRound = { at: new Date().toISOString(), did }
        log({ round: { from: decided.from, to: decided.to }, did, took })
        writeInfo()
      }
      // the cursor stayed before them: a failure, so the loop pulls and decides again after its
      // pause, not only once the server's page says another receipt arrived (none may)
      if (decided.failed.length > 0) {
        throw new Error(`deciding ${decided.failed.join(", ")} failed: the cursor stays before ${decided.failed.length === 1 ? "it" : "them"}`)
      }
    })
    const startNode = async () => {
      rounds++
      const answer = await Effect.runPromise(runCloneNode(
        { server_url: config.serverUrl!, passwords_file: config.passwordsFile!, root: config.root, check: true },
        { repository: config.repository },
        recording(false),
        program
      ).pipe(Effect.provideService(Hosts, hosts), Effect.provide(hosts.releaseRoot)))
      const did = answer.stopped !== undefined && answer.stopped.reason !== "completed"
        ? [`${answer.stopped.reason}: ${answer.stopped.message ?? ""}`]
        : (answer.output?.runs ?? []).map((r) => `${r.run}: ${r.action}`)
      const passwords = readPasswordsFile(config.passwordsFile!)
      if (answer.stopped === undefined || answer.stopped.reason === "completed") {
        if (passwords._tag === "Passwords") runtime = ManagedRuntime.make(hosts.clone(clonePlaceOf(config, passwords.passwords), { pull: true }))
      }
      // not started (refused, or the passwords file unreadable since): tried again after a pause, as a failure is
      if (runtime === undefined) throw new Error(did.join("; ") || (passwords._tag === "Refused" ? passwords.why : "the node did not start"))
      spareSoon(0)
      const taken = keepRoll()
      lastRound = { at: new Date().toISOString(), did }
      log({ did: [...did, `${did.length} open run${did.length === 1 ? "" : "s"} decided; ${taken} live watcher${taken === 1 ? "" : "s"} taken back; the node on ${config.repository} started`] })
      writeInfo()
    }

    /** The server's newest receipt number, once it is past `after` (or the wait is over); undefined from a page too old to say. */
    const newest = (after: number, waitMs: number) =>
      runtime!.runPromise(Effect.flatMap(Receipts, (receipts) => receipts.newest(after, waitMs)), { signal: stopped.signal })

    let shortUntil = options.shortCycle ? Infinity : 0
    /** the server's newest receipt number as its page last said it; undefined: to be asked before the next pull */
    let seen: number | undefined
    const step = async () => {
      if (runtime === undefined) return startNode()
      if (Date.now() < shortUntil) {
        await pause(cloneEveryMs)
        return stopping ? undefined : pullAndDecide()
      }
      // asked before the pull: whatever arrives after what the pull brought is newer, and wakes the next question
      const told = await newest(seen ?? 0, seen === undefined ? 0 : longPollMs)
      if (told === undefined) {
        shortUntil = Date.now() + askPageAgainMs
        seen = undefined
        log({ did: [`the server's OCX page does not hold a question until a receipt arrives (an older release): pulled every ${cloneEveryMs} ms, the page asked again in ${askPageAgainMs / 60_000} minutes`] })
        return
      }
      const moved = told !== seen
      seen = told
      if (moved) answeredAt = Date.now()
      if (moved) await pullAndDecide()
    }

    let failures = 0
    const loop = async () => {
      while (!stopping) {
        try {
          await step()
          failures = 0
          lastFailure = undefined
        } catch (e) {
          if (stopping) break
          failures++
          // after a failure the newest is asked again, then a pull: nothing that arrived meanwhile is passed by
          seen = undefined
          const waitMs = Math.min(backoffMaxMs, cloneEveryMs * 2 ** Math.min(failures - 1, 6))
          // a server that stays down is said once, not at every try
          if (firstLine(e) !== lastFailure) {
            log({ did: [`${runtime === undefined ? "the node's start" : "the round"} failed: ${firstLine(e)}; tried again in ${waitMs} ms, then less often while it fails (at least every ${backoffMaxMs / 1000} s)`] })
          }
          lastFailure = firstLine(e)
          await pause(waitMs)
        }
      }
    }

    let running: Promise<void> | undefined
    const stop = async (code: number) => {
      if (stopping) return
      stopping = true
      stopped.abort()
      if (spareTimer !== undefined) clearTimeout(spareTimer)
      careWatch?.close()
      keeper.stop()
      await running
      await chain
      await runtime?.dispose().catch(() => undefined)
      if (readSupervisorInfo(files.info)?.pid === process.pid) Fs.rmSync(files.info, { force: true })
      log({ did: ["stopped"] })
      Fs.closeSync(lockFd)
      resolveExit(code)
    }
    process.on("SIGTERM", () => void stop(0))
    process.on("SIGINT", () => void stop(130))
    writeInfo()
    log({
      did: [`supervising ${config.nodeUser} on the clone ${config.repository} of ${config.serverUrl} from ${config.root}` +
        (options.shortCycle ? `, pulling every ${cloneEveryMs} ms` : ", pulling when the server's OCX page says a receipt arrived")]
    })
    running = loop()
  })
