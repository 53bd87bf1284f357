// ocx2 supervise --node USER [--root ROOT] [--repository REPO]: the node's resident supervisor on
// the server's host (docs/architecture.md, "The supervisor"), as actors. What it hears is one Queue
// of events (supervisor/NodeEvents.ts): inotify on the served file's directory (the file, its
// journal, its WAL) and on the care directory, SIGUSR1 (the after-receive hook's wake-up), its
// timers. One fiber takes them in batches and does the work one piece at a time: a watcher's end
// first (its run waits for an answer), then a round (another right after when more arrived
// meanwhile), then a second look at what a round read, then the runs waiting for their process
// user. Each run's watcher has a fiber of its own (supervisor/Roll.ts) that sees it end and has its
// run decided again under round.lock and the run's lock, as the node's start does: lost when it
// started and has no ended, handed on when it never started, and the first run waiting for its
// process user handed on. It starts as `hook --node` does: what dead watchers left in their
// outboxes sent, every open run decided, every live watcher taken back. The whole lives in one
// Scope: SIGTERM (or SIGINT, or the served release switched) closes it, the piece of work under
// way finished first.

import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as FiberHandle from "effect/FiberHandle"
import * as Queue from "effect/Queue"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { HostsService } from "../../services/Hosts.js"
import { releasePaths, rootOfProgram } from "../release/ReleasePaths.js"
import { readClones } from "../root/CloneFiles.js"
import { actNow } from "../operations/Operations.js"
import { cloneEveryMs, superviseClone } from "./CloneSupervisor.js"
import { flockNow } from "../care/FlockNow.js"
import { canonicalRepository, type Cursor, cursorFileOf, readCursor, readNodes } from "../root/HookFiles.js"
import type { NodeConfig } from "../root/NodeConfig.js"
import { finishLeftOutboxes } from "./Recovery.js"
import { startNode, watcherOf } from "./Round.js"
import { stopSpare } from "../pickup/SpareClient.js"
import { stopNode } from "./NodeStop.js"
import { readSupervisorInfo, type SupervisorFiles, supervisorFilesOf } from "../root/SupervisorFiles.js"
import { nodeMismatch, releaseDirOfProgram } from "../release/StagedNode.js"
import { firstLine, logTo } from "./SupervisorLog.js"
import { makeRoll } from "./supervisor/Roll.js"
import { lookAgainFrom, type Served, work } from "./supervisor/ServedWork.js"
import { feed, listen, NodeEvent, namesWritten, signals, type Source } from "./supervisor/NodeEvents.js"
import { makeShell, type NodeShell } from "./supervisor/NodeShell.js"

export const superviseUsage = "usage: ocx2 supervise --node USER [--root ROOT] [--repository REPO] [--short-cycle] [--stop] [--dry-run]"

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

/**
 * The supervisor until SIGTERM or SIGINT (or the served release is switched), on the host's layers:
 * its exit status. What comes before the supervising (the command line, the node, --stop, --dry-run,
 * the supervisor's lock) is plain and at once.
 */
export const runSupervisor = (argv: ReadonlyArray<string>, hosts: HostsService, program: string | undefined = process.argv[1]): Effect.Effect<number> =>
  Effect.suspend(() => {
    const args = parseArgs(argv)
    if (typeof args === "string") return refuse(args, 2)
    // exit 2 is for a wrong command line alone; a node this host does not have is a refusal (1)
    const config = resolveNode(args, program)
    if (typeof config === "string") return refuse(config, 1)
    const files = supervisorFilesOf(config.root, config.repository, config.nodeUser)
    if (args.stop) return stopCommand(config, args.dryRun)
    // a host whose Node changed under the release: said plainly (the journal and supervisor.log),
    // before an addon fails to load; the hook then does the node's rounds, and says the same
    const release = releaseDirOfProgram(program)
    const mismatch = release === undefined ? undefined : nodeMismatch(release)
    if (mismatch !== undefined) {
      logTo(files, config)({ did: [`not started: ${mismatch}`] })
      return refuse(mismatch, 1)
    }
    if (args.dryRun) return Effect.sync(() => dryRunWords(config, files, args.shortCycle)).pipe(Effect.as(0))
    const lockFd = lockSupervisor(config, files)
    if (typeof lockFd === "string") return refuse(lockFd, 1)
    return config.passwordsFile !== undefined
      ? superviseClone(config, files, lockFd, program, { shortCycle: args.shortCycle }, hosts)
      : supervise(config, files, lockFd, hosts)
  })

