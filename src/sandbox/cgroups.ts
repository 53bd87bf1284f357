/**
 * cgroup v1 groups for one launch, nested under our own cgroup (read from
 * /proc/self/cgroup) so whatever supervises us still accounts for them: `pids` both
 * tracks every process of the launch and bounds their number; `memory` bounds memory.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"

export type Controller = "pids" | "memory"

/** where the controller's hierarchy is mounted, joined with our own group in it */
export const ownCgroupDir = (controller: Controller): string | undefined => {
  let mountinfo: string, own: string
  try {
    mountinfo = Fs.readFileSync("/proc/self/mountinfo", "utf8")
    own = Fs.readFileSync("/proc/self/cgroup", "utf8")
  } catch {
    return undefined
  }
  const ownLine = own.split("\n").map((l) => l.split(":")).find((f) => f.length >= 3 && f[1]!.split(",").includes(controller))
  if (ownLine === undefined) return undefined
  const ownPath = ownLine.slice(2).join(":")
  for (const line of mountinfo.split("\n")) {
    const [pre, post] = line.split(" - ")
    if (pre === undefined || post === undefined) continue
    const [fstype, , superOptions] = post.split(" ")
    if (fstype !== "cgroup" || !superOptions?.split(",").includes(controller)) continue
    const fields = pre.split(" ")
    const root = fields[3]!
    const mountPoint = fields[4]!
    const rel = Path.relative(root, ownPath)
    if (rel.startsWith("..")) continue
    return Path.join(mountPoint, rel)
  }
  return undefined
}

const write = (file: string, value: string) => Fs.writeFileSync(file, value)

/** can we make, limit and remove a child group? undefined when yes, else why not */
export const probeController = (controller: Controller): string | undefined => {
  const dir = ownCgroupDir(controller)
  if (dir === undefined) return `no cgroup v1 ${controller} hierarchy is mounted for this process`
  const child = Path.join(dir, `ocx2-probe-${process.pid}-${Math.random().toString(36).slice(2)}`)
  try {
    Fs.mkdirSync(child)
    if (controller === "memory") write(Path.join(child, "memory.limit_in_bytes"), String(64 << 20))
    else write(Path.join(child, "pids.max"), "16")
    return undefined
  } catch (e) {
    return `cannot use a child cgroup of ${dir}: ${(e as Error).message}`
  } finally {
    try {
      Fs.rmdirSync(child)
    } catch {
      // it was never made
    }
  }
}

const readInts = (file: string, key: string): number => {
  try {
    const line = Fs.readFileSync(file, "utf8").split("\n").find((l) => l.startsWith(`${key} `))
    return line === undefined ? 0 : Number(line.slice(key.length + 1))
  } catch {
    return 0
  }
}

export class LaunchCgroups {
  private constructor(readonly dirs: ReadonlyMap<Controller, string>) {}

  /** makes the groups; memory only when a memory limit is asked */
  static make(
    name: string,
    options: { readonly pidsMax: number | undefined; readonly memoryBytes: number | undefined; readonly pids: boolean }
  ): LaunchCgroups {
    const dirs = new Map<Controller, string>()
    const made = new LaunchCgroups(dirs)
    try {
      if (options.pids) {
        const dir = Path.join(ownCgroupDir("pids")!, name)
        Fs.mkdirSync(dir)
        dirs.set("pids", dir)
        write(Path.join(dir, "pids.max"), options.pidsMax === undefined ? "max" : String(options.pidsMax))
      }
      if (options.memoryBytes !== undefined) {
        const dir = Path.join(ownCgroupDir("memory")!, name)
        Fs.mkdirSync(dir)
        dirs.set("memory", dir)
        write(Path.join(dir, "memory.limit_in_bytes"), String(options.memoryBytes))
        // with swap accounting, memory+swap too, or the limit only moves pages to swap
        const memsw = Path.join(dir, "memory.memsw.limit_in_bytes")
        if (Fs.existsSync(memsw)) write(memsw, String(options.memoryBytes))
      }
      return made
    } catch (e) {
      made.removeNow()
      throw e
    }
  }

  /** the cgroup.procs files the wrapper writes its pid into before exec */
  procsFiles(): ReadonlyArray<string> {
    return [...this.dirs.values()].map((d) => Path.join(d, "cgroup.procs"))
  }

  pids(): ReadonlyArray<number> {
    const seen = new Set<number>()
    for (const d of this.dirs.values()) {
      try {
        for (const l of Fs.readFileSync(Path.join(d, "cgroup.procs"), "utf8").split("\n")) if (l !== "") seen.add(Number(l))
      } catch {
        // removed already
      }
    }
    return [...seen]
  }

  oomKills(): number {
    const d = this.dirs.get("memory")
    return d === undefined ? 0 : readInts(Path.join(d, "memory.oom_control"), "oom_kill")
  }

  pidsRefused(): number {
    const d = this.dirs.get("pids")
    return d === undefined ? 0 : readInts(Path.join(d, "pids.events"), "max")
  }

  killAll(): number {
    const pids = this.pids()
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // already gone
      }
    }
    return pids.length
  }

  /** removes every group; false when one still holds a process */
  removeNow(): boolean {
    let all = true
    for (const [c, d] of this.dirs) {
      try {
        Fs.rmdirSync(d)
        ;(this.dirs as Map<Controller, string>).delete(c)
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "ENOENT") (this.dirs as Map<Controller, string>).delete(c)
        else all = false
      }
    }
    return all
  }
}

/** The cgroup name of a named launch. */
export const leftoverName = (name: string): string => `ocx2-run-${name.replace(/[^A-Za-z0-9_-]/g, "_")}`

/**
 * Ends every process left in a named launch's cgroups and removes them: what recovery does for a
 * run whose watcher died while its process (not ending with its parent) ran on. Returns how many
 * processes it ended.
 */
export const endLeftovers = (name: string): number => {
  let ended = 0
  for (const controller of ["pids", "memory"] as const) {
    const own = ownCgroupDir(controller)
    if (own === undefined) continue
    const dir = Path.join(own, leftoverName(name))
    if (!Fs.existsSync(dir)) continue
    for (let attempt = 0; attempt < 50; attempt++) {
      let pids: Array<number> = []
      try {
        pids = Fs.readFileSync(Path.join(dir, "cgroup.procs"), "utf8").split("\n").filter((l) => l !== "").map(Number)
      } catch {
        break
      }
      if (pids.length === 0) break
      for (const pid of pids) {
        try {
          process.kill(pid, "SIGKILL")
          ended++
        } catch {
          // already gone
        }
      }
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20)
    }
    try {
      Fs.rmdirSync(dir)
    } catch {
      // still busy or gone: the next recovery tries again
    }
  }
  return ended
}
