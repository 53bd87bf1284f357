// ocx2-watcher --root ROOT --repository FILE --node USER --run HASH [--server-url URL] [--person-start]
// Started detached by whoever hands it the run; it writes only to ROOT/care/RUN.log.
// ocx2-watcher --spare --root ROOT --repository FILE --node USER [--server-url URL]
// Started ahead of any run, it waits to be handed one (src/watcher/Spare.ts), then is its watcher.

import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { WatcherHostsService } from "../../services/Hosts.js"
import { releasePaths } from "../release/ReleasePaths.js"
import { cloneEntryOf } from "../root/CloneFiles.js"
import { clonePlaceOf, readPasswordsFile } from "../root/ClonePasswords.js"
import { watcherOf } from "../pickup/HandOff.js"
import { ensureSpare } from "../pickup/SpareClient.js"
import { spareFiles } from "../care/SpareFiles.js"
import { warmUp } from "./Rehearsal.js"
import { serveAsSpare } from "./Spare.js"
import type { NodeConfig } from "../root/NodeConfig.js"
import { crashPoints, watchRun, type CrashPoint, type WatcherOptions } from "./Watcher.js"

export const usage =
  "usage: ocx2-watcher --root ROOT --repository FILE --node USER --run HASH [--server-url URL] [--person-start]"
export const spareUsage = "usage: ocx2-watcher --spare --root ROOT --repository FILE --node USER [--server-url URL]"

const parseArgs = (argv: ReadonlyArray<string>) => {
  const named = new Map<string, string>()
  let personStart = false
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === "--person-start") personStart = true
    else if (["--root", "--repository", "--node", "--run", "--server-url"].includes(arg) && i + 1 < argv.length) named.set(arg, argv[++i]!)
    else return `unknown argument ${JSON.stringify(arg)}; ${usage}`
  }
  for (const required of ["--root", "--repository", "--node"]) {
    if (!named.has(required)) return `${required} is missing; ${usage}`
  }
  const config: NodeConfig = {
    root: Path.resolve(named.get("--root")!),
    repository: Path.resolve(named.get("--repository")!),
    nodeUser: named.get("--node")!,
    serverUrl: named.get("--server-url"),
    passwordsFile: undefined
  }
  return { config, run: named.get("--run"), personStart }
}

/** The node a spare serves (or a request to it names): every argument but --run and --person-start. */
export const parseNodeArgs = (argv: ReadonlyArray<string>): NodeConfig | string => {
  const parsed = parseArgs(argv)
  if (typeof parsed === "string") return parsed
  if (parsed.run !== undefined || parsed.personStart) return `a spare is started for a node, not a run; ${spareUsage}`
  return parsed.config
}

/**
 * The crash point a test set, once: with OCX2_CRASH_ONCE=FILE only the watcher that takes FILE
 * crashes (it is left as FILE.RUN), and only the first watcher of a run: one started again for the
 * same run, with the same environment, does not.
 */
const crashOnce = (crashAt: string | undefined, run: string): string | undefined => {
  const once = process.env.OCX2_CRASH_ONCE
  if (crashAt === undefined || once === undefined || once === "") return crashAt
  try {
    Fs.linkSync(once, `${once}.${run}`)
  } catch {
    return undefined // none to take, or this run crashed once already
  }
  try {
    Fs.unlinkSync(once)
    return crashAt
  } catch {
    Fs.rmSync(`${once}.${run}`, { force: true })
    return undefined
  }
}

export const parseWatcherArgs = (argv: ReadonlyArray<string>): WatcherOptions | string => {
  const parsed = parseArgs(argv)
  if (typeof parsed === "string") return parsed
  const { config, run, personStart } = parsed
  if (run === undefined) return `--run is missing; ${usage}`
  if (!/^(?:[0-9a-f]{40}|[0-9a-f]{64})$/.test(run)) return `--run ${JSON.stringify(run)} is not a full artifact hash`
  const crashAt = crashOnce(process.env.OCX2_CRASH_AT, run)
  return {
    config,
    run,
    personStart,
    crashAt: crashPoints.includes(crashAt as CrashPoint) ? (crashAt as CrashPoint) : undefined
  }
}

