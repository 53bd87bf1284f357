// ocx2 supervise --node USER [--root ROOT] [--repository REPO]: the node's resident supervisor on
// the server's host (docs/architecture.md, "The supervisor"). It hears every receipt through
// inotify on the served file's directory (the file, its journal, its WAL) and runs the node's round
// at once, one at a time, another right after when more arrived meanwhile; the after-receive hook
// then only wakes it (SIGUSR1). It keeps the roll of the node's watchers (WatcherRoll) and, the
// moment one ends, decides its run again under round.lock and the run's lock, as the node's start
// does: lost when it started and has no ended, handed on when it never started, and the first run
// waiting for its process user handed on. It starts as `hook --node` does: what dead watchers left
// in their outboxes sent, every open run decided, every live watcher taken back.

import * as Effect from "effect/Effect"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { actNow } from "../operations/Operations.js"
import { CareDirectory } from "../../services/CareDirectory.js"
import type { HostsService } from "../../services/Hosts.js"
import { Repository } from "../../services/Repository.js"
import { openDatabase } from "../fossil/Sqlite.js"
import { releasePaths, rootOfProgram } from "../release/ReleasePaths.js"
import { readClones } from "../root/CloneFiles.js"
import { cloneEveryMs, superviseClone } from "./CloneSupervisor.js"
import { flockNow } from "../care/FlockNow.js"
import { readArrivals, workWaits } from "./HookFast.js"
import { diskRoom, holdsBack, holdStartsBack } from "../root/DiskRoom.js"
import { RoundsAgain } from "./RoundAgain.js"
import { advanceCursor, canonicalRepository, type Cursor, cursorFileOf, readCursor, readNodes } from "../root/HookFiles.js"
import type { NodeConfig } from "../root/NodeConfig.js"
import { finishLeftOutboxes } from "./Recovery.js"
import { decideMessage, described, hookRound, nodeMessagesAfter, startNode, watcherOf } from "./Round.js"
import { settleMs, unsettledAfter } from "./ReceiptSettled.js"
import { anySession } from "../care/SessionFiles.js"
import { ensureSpare, stopSpare } from "../pickup/SpareClient.js"
import { stopNode } from "./NodeStop.js"
import { processStartTime, readSupervisorInfo, type SupervisorFiles, supervisorFilesOf, type SupervisorInfo, writeSupervisorInfo } from "../root/SupervisorFiles.js"
import { firstLine, logTo } from "./SupervisorLog.js"
import { nodeMismatch, releaseDirOfProgram } from "../release/StagedNode.js"
import { RollKeeper } from "./RollKeeper.js"

export const superviseUsage = "usage: ocx2 supervise --node USER [--root ROOT] [--repository REPO] [--short-cycle] [--stop] [--dry-run]"

/** How often a post received is looked at while it is waited for to be crosslinked (for up to settleMs). */
const settleEveryMs = 15
/** How long after a round what it read is read once more. */
const lookAgainMs = 1500

interface SuperviseArgs {
  readonly node: string
  readonly root: string | undefined
  readonly repository: string | undefined
  readonly dryRun: boolean
  /** on a clone's host: pull every half second rather than hold a question open at the server's page */
  readonly shortCycle: boolean
  /** end the node's resident processes (NodeStop.ts) instead of supervising */
  readonly stop: boolean
}

const parseArgs = (argv: ReadonlyArray<string>): SuperviseArgs | string => {
  const named = new Map<string, string>()
  let dryRun = false
  let shortCycle = false
  let stop = false
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (["--node", "--root", "--repository"].includes(arg) && i + 1 < argv.length) named.set(arg, argv[++i]!)
    else if (arg === "--dry-run") dryRun = true
    else if (arg === "--short-cycle") shortCycle = true
    else if (arg === "--stop") stop = true
    else return `unknown argument ${JSON.stringify(arg)}; ${superviseUsage}`
  }
  const node = named.get("--node")
  if (node === undefined) return `--node USER is missing; ${superviseUsage}`
  return { node, root: named.get("--root"), repository: named.get("--repository"), dryRun, shortCycle, stop }
}