const refuse = (words: string, code: number) => Effect.sync(() => process.stderr.write(`ocx2 supervise: ${words}\n`)).pipe(Effect.as(code))

const stopCommand = (config: NodeConfig, dryRun: boolean): Effect.Effect<number> =>
  dryRun
    ? Effect.sync(() => process.stdout.write(`would end the node ${config.nodeUser}'s supervisor, spare watcher, stream server and fast mode's poller under ${config.root}, leaving the watchers of running runs\n`)).pipe(Effect.as(0))
    : Effect.promise(() => stopNode(config, releasePaths(config.root).care)).pipe(
      Effect.tap((lines) => Effect.sync(() => { for (const line of lines) process.stdout.write(`${line}\n`) })),
      Effect.as(0))

/** every tool's --dry-run: what it would supervise, and nothing started */
const dryRunWords = (config: NodeConfig, files: SupervisorFiles, shortCycle: boolean) => {
  const running = readSupervisorInfo(files.info)
  process.stdout.write(`would supervise the node ${config.nodeUser} of ${config.repository} under ${config.root}` +
    `${config.passwordsFile !== undefined ? ` (a clone of ${config.serverUrl ?? "its server"}: ${shortCycle ? `pulled every ${cloneEveryMs} ms` : "pulled when its OCX page says a receipt arrived"})` : " (its receipts heard through inotify)"}` +
    `${running !== undefined ? `; pid ${running.pid} may already supervise it (${files.lock})` : ""}\n`)
}

/** The node's supervisor lock taken (its descriptor, held for the supervisor's life), or why not. */
const lockSupervisor = (config: NodeConfig, files: SupervisorFiles): number | string => {
  Fs.mkdirSync(Path.dirname(files.lock), { recursive: true, mode: 0o700 })
  const lockFd = Fs.openSync(files.lock, "a+", 0o600)
  const locked = flockNow(lockFd)
  if (locked === "held") return lockFd
  Fs.closeSync(lockFd)
  const other = readSupervisorInfo(files.info)
  return locked === "busy"
    ? `a supervisor already runs for ${config.nodeUser} on ${config.repository}${other !== undefined ? ` (pid ${other.pid})` : ""}: ${files.lock}`
    : `could not take ${files.lock}: ${locked}`
}

/** The server's supervisor: its shell, then its work on the served layers until it is stopped. */
const supervise = (config: NodeConfig, files: SupervisorFiles, lockFd: number, hosts: HostsService): Effect.Effect<number> =>
  Effect.scoped(Effect.gen(function*() {
    const care = releasePaths(config.root).care
    Fs.mkdirSync(care, { recursive: true, mode: 0o700 })
    const shell = yield* makeShell({
      config, files, lockFd, mode: "served",
      // its spare goes with it: an idle Node process of the node's, for a supervisor that is gone
      atEnd: Effect.sync(() => stopSpare(config.root)),
      stoppedWords: "stopped, and its spare watcher with it: the hook does the node's rounds itself again"
    })
    // the hook's wake-up heard before the info file tells the hook whom to wake (SIGUSR1's default ends a process)
    yield* feed(shell.queue, signals("SIGUSR1"), () => NodeEvent.RoundDue()).pipe(Effect.orDie)
    yield* shell.writeInfo
    yield* shell.log({ did: [`supervising ${config.nodeUser} on ${config.repository} from ${config.root}`] })
    return yield* Effect.scoped(served(config, care, shell)).pipe(
      Effect.provide(hosts.served(config)),
      Effect.catchAllCause((cause) => Cause.isInterruptedOnly(cause) ? Effect.succeed(1) : shell.log({ did: [`could not start the node: ${firstLine(Cause.squash(cause))}`] }).pipe(Effect.as(1))))
  }))

