// `ocx2 supervise --node USER --stop`: ends the node's resident processes on this host in one call:
// its supervisor (SIGTERM: it finishes what it is deciding), its spare watcher, its stream server
// and fast mode's poller. A supervisor or poller that a systemd unit runs would be started again by
// its unit at once (Restart=always), so it is left to `systemctl stop UNIT`, which the answer
// names; the supervisor's own stop ends its spare. The watchers of running runs are left alone: each holds
// its run's lock and answers it, with or without a node around it (docs/operations.md, "Stopping a
// node").

import * as Fs from "node:fs"
import { sparePid } from "../care/SpareFiles.js"
import { runningSupervisor } from "../root/SupervisorFiles.js"
import type { NodeConfig } from "../root/NodeConfig.js"
import { runningServer } from "../follow/StreamServer.js"
import { pollersOfKind } from "./HookInstall.js"
import { holderOf, runOfLockFile } from "./WatcherRoll.js"

const alive = (pid: number): boolean => {
  try {
    // a zombie has no command line left: gone for our purpose
    return Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8") !== ""
  } catch {
    return false
  }
}

const commandLine = (pid: number): ReadonlyArray<string> => {
  try {
    return Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
  } catch {
    return []
  }
}

/** The systemd service a process runs in (from its cgroup), or undefined. */
export const serviceOf = (pid: number): string | undefined => {
  try {
    const cgroup = Fs.readFileSync(`/proc/${pid}/cgroup`, "utf8")
    return /\/([^/\n]+\.service)(?:\/|$)/m.exec(cgroup)?.[1]
  } catch {
    return undefined
  }
}

const untilGone = async (pid: number, ms: number): Promise<boolean> => {
  for (const deadline = Date.now() + ms; alive(pid);) {
    if (Date.now() > deadline) return false
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  return true
}

const terminate = async (pid: number, what: string, ms: number): Promise<string> => {
  try {
    process.kill(pid, "SIGTERM")
  } catch {
    return `${what} (pid ${pid}) had ended already`
  }
  return (await untilGone(pid, ms)) ? `ended ${what} (pid ${pid})` : `${what} (pid ${pid}) did not end within ${ms / 1000} s of SIGTERM`
}

/** The watchers holding runs in `care` now: each run's lock names its holder's pid. */
const liveWatchers = (care: string): ReadonlyArray<number> => {
  let names: Array<string>
  try {
    names = Fs.readdirSync(care)
  } catch {
    return []
  }
  return names.map(runOfLockFile).flatMap((run) => {
    const pid = run === undefined ? undefined : holderOf(care, run)
    return pid !== undefined && alive(pid) ? [pid] : []
  })
}

/** Ends the node's resident processes, each in words; the watchers of running runs go on. */
export const stopNode = async (config: NodeConfig, care: string): Promise<ReadonlyArray<string>> => {
  const did: Array<string> = []
  // read first: the supervisor's own stop ends its spare, and takes its pid file with it
  const spare = sparePid(config.root)
  const supervisor = runningSupervisor(config.root, config.repository, config.nodeUser)
  if (supervisor === undefined) did.push("no supervisor runs for the node")
  else {
    const unit = serviceOf(supervisor.pid)
    // its unit (Restart=always) would start it again at once: the unit is what stops it
    did.push(unit !== undefined
      ? `the supervisor (pid ${supervisor.pid}) runs in the unit ${unit}: left to systemctl stop ${unit}`
      // it finishes the round it is in first: up to a minute on a loaded host
      : await terminate(supervisor.pid, "the supervisor", 60_000))
  }
  if (spare !== undefined && alive(spare) && commandLine(spare).includes("--spare") && commandLine(spare).includes(config.root)) {
    did.push(await terminate(spare, "the spare watcher", 10_000))
  }
  const stream = runningServer(config.root)
  if (stream !== undefined && commandLine(stream.pid).includes("--stream-server")) did.push(await terminate(stream.pid, "the stream server", 10_000))
  for (const poller of pollersOfKind(config.repository).filter((p) => p.kind === "node")) {
    const unit = serviceOf(poller.pid)
    did.push(unit !== undefined
      ? `fast mode's poller (pid ${poller.pid}) runs in the unit ${unit}: left to systemctl stop ${unit}`
      : await terminate(poller.pid, "fast mode's poller", 10_000))
  }
  const running = liveWatchers(care)
  if (running.length > 0) {
    did.push(`left ${running.length} watcher${running.length === 1 ? "" : "s"} of running runs alone (pid ${running.join(", ")}): each answers its run; the hook does the node's rounds again`)
  }
  return did
}