/** The node to supervise, from the arguments and ROOT/node/node.json; words when it cannot be. */
export const resolveNode = (args: SuperviseArgs, program: string | undefined): NodeConfig | string => {
  let root = args.root
  if (root === undefined && program !== undefined) {
    try {
      root = rootOfProgram(Fs.realpathSync(program))
    } catch {
      // not a program of a release
    }
  }
  if (root === undefined) return `give --root ROOT: this program is released into no root; ${superviseUsage}`
  root = Path.resolve(root)
  const nodes = readNodes(root).nodes
  const mine = Object.entries(nodes).filter(([, entry]) => entry.user === args.node).map(([repository]) => repository)
  // a node on a clone's host: the clone `ocx2 node` registered for the user
  const clones = Object.entries(readClones(root).clones).filter(([, entry]) => entry.user === args.node)
  const clone = args.repository !== undefined ? clones.find(([file]) => file === canonicalRepository(args.repository!)) : mine.length === 0 && clones.length === 1 ? clones[0] : undefined
  if (clone !== undefined) {
    return { root, repository: clone[0], nodeUser: args.node, serverUrl: clone[1].serverUrl, passwordsFile: clone[1].passwordsFile }
  }
  const repository = args.repository !== undefined ? canonicalRepository(args.repository) : mine.length === 1 ? mine[0] : undefined
  if (repository === undefined) {
    return mine.length === 0
      ? `${Path.join(releasePaths(root).node, "node.json")} names no node ${args.node}: start it with ocx2 --repository REPO hook --node ${args.node} --root ${root}`
      : `${args.node} is the node of ${mine.join(" and ")}: name one with --repository REPO`
  }
  const entry = nodes[repository]
  if (entry?.user !== args.node) {
    return `${repository} has ${entry === undefined ? "no node" : `the node ${entry.user}`} in ${Path.join(releasePaths(root).node, "node.json")}, not ${args.node}: ` +
      `start it with ocx2 --repository ${repository} hook --node ${args.node} --root ${root}`
  }
  if (!Fs.existsSync(repository)) return `no repository file ${repository}`
  return { root, repository, nodeUser: args.node, serverUrl: entry.serverUrl, passwordsFile: undefined }
}

/** Runs the supervisor until SIGTERM or SIGINT (or the served release is switched), on the host's layers; its exit status. */
export const runSupervisor = async (argv: ReadonlyArray<string>, hosts: HostsService, program: string | undefined = process.argv[1]): Promise<number> => {
  const args = parseArgs(argv)
  if (typeof args === "string") {
    process.stderr.write(`ocx2 supervise: ${args}\n`)
    return 2
  }
  // exit 2 is for a wrong command line alone; a node this host does not have is a refusal (1)
  const config = resolveNode(args, program)
  if (typeof config === "string") {
    process.stderr.write(`ocx2 supervise: ${config}\n`)
    return 1
  }
  const files = supervisorFilesOf(config.root, config.repository, config.nodeUser)
  if (args.stop) {
    if (args.dryRun) {
      process.stdout.write(`would end the node ${config.nodeUser}'s supervisor, spare watcher, stream server and fast mode's poller under ${config.root}, leaving the watchers of running runs\n`)
      return 0
    }
    for (const line of await stopNode(config, releasePaths(config.root).care)) process.stdout.write(`${line}\n`)
    return 0
  }
  // a host whose Node changed under the release: said plainly (the journal and supervisor.log),
  // before an addon fails to load; the hook then does the node's rounds, and says the same
  const release = releaseDirOfProgram(program)
  const mismatch = release === undefined ? undefined : nodeMismatch(release)
  if (mismatch !== undefined) {
    process.stderr.write(`ocx2 supervise: ${mismatch}\n`)
    logTo(files, config)({ did: [`not started: ${mismatch}`] })
    return 1
  }
  if (args.dryRun) {
    // every tool's --dry-run: what it would supervise, and nothing started
    const running = readSupervisorInfo(files.info)
    process.stdout.write(`would supervise the node ${config.nodeUser} of ${config.repository} under ${config.root}` +
      `${config.passwordsFile !== undefined ? ` (a clone of ${config.serverUrl ?? "its server"}: ${args.shortCycle ? `pulled every ${cloneEveryMs} ms` : "pulled when its OCX page says a receipt arrived"})` : " (its receipts heard through inotify)"}` +
      `${running !== undefined ? `; pid ${running.pid} may already supervise it (${files.lock})` : ""}\n`)
    return 0
  }
  Fs.mkdirSync(Path.dirname(files.lock), { recursive: true, mode: 0o700 })
  const lockFd = Fs.openSync(files.lock, "a+", 0o600)
  const locked = flockNow(lockFd)
  if (locked !== "held") {
    Fs.closeSync(lockFd)
    const other = readSupervisorInfo(files.info)
    process.stderr.write(`ocx2 supervise: ${locked === "busy"
      ? `a supervisor already runs for ${config.nodeUser} on ${config.repository}${other !== undefined ? ` (pid ${other.pid})` : ""}: ${files.lock}`
      : `could not take ${files.lock}: ${locked}`}\n`)
    return 1
  }
  return config.passwordsFile !== undefined ? superviseClone(config, files, lockFd, program, { shortCycle: args.shortCycle }, hosts) : supervise(config, files, lockFd, hosts)
}