/** What the server's supervisor hears, its node started, and its one fiber of work until it is stopped. */
const served = (config: NodeConfig, care: string, shell: NodeShell) =>
  Effect.gen(function*() {
    const roll = yield* makeRoll({ config, care, log: shell.log, changed: shell.writeInfo, queue: shell.queue, watcherProgram: () => watcherOf(config.root) })
    yield* Ref.set(shell.watchers, roll.snapshot)
    const s: Served = {
      config, shell, roll,
      againFrom: yield* Ref.make<Cursor | undefined>(undefined),
      againTimer: yield* FiberHandle.make(), settleTimer: yield* FiberHandle.make(), retryTimer: yield* FiberHandle.make(),
      tries: yield* Ref.make(0)
    }
    yield* hear(config, care, shell)
    yield* startServed(s)
    yield* shell.workOn((batch) => work(s, batch))
    return yield* shell.stopped
  })

/** The node's event sources on the server's host, each a scoped Stream feeding its queue. */
const hear = (config: NodeConfig, care: string, shell: NodeShell) =>
  Effect.gen(function*() {
    const base = Path.basename(config.repository)
    const repositoryFiles = new Set([base, `${base}-journal`, `${base}-wal`])
    const failed = (what: string) => (e: Error) => shell.log({ did: [`inotify on ${what} failed: ${firstLine(e)}; the hook's wake-ups still reach it`] })
    // the directory, not the file: the journal's removal (or the WAL's last write) comes after the commit, so a
    // round always follows the moment what arrived is readable
    const dir = Path.dirname(config.repository)
    yield* feed(shell.queue, namesWritten(dir, failed(dir)), (name) => (repositoryFiles.has(name) ? NodeEvent.RoundDue() : undefined))
    yield* feed(shell.queue, namesWritten(care, failed(care)), (name) => NodeEvent.CareChanged({ name }))
    yield* endOnReleaseSwitch(config, shell)
  })

/** A switch of the served release: the supervisor ends, so the service manager starts the new release's supervisor. */
const endOnReleaseSwitch = (config: NodeConfig, shell: NodeShell) => {
  const current = releasePaths(config.root).current
  const servedNow = () => {
    try {
      return Fs.realpathSync(current)
    } catch {
      return undefined
    }
  }
  const servedAtStart = servedNow()
  const fromRelease = (() => {
    try {
      return servedAtStart !== undefined && Fs.realpathSync(process.argv[1] ?? "").startsWith(`${servedAtStart}/`)
    } catch {
      return false
    }
  })()
  if (!fromRelease) return Effect.void
  const names = namesWritten(config.root, (e) => shell.log({ did: [`inotify on ${config.root} failed: ${firstLine(e)}; the hook's wake-ups still reach it`] }))
  const switched: Source<string> = (listening) => names(listening).pipe(Stream.filter((name) => name === "current" && servedNow() !== servedAtStart))
  return listen(switched, () =>
    shell.log({ did: [`the served release is now ${servedNow() ?? "none"}: ending, so that the service starts the new release's supervisor`] }).pipe(
      Effect.zipRight(shell.stop(0))))
}

/** Starting, as `hook --node` starts the node: what dead watchers left sent, every open run decided, every live watcher taken back. */
const startServed = (s: Served) =>
  Effect.gen(function*() {
    const { config, shell } = s
    const before = readCursor(cursorFileOf(config.root, config.repository, config.nodeUser))
    const left = yield* finishLeftOutboxes(actNow)
    const { decisions } = yield* startNode(config, actNow, { watcherProgram: watcherOf(config.root), dryRun: false })
    // what arrived while the node was starting is read once more too
    if (before !== undefined) yield* lookAgainFrom(s, before)
    const taken = yield* s.roll.takeBack
    yield* shell.writeInfo
    yield* shell.log({
      did: [
        ...[...left, ...decisions].map((d) => `${d.run}: ${d.action}`),
        `${decisions.length} open run${decisions.length === 1 ? "" : "s"} decided; ${taken} live watcher${taken === 1 ? "" : "s"} taken back`
      ]
    })
    yield* shell.writeInfo
    yield* Queue.offer(shell.queue, NodeEvent.RoundDue())
    yield* shell.spareSoon(0)
  }).pipe(Effect.uninterruptible)