/** The watcher's program, on the host's layers (bin/ocx2-watcher.ts gives the live ones). */
export const main = (argv: ReadonlyArray<string>, hosts: WatcherHostsService) => {
  const mainAt = Date.now()
  if (argv[0] === "--spare") {
    const config = parseNodeArgs(argv.slice(1))
    if (typeof config === "string") {
      process.stderr.write(`${config}\n`)
      process.exit(2)
    }
    // the node's care directory gone (the node removed meanwhile): no spare, and nothing made again
    if (!Fs.existsSync(spareFiles(config.root).dir)) return process.exit(0)
    return void warmUp(config, hosts).then(() => serveAsSpare(config, parseNodeArgs, (taken) => {
      // named as a started watcher is (ps, and whoever looks for the run's watcher by its hash)
      process.title = `ocx2-watcher --run ${taken.run} --root ${config.root}`
      watch({ config, run: taken.run, personStart: taken.personStart, crashAt: undefined, mainAt: taken.at, spareSince: mainAt }, hosts)
    }))
  }
  const parsed = parseWatcherArgs(argv)
  if (typeof parsed === "string") {
    process.stderr.write(`${parsed}\n`)
    process.exit(2)
  }
  watch({ ...parsed, mainAt }, hosts)
}

/** Watches the run: in a watcher started for it, or in the spare that took it. */
const watch = (options: WatcherOptions, hosts: WatcherHostsService) => {
  const care = releasePaths(options.config.root).care
  const logLine = (line: string) => {
    try {
      Fs.mkdirSync(care, { recursive: true, mode: 0o700 })
      Fs.appendFileSync(Path.join(care, `${options.run}.log`), `${new Date().toISOString()} ${line}\n`)
    } catch {
      // nowhere left to say it
    }
  }
  // on a clone's host (`ocx2 node` registered the clone): writes pushed to the server as the node
  // user, senders asked of the server, records read after a pull, the passwords file one of OCX's own
  const clone = cloneEntryOf(options.config.root, options.config.repository)
  const passwords = clone === undefined ? undefined : readPasswordsFile(clone.passwordsFile)
  if (passwords?._tag === "Refused") {
    logLine(`the clone's passwords file is refused: ${passwords.why}`)
    process.exit(2)
  }
  const onClone = clone !== undefined && passwords?._tag === "Passwords"
    ? { config: { ...options.config, serverUrl: clone.serverUrl, passwordsFile: passwords.passwords.file }, passwords: passwords.passwords }
    : undefined
  const watched = onClone === undefined ? options : { ...options, config: onClone.config }
  // asked once: the run's end waits for an ask begun while it ran
  let spareAsked: Promise<unknown> | undefined
  const spareOnce = Effect.tryPromise(() => (spareAsked ??= ensureSpare(options.config, watcherOf(options.config.root)))).pipe(Effect.ignore)
  const program = watchRun(watched, (lock) =>
    onClone !== undefined
      ? hosts.cloneRecord(clonePlaceOf(onClone.config, onClone.passwords), { holdFds: [lock.fd] })
      : hosts.record(options.config.repository, { holdFds: [lock.fd] })).pipe(
      Effect.flatMap((watched) => watched === "busy" ? Effect.sync(() => logLine("another watcher holds the run")) : Effect.void),
      Effect.tapErrorCause((cause) => Effect.sync(() => logLine(`watcher failed: ${Cause.pretty(cause)}`))),
      // the next run's watcher waits ready: started once this run's process has had its start to
      // itself (a run that ends sooner starts it at its end), from the served release
      (watching) => Effect.scoped(Effect.zipRight(Effect.forkScoped(Effect.delay(spareOnce, "2 seconds")), watching)),
      Effect.ensuring(spareOnce),
      // what a run costs its node beyond the process itself, as an operator or a benchmark reads it
      Effect.ensuring(Effect.sync(() => {
        const used = process.resourceUsage()
        logLine(`the watcher's peak memory: ${(used.maxRSS / 1024).toFixed(1)} MB; its CPU: ${((used.userCPUTime + used.systemCPUTime) / 1e6).toFixed(2)} s (user ${(used.userCPUTime / 1e6).toFixed(2)}, system ${(used.systemCPUTime / 1e6).toFixed(2)})`)
      })),
      Effect.provide(hosts.care(options.config.root)),
      Effect.provide(hosts.sandbox(options.config.root)),
      Effect.provide(hosts.checkouts)
    )
  NodeRuntime.runMain(program, {
    disableErrorReporting: true,
    // the run is over and everything written: end now, not when the last idle handle (a spare's,
    // a socket's) lets the event loop go, so a node's watchers are only those with a run (issue 13)
    teardown: (exit, onExit) => {
      const code = Exit.isSuccess(exit) ? 0 : Cause.isInterruptedOnly(exit.cause) ? 130 : 1
      onExit(code)
      process.exit(code)
    }
  })
}
