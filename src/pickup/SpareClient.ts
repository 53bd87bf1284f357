// The askers' side of the spare watcher: hand a run to the spare when one waits, else start a
// watcher as before; and start a spare when none waits. Anything but a clear "taken" means the
// spare did not take the run, and a watcher is started for it: were the spare to have taken it
// after all, the run's lock lets only one of the two watch it.

import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import { handOff, nodeArgs, type HandOffOptions, watcherEnvironment, watcherNodeFlags } from "./HandOff.js"
import type { NodeConfig } from "../root/NodeConfig.js"
import { releasePaths } from "../release/ReleasePaths.js"
import { writeHandOff } from "../care/HandOffFiles.js"
import { flockNow } from "../care/FlockNow.js"
import { socketPathFits, spareFiles, sparePid, spareSetting, type SpareAnswer, type SpareRequest } from "../care/SpareFiles.js"

/** One request, one answer; undefined when no spare answers within the time. */
export const askSpare = (root: string, request: SpareRequest, timeoutMillis = 1000): Promise<SpareAnswer | undefined> =>
  new Promise((resolve) => {
    const { socket } = spareFiles(root)
    if (!socketPathFits(socket) || !Fs.existsSync(socket)) return resolve(undefined)
    let answered = ""
    let done = false
    const finish = (answer: SpareAnswer | undefined) => {
      if (done) return
      done = true
      clearTimeout(timer)
      connection.destroy()
      resolve(answer)
    }
    const connection = Net.createConnection(socket)
    const timer = setTimeout(() => finish(undefined), timeoutMillis)
    connection.on("connect", () => connection.write(`${JSON.stringify(request)}\n`))
    connection.on("data", (chunk) => {
      answered += chunk.toString("utf8")
      const end = answered.indexOf("\n")
      if (end === -1) return
      try {
        finish(JSON.parse(answered.slice(0, end)) as SpareAnswer)
      } catch {
        finish(undefined)
      }
    })
    connection.on("error", () => finish(undefined))
    connection.on("close", () => finish(undefined))
  })

export interface HandedOff {
  readonly pid: number
  /** the spare took it (its program already loaded) */
  readonly warm: boolean
}

/**
 * Hands the run to the node's spare watcher, or starts a watcher for it. A hand-off with an
 * environment of its own (the crash tests') always starts one: a spare's environment is its own.
 */
export const handOffRun = async (config: NodeConfig, run: string, options: HandOffOptions): Promise<HandedOff> => {
  const handed = await handOffOnce(config, run, options)
  // the supervisor's roll watches the watcher from here, not only once it holds the run's lock
  writeHandOff(releasePaths(config.root).care, run, handed.pid)
  return handed
}

const handOffOnce = async (config: NodeConfig, run: string, options: HandOffOptions): Promise<HandedOff> => {
  if (options.env === undefined || Object.keys(options.env).length === 0) {
    const answer = await askSpare(config.root, {
      run,
      personStart: options.personStart === true,
      program: options.watcherProgram,
      node: nodeArgs(config)
    })
    if (answer !== undefined && "taken" in answer) return { pid: answer.taken, warm: true }
  }
  return { pid: handOff(config, run, options), warm: false }
}

/**
 * A spare of this root waits: the pid its lock file names (written once it holds the lock, cleared
 * when it takes a run) is a spare of this root. Read from files alone, so a spare too busy to
 * answer a ping on a loaded host is not taken for none (a second would start only to end).
 */
export const spareWaits = (root: string): boolean => {
  const pid = sparePid(root)
  if (pid === undefined) return false
  try {
    const argv = Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
    return argv.includes("--spare") && argv.includes(root)
  } catch {
    return false
  }
}

/** A spare watcher of this root still starting: its process there, not listening yet. */
export const spareStarting = (root: string): boolean =>
  Fs.readdirSync("/proc").some((e) => {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) return false
    try {
      const argv = Fs.readFileSync(`/proc/${e}/cmdline`, "utf8").split("\0")
      return argv.includes("--spare") && argv.includes(root)
    } catch {
      return false
    }
  })

/**
 * Starts a spare for the node unless one answers, or one is still starting (a second would only
 * find the first's lock and end: a Node start for nothing), or ROOT/settings/spare-watcher says off. It is
 * started detached, from the given watcher program (the served release's), with the asker's
 * environment less anything a test set for one watcher.
 */
export const ensureSpare = async (config: NodeConfig, watcherProgram: string): Promise<number | undefined> => {
  if (spareSetting(config.root).idleSeconds === "off") return undefined
  const files = spareFiles(config.root)
  if (!socketPathFits(files.socket)) return undefined
  if (spareWaits(config.root)) return undefined
  if ((await askSpare(config.root, { ping: true }, 500)) !== undefined) return undefined
  if (spareStarting(config.root)) return undefined
  try {
    Fs.mkdirSync(files.dir, { mode: 0o700 })
  } catch (e) {
    // the care directory gone (the node removed) is no place for a spare
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") return undefined
  }
  // Watchers ending together could each find none starting and each start one, all but one to
  // end at once. So the look and the start are one step, under a lock only one asker gets; the
  // others leave it to that one. The spawn returns once the spare's program is exec'd, so the
  // next asker's look finds it.
  const starting = Fs.openSync(files.starting, Fs.constants.O_RDWR | Fs.constants.O_CREAT, 0o600)
  try {
    if (flockNow(starting) !== "held") return undefined
    if (spareWaits(config.root) || spareStarting(config.root)) return undefined
    return startSpare(config, watcherProgram, files.log)
  } finally {
    Fs.closeSync(starting)
  }
}

const startSpare = (config: NodeConfig, watcherProgram: string, log: string): number | undefined => {
  const out = Fs.openSync(log, "a", 0o600)
  try {
    const env = { ...process.env, ...watcherEnvironment }
    delete env["OCX2_CRASH_AT"]
    const child = ChildProcess.spawn(process.execPath, [...watcherNodeFlags, watcherProgram, "--spare", ...nodeArgs(config)], {
      detached: true,
      stdio: ["ignore", out, out],
      env
    })
    child.unref()
    return child.pid
  } finally {
    Fs.closeSync(out)
  }
}

/** Ends the node's spare, if one waits (a node being removed, a test world closing). */
export const stopSpare = (root: string): void => {
  const pid = sparePid(root)
  if (pid === undefined) return
  try {
    // the pid file may outlive its spare: only a spare of this root is ended
    const cmdline = Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
    if (!cmdline.includes("--spare") || !cmdline.includes(root)) return
    process.kill(pid, "SIGTERM")
  } catch {
    // gone already
  }
}