const supervise = (config: NodeConfig, files: SupervisorFiles, lockFd: number, hosts: HostsService): Promise<number> =>
  new Promise((resolveExit) => {
    const care = releasePaths(config.root).care
    Fs.mkdirSync(care, { recursive: true, mode: 0o700 })
    const runtime = ManagedRuntime.make(hosts.served(config))
    const since = new Date().toISOString()
    const started = processStartTime(process.pid) ?? ""
    let rounds = 0
    let lastRound: SupervisorInfo["lastRound"]
    const log = logTo(files, config)
    const writeInfo = () => {
      try {
        writeSupervisorInfo(files.info, {
          pid: process.pid, started, since, repository: config.repository, node: config.nodeUser, mode: "served",
          watchers: keeper.roll.snapshot(), rounds, ...(lastRound !== undefined ? { lastRound } : {})
        })
      } catch (e) {
        log({ did: [`could not write ${files.info}: ${firstLine(e)}`] })
      }
    }
    const watcherProgram = () => watcherOf(config.root)
    const keeper: RollKeeper = new RollKeeper({
      config, care, log, watcherProgram,
      run: (effect) => runtime.runPromise(effect),
      changed: () => writeInfo(),
      wake: () => void pump()
    })
    // the next run's watcher waiting ready (the spare): a while after a hand-off, once the run it
    // took has had its start to itself on the host's cores, unless one already waits
    let spareTimer: NodeJS.Timeout | undefined
    const spareSoon = (afterMs = 1000) => {
      if (spareTimer !== undefined || stopping) return
      spareTimer = setTimeout(() => {
        spareTimer = undefined
        ensureSpare(config, watcherProgram()).catch(() => undefined)
      }, afterMs)
    }

    // ---- the work, one piece at a time: watchers' ends first (their runs wait for an answer), then a round
    const work = { round: false, again: false }
    let pumping: Promise<void> | undefined
    let settling: NodeJS.Timeout | undefined
    let stopping = false

    const round = async () => {
      const cursorFile = cursorFileOf(config.root, config.repository, config.nodeUser)
      const from = readCursor(cursorFile)
      if (from === undefined) return log({ did: [`no cursor ${cursorFile}: the node has not started`] })
      // the hook's cheap question first (src/node/HookFast.ts): a receipt that cannot hold a message costs one read
      const db = openDatabase(config.repository, { readonly: true, fileMustExist: true })
      let arrivals: ReturnType<typeof readArrivals>
      let unsettled: ReturnType<typeof unsettledAfter>
      try {
        arrivals = readArrivals(db, from, config.nodeUser)
        unsettled = arrivals.count === 0 ? { count: 0, youngestMs: Infinity } : unsettledAfter(db, from, Date.now(), { everyPost: anySession(config.root) })
      } finally {
        db.close()
      }
      if (unsettled.count > 0 && unsettled.youngestMs < settleMs) {
        // a post whose crosslink is still being written: read it once it is (ReceiptSettled.ts)
        if (settling === undefined) settling = setTimeout(() => {
          settling = undefined
          wantRound()
        }, settleEveryMs)
        return
      }
      if (arrivals.count > 0) lookAgainFrom(from)
      if (arrivals.maybe === 0 && (arrivals.count === 0 || !anySession(config.root))) {
        if (arrivals.newest !== undefined) advanceCursor(cursorFile, arrivals.newest)
        return
      }
      // what may hold a message is read before round.lock is taken (a delta, a ticket change, a post
      // a session is given): what holds nothing the round decides or delivers moves the cursor past
      // it as the cheap question moves it, with no lock
      if (await nothingToDecide(from, cursorFile)) return
      rounds++
      const result = await runtime.runPromise(hookRound(config, { watcherProgram: watcherProgram(), passForgottenTurns: false }))
      if (result.decisions.some((d) => d.action.startsWith("handed"))) spareSoon()
      if (result.decisions.length > 0 || !(result.did.length === 1 && result.did[0] === "no run or stop for this node arrived")) {
        lastRound = { at: new Date().toISOString(), did: result.did }
        log({ round: { from: result.from, to: result.to }, did: result.did })
        writeInfo()
      }
    }

    /**
     * Whether what arrived after `from` holds no run for the node, stop or publish, and nothing a session
     * is given: then the cursor is moved past what was read, as the round would have moved it. Read
     * without round.lock, as the hook's cheap question is: only what was read is passed.
     */
    const nothingToDecide = async (from: Cursor, cursorFile: string): Promise<boolean> => {
      const found = await runtime.runPromise(nodeMessagesAfter(config.nodeUser, from, { arrivals: anySession(config.root) }))
      if (found.messages.length > 0 || found.arrivals.length > 0) return false
      advanceCursor(cursorFile, found.cursor)
      return true
    }

    // What arrived is read once more a while after each round, from where that round began: a page of
    // Fossil's that writes a post in several statements may be caught half-way by a round in a way the
    // settling above cannot see, and a run passed by then would otherwise wait for the node's next start.
    // Deciding a run again is safe (its lock lets one watcher have it); only what does something is logged.
    let againFrom: Cursor | undefined
    let againTimer: NodeJS.Timeout | undefined
    const lookAgainFrom = (from: Cursor) => {
      if (againFrom === undefined || from.rcvid < againFrom.rcvid || (from.rcvid === againFrom.rcvid && from.rid < againFrom.rid)) againFrom = from
      if (againTimer !== undefined || stopping) return
      againTimer = setTimeout(() => {
        againTimer = undefined
        work.again = true
        void pump()
      }, lookAgainMs)
    }
    const lookAgain = async () => {
      const from = againFrom
      againFrom = undefined
      if (from === undefined) return
      const decisions = await runtime.runPromise(Effect.gen(function*() {
        // nothing to decide again (the node's own replies): no round.lock taken for it
        if ((yield* nodeMessagesAfter(config.nodeUser, from)).messages.every((m) => m.kind === "publish")) return []
        const careDir = yield* CareDirectory
        const { serverCode } = yield* (yield* Repository).codes()
        return yield* careDir.withRoundLock(Effect.gen(function*() {
          // a run the round held back for want of room stays held back here too
          // room looked at after the read: a run posted after the setting was raised is held too
          const read = yield* nodeMessagesAfter(config.nodeUser, from)
          const found = holdStartsBack(diskRoom(config.root), read)
          const out: Array<{ run: string; action: string }> = []
          // a run handed on too often this minute waits for the roll's turn (RollKeeper.holdBack)
          for (const message of found.messages.filter((m) => m.kind !== "publish" && (m.kind !== "run" || keeper.mayHandOn(m.run)))) {
            out.push(yield* described(message.run, decideMessage(config, serverCode, message, actNow, { watcherProgram: watcherProgram() })))
          }
          return out
        }))
      }))
      for (const d of decisions) if (d.action.startsWith("handed")) keeper.handedOn(d.run)
      const did = decisions.filter((d) => /^(handed|refused|a stop came first|answered)/.test(d.action)).map((d) => `${d.run}: ${d.action}`)
      if (did.length > 0) log({ lookedAgain: from, did })
    }

    const pump = (): Promise<void> => {
      if (pumping !== undefined) return pumping
      pumping = (async () => {
        while (!stopping && (work.round || keeper.pending || work.again)) {
          if (keeper.ended.size > 0) {
            await keeper.decideEnded()
            continue
          }
          if (work.round) {
            work.round = false
            await round().catch((e) => log({ did: [`the round failed: ${firstLine(e)}`] }))
            again.roundDone()
            continue
          }
          if (work.again) {
            work.again = false
            await lookAgain().catch((e) => log({ did: [`reading again what arrived failed: ${firstLine(e)}`] }))
            continue
          }
          await keeper.lookAtWaiting().catch((e) => log({ did: [`looking at the waiting runs failed: ${firstLine(e)}`] }))
        }
      })().finally(() => {
        pumping = undefined
      })
      return pumping
    }
    const wantRound = () => {
      work.round = true
      void pump()
    }
    // a round that failed, or held its runs back for want of room, is tried again while they wait (RoundAgain.ts)
    const again = new RoundsAgain({
      waits: () => workWaits(config.root, config.repository, config.nodeUser),
      short: () => holdsBack(diskRoom(config.root)),
      run: wantRound
    })

    // ---- what it hears
    const base = Path.basename(config.repository)
    const repositoryFiles = new Set([base, `${base}-journal`, `${base}-wal`])
    const watchers: Array<Fs.FSWatcher> = []
    const onError = (what: string) => (e: Error) => log({ did: [`inotify on ${what} failed: ${firstLine(e)}; the hook's wake-ups still reach it`] })
    // the directory, not the file: the journal's removal (or the WAL's last write) comes after the commit, so a
    // round always follows the moment what arrived is readable
    watchers.push(Fs.watch(Path.dirname(config.repository), { persistent: true }, (_event, name) => {
      if (name !== null && repositoryFiles.has(name)) wantRound()
    }).on("error", onError(Path.dirname(config.repository))))
    watchers.push(Fs.watch(care, { persistent: true }, (_event, name) => {
      if (name !== null) keeper.heard(name)
    }).on("error", onError(care)))

    // a switch of the served release: end, so the service manager starts the new release's supervisor
    const current = releasePaths(config.root).current
    const servedNow = () => {
      try {
        return Fs.realpathSync(current)
      } catch {
        return undefined
      }
    }
    const served = servedNow()
    const fromRelease = (() => {
      try {
        return served !== undefined && Fs.realpathSync(process.argv[1] ?? "").startsWith(`${served}/`)
      } catch {
        return false
      }
    })()
    if (fromRelease) {
      watchers.push(Fs.watch(config.root, { persistent: true }, (_event, name) => {
        if (name === "current" && servedNow() !== served) {
          log({ did: [`the served release is now ${servedNow() ?? "none"}: ending, so that the service starts the new release's supervisor`] })
          void stop(0)
        }
      }).on("error", onError(config.root)))
    }

    const stop = async (code: number) => {
      if (stopping) return
      stopping = true
      for (const w of watchers) w.close()
      keeper.stop()
      again.stop()
      if (settling !== undefined) clearTimeout(settling)
      if (spareTimer !== undefined) clearTimeout(spareTimer)
      if (againTimer !== undefined) clearTimeout(againTimer)
      // what is being decided is finished: a round cut short would leave its runs to the next start
      await pumping?.catch(() => undefined)
      await runtime.dispose().catch(() => undefined)
      if (readSupervisorInfo(files.info)?.pid === process.pid) Fs.rmSync(files.info, { force: true })
      // its spare goes with it: an idle Node process of the node's, for a supervisor that is gone
      stopSpare(config.root)
      log({ did: ["stopped, and its spare watcher with it: the hook does the node's rounds itself again"] })
      Fs.closeSync(lockFd)
      resolveExit(code)
    }
    process.on("SIGTERM", () => void stop(0))
    process.on("SIGINT", () => void stop(130))
    process.on("SIGUSR1", wantRound)

    // ---- starting: as `hook --node` starts the node
    void (async () => {
      writeInfo()
      log({ did: [`supervising ${config.nodeUser} on ${config.repository} from ${config.root}`] })
      try {
        const before = readCursor(cursorFileOf(config.root, config.repository, config.nodeUser))
        const { left, decisions } = await runtime.runPromise(Effect.gen(function*() {
          const left = yield* finishLeftOutboxes(actNow)
          const { decisions } = yield* startNode(config, actNow, { watcherProgram: watcherProgram(), dryRun: false })
          return { left, decisions }
        }))
        // what arrived while the node was starting is read once more too
        if (before !== undefined) lookAgainFrom(before)
        const taken = keeper.start()
        writeInfo()
        log({
          did: [
            ...[...left, ...decisions].map((d) => `${d.run}: ${d.action}`),
            `${decisions.length} open run${decisions.length === 1 ? "" : "s"} decided; ${taken} live watcher${taken === 1 ? "" : "s"} taken back`
          ]
        })
        writeInfo()
        wantRound()
        spareSoon(0)
      } catch (e) {
        log({ did: [`could not start the node: ${firstLine(e)}`] })
        await stop(1)
      }
    })()
  })
