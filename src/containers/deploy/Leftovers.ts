import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { pause } from "./Exec.js"
import { unmountAll } from "./Mounts.js"

/**
 * What a container holds on the host, written down under ROOT/containers/NAME/record.json before
 * each is taken, so that a server killed (SIGKILL, a crash) leaves nothing that its next start
 * cannot find: processes (through their cgroups, and the relay by its pid), mounts (everything
 * mounted under the container's directory), loop devices (those backing its disk file), cgroups.
 */
export interface ContainerRecord {
  readonly cgroups: ReadonlyArray<string>
  /** the relay's pid; killed only while its command line still names this container's socket */
  readonly relayPid?: number
  /** stood up ahead for a deploy to come (layers/BwrapDeployer.ts): no run has it yet */
  readonly spare?: boolean
}

export const containersDir = (root: string) => Path.join(root, "containers")

/** a container's cgroup name: its ROOT's (so that an operator, or a test, tells servers apart) and its own */
export const cgroupPrefix = (root: string): string => `ocx2-container-${Crypto.createHash("sha256").update(root).digest("hex").slice(0, 8)}-`
export const recordFile = (dir: string) => Path.join(dir, "record.json")
export const diskFile = (dir: string) => Path.join(dir, "disk.img")
export const socketFile = (dir: string) => Path.join(dir, "proxy.sock")

export const writeRecord = (dir: string, record: ContainerRecord): void => {
  const temporary = recordFile(dir) + ".partial"
  Fs.writeFileSync(temporary, JSON.stringify(record))
  Fs.renameSync(temporary, recordFile(dir))
}

const readRecord = (dir: string): ContainerRecord => {
  try {
    const v = JSON.parse(Fs.readFileSync(recordFile(dir), "utf8")) as ContainerRecord
    return { cgroups: Array.isArray(v.cgroups) ? v.cgroups.filter((c) => typeof c === "string") : [], ...(typeof v.relayPid === "number" ? { relayPid: v.relayPid } : {}) }
  } catch {
    return { cgroups: [] }
  }
}

const procsOf = (group: string): ReadonlyArray<number> => {
  try {
    return Fs.readFileSync(Path.join(group, "cgroup.procs"), "utf8").split("\n").filter((l) => l !== "").map(Number)
  } catch {
    return []
  }
}

const kill = (pid: number) => {
  try {
    process.kill(pid, "SIGKILL")
  } catch {
    // gone already
  }
}

/** kills every process of the groups, until none is left, and removes them; what could not be */
export const endGroups = async (groups: ReadonlyArray<string>): Promise<ReadonlyArray<string>> => {
  const problems: Array<string> = []
  for (const group of groups) {
    // v2 ends a whole group at once; v1 each process (the kernel reaps those of a dead pid namespace)
    const killFile = Path.join(group, "cgroup.kill")
    for (let attempt = 0; ; attempt++) {
      if (!Fs.existsSync(group)) break
      const pids = procsOf(group)
      if (pids.length === 0) {
        try {
          Fs.rmdirSync(group)
          break
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code === "ENOENT") break
          // EBUSY: a process is on its way out
        }
      }
      if (Fs.existsSync(killFile)) {
        try {
          Fs.writeFileSync(killFile, "1")
        } catch {
          for (const pid of pids) kill(pid)
        }
      } else for (const pid of pids) kill(pid)
      if (attempt === 500) {
        problems.push(`the cgroup ${group} still holds ${pids.join(" ")}`)
        break
      }
      await pause(Math.min(2 + attempt, 20))
    }
  }
  return problems
}

const cmdline = (pid: number): string => {
  try {
    return Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8")
  } catch {
    return ""
  }
}

/** ends the relay of a container, when the pid still is it */
export const endRelay = (dir: string, pid: number | undefined): void => {
  if (pid !== undefined && cmdline(pid).includes(socketFile(dir))) kill(pid)
}

/** frees everything one container's directory records and holds, then removes it; what could not be */
export const freeContainer = async (dir: string): Promise<ReadonlyArray<string>> => {
  const record = readRecord(dir)
  endRelay(dir, record.relayPid)
  const problems = [...(await endGroups(record.cgroups)), ...(await unmountAll(dir, diskFile(dir)))]
  if (problems.length === 0) Fs.rmSync(dir, { recursive: true, force: true })
  return problems
}

/** what a server killed before it stopped its containers left under ROOT: freed at the next start */
export const sweepContainers = async (root: string): Promise<{ readonly swept: number; readonly problems: ReadonlyArray<string> }> => {
  const top = containersDir(root)
  let names: Array<string> = []
  try {
    names = Fs.readdirSync(top)
  } catch {
    return { swept: 0, problems: [] }
  }
  const problems: Array<string> = []
  for (const name of names) problems.push(...(await freeContainer(Path.join(top, name))))
  return { swept: names.length, problems }
}
