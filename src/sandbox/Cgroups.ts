/**
 * The cgroups of one launch, whichever version the host mounts for each controller: `pids`
 * both tracks every process of the launch and bounds their number; `memory` bounds memory.
 *
 * cgroup v1 (a hierarchy per controller): a group per controller, nested under our own group
 * in that hierarchy (read from /proc/self/cgroup), so whatever supervises us still accounts for
 * them. Where a v1 hierarchy has the controller, it is used, as it always was.
 *
 * cgroup v2 (the unified hierarchy, what current distributions mount alone): one group holding
 * both, made in the subtree the node may manage (CgroupsV2.ts says which and why).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import {
  baseOf, cgroup2Mount, type CgroupIo, kernelIo, killV2, lookV2, prepareV2, type V2Host, writeV2Limits
} from "./CgroupsV2.js"

export type Controller = "pids" | "memory"

/** where the controller's v1 hierarchy is mounted, joined with our own group in it */
export const v1DirOf = (controller: Controller, mountinfo: string, selfCgroup: string): string | undefined => {
  const ownLine = selfCgroup.split("\n").map((l) => l.split(":")).find((f) => f.length >= 3 && f[1]!.split(",").includes(controller))
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

/** The cgroup hierarchies a process sees: a v1 one per controller, and the unified (v2) one. */
export interface CgroupHost {
  /** our own group's directory in the controller's v1 hierarchy, when one is mounted */
  readonly v1: (controller: Controller) => string | undefined
  /** the unified hierarchy, when mounted */
  readonly v2: V2Host | undefined
}

/** this process's hierarchies, read now from /proc/self */
export const realHost = (): CgroupHost => {
  let mountinfo = "", self = ""
  try {
    mountinfo = Fs.readFileSync("/proc/self/mountinfo", "utf8")
    self = Fs.readFileSync("/proc/self/cgroup", "utf8")
  } catch {
    // no /proc: no cgroups
  }
  const mount = cgroup2Mount(mountinfo)
  return {
    v1: (controller) => v1DirOf(controller, mountinfo, self),
    v2: mount === undefined ? undefined : { ...mount, selfCgroup: self, pid: process.pid, io: kernelIo }
  }
}

/** where the controller's v1 hierarchy is mounted, joined with our own group in it */
export const ownCgroupDir = (controller: Controller): string | undefined => realHost().v1(controller)

/** which version gives the controller: v1 where a v1 hierarchy has it, else v2 where cgroup2 is mounted */
export const versionOf = (controller: Controller, host: CgroupHost): 1 | 2 | undefined =>
  host.v1(controller) !== undefined ? 1 : host.v2 !== undefined ? 2 : undefined

const noHierarchy = (controller: Controller, host: CgroupHost) =>
  host.v2 === undefined
    ? `no cgroup v1 ${controller} hierarchy is mounted for this process`
    : `no cgroup v1 ${controller} hierarchy, and no cgroup v2 line in /proc/self/cgroup`

const write = (io: CgroupIo, file: string, value: string) => io.write(file, value)

/** can we make, limit and remove a child group? undefined when yes, else why not (v2: the base is made ready) */
export const probeController = (controller: Controller, host: CgroupHost = realHost()): string | undefined => {
  const version = versionOf(controller, host)
  if (version === undefined) return noHierarchy(controller, host)
  let dir: string, io: CgroupIo
  if (version === 1) {
    dir = host.v1(controller)!
    io = kernelIo
  } else {
    const v2 = host.v2!
    const problem = prepareV2(v2, [controller])
    if (problem !== undefined) return problem
    dir = (baseOf(v2) as { base: string }).base
    io = v2.io
  }
  const child = Path.join(dir, `ocx2-probe-${process.pid}-${Math.random().toString(36).slice(2)}`)
  try {
    io.mkdir(child)
    if (version === 1) {
      if (controller === "memory") write(io, Path.join(child, "memory.limit_in_bytes"), String(64 << 20))
      else write(io, Path.join(child, "pids.max"), "16")
    } else {
      writeV2Limits(io, child, controller === "memory"
        ? { pids: false, pidsMax: undefined, memoryBytes: 64 << 20 }
        : { pids: true, pidsMax: 16, memoryBytes: undefined })
    }
    return undefined
  } catch (e) {
    return `cannot use a child cgroup of ${dir}: ${(e as Error).message}`
  } finally {
    try {
      io.rmdir(child)
    } catch {
      // it was never made
    }
  }
}

/**
 * Read only (moves and enables nothing): which cgroup gives the controller here, as status says
 * it: "cgroup v1 memory", "cgroup v2 pids", or "not available: why".
 */
export const describeController = (controller: Controller, host: CgroupHost = realHost()): string => {
  const version = versionOf(controller, host)
  if (version === undefined) return `not available: ${noHierarchy(controller, host)}`
  const problem = version === 2 ? lookV2(host.v2!, controller) : undefined
  return problem === undefined ? `cgroup v${version} ${controller}` : `not available: ${problem}`
}

const readInts = (io: CgroupIo, file: string, key: string): number => {
  try {
    const line = io.read(file).split("\n").find((l) => l.startsWith(`${key} `))
    return line === undefined ? 0 : Number(line.slice(key.length + 1))
  } catch {
    return 0
  }
}

interface Group {
  readonly dir: string
  readonly version: 1 | 2
  readonly controllers: ReadonlyArray<Controller>
}

export class LaunchCgroups {
  private constructor(private readonly groups: Array<Group>, private readonly io: CgroupIo) {}

  /** makes the groups; memory only when a memory limit is asked */
  static make(
    name: string,
    options: { readonly pidsMax: number | undefined; readonly memoryBytes: number | undefined; readonly pids: boolean },
    host: CgroupHost = realHost()
  ): LaunchCgroups {
    const groups: Array<Group> = []
    const wanted: Array<Controller> = [...(options.pids ? ["pids" as const] : []), ...(options.memoryBytes !== undefined ? ["memory" as const] : [])]
    const onV2 = wanted.filter((c) => versionOf(c, host) === 2)
    const made = new LaunchCgroups(groups, onV2.length > 0 ? host.v2!.io : kernelIo)
    try {
      for (const controller of wanted) {
        if (versionOf(controller, host) !== 1) continue
        const dir = Path.join(host.v1(controller)!, name)
        Fs.mkdirSync(dir)
        groups.push({ dir, version: 1, controllers: [controller] })
        if (controller === "pids") {
          Fs.writeFileSync(Path.join(dir, "pids.max"), options.pidsMax === undefined ? "max" : String(options.pidsMax))
        } else {
          Fs.writeFileSync(Path.join(dir, "memory.limit_in_bytes"), String(options.memoryBytes))
          // with swap accounting, memory+swap too, or the limit only moves pages to swap
          const memsw = Path.join(dir, "memory.memsw.limit_in_bytes")
          if (Fs.existsSync(memsw)) Fs.writeFileSync(memsw, String(options.memoryBytes))
        }
      }
      const missing = wanted.filter((c) => versionOf(c, host) === undefined)
      if (missing.length > 0) throw new Error(noHierarchy(missing[0]!, host))
      if (onV2.length > 0) {
        const v2 = host.v2!
        const problem = prepareV2(v2, onV2)
        if (problem !== undefined) throw new Error(problem)
        const dir = Path.join((baseOf(v2) as { base: string }).base, name)
        v2.io.mkdir(dir)
        groups.push({ dir, version: 2, controllers: onV2 })
        writeV2Limits(v2.io, dir, {
          pids: onV2.includes("pids"),
          pidsMax: options.pidsMax,
          memoryBytes: onV2.includes("memory") ? options.memoryBytes : undefined
        })
      }
      return made
    } catch (e) {
      made.removeNow()
      throw e
    }
  }

  private ioOf(g: Group): CgroupIo {
    return g.version === 1 ? kernelIo : this.io
  }

  private groupOf(controller: Controller): Group | undefined {
    return this.groups.find((g) => g.controllers.includes(controller))
  }

  /** the groups' directories (v2: one for both controllers) */
  dirs(): ReadonlyArray<string> {
    return this.groups.map((g) => g.dir)
  }

  /** the cgroup.procs files the wrapper writes its pid into before exec */
  procsFiles(): ReadonlyArray<string> {
    return this.groups.map((g) => Path.join(g.dir, "cgroup.procs"))
  }

  pids(): ReadonlyArray<number> {
    const seen = new Set<number>()
    for (const g of this.groups) {
      try {
        for (const l of this.ioOf(g).read(Path.join(g.dir, "cgroup.procs")).split("\n")) if (l !== "") seen.add(Number(l))
      } catch {
        // removed already
      }
    }
    return [...seen]
  }

  /** how many processes the kernel killed for memory: v1 memory.oom_control, v2 memory.events */
  oomKills(): number {
    const g = this.groupOf("memory")
    if (g === undefined) return 0
    return g.version === 1
      ? readInts(kernelIo, Path.join(g.dir, "memory.oom_control"), "oom_kill")
      : readInts(this.io, Path.join(g.dir, "memory.events"), "oom_kill")
  }

  /**
   * Sets the memory limit anew while the group's processes run (a container stood up ahead, its
   * limit set when it is taken); why it could not be, or undefined. A limit below what the group
   * holds is refused rather than enforced: v1 refuses it itself (EBUSY once it cannot reclaim), v2
   * would kill a process for it, so it is not written there when the group's use is above it.
   */
  setMemory(bytes: number): string | undefined {
    const g = this.groupOf("memory")
    if (g === undefined) return "no memory cgroup"
    try {
      if (g.version === 1) {
        const limit = Path.join(g.dir, "memory.limit_in_bytes")
        const memsw = Path.join(g.dir, "memory.memsw.limit_in_bytes")
        const swap = Fs.existsSync(memsw)
        // memory+swap may never be below memory alone: raised first, lowered last
        const raising = bytes > Number(Fs.readFileSync(limit, "utf8").trim())
        if (swap && raising) Fs.writeFileSync(memsw, String(bytes))
        Fs.writeFileSync(limit, String(bytes))
        if (swap && !raising) Fs.writeFileSync(memsw, String(bytes))
      } else {
        const current = Number(this.io.read(Path.join(g.dir, "memory.current")).trim())
        if (current > bytes) return `the group holds ${current} bytes, more than ${bytes}`
        writeV2Limits(this.io, g.dir, { pids: false, pidsMax: undefined, memoryBytes: bytes })
      }
      return undefined
    } catch (e) {
      return (e as Error).message
    }
  }

  /** SIGKILL to every process of the groups (v2: cgroup.kill where the kernel has it); how many there were */
  killAll(): number {
    let listed = 0
    const v1 = this.groups.filter((g) => g.version === 1)
    for (const g of this.groups) if (g.version === 2) listed = Math.max(listed, killV2(this.io, g.dir))
    if (v1.length === 0) return listed
    const pids = new Set<number>()
    for (const g of v1) {
      try {
        for (const l of Fs.readFileSync(Path.join(g.dir, "cgroup.procs"), "utf8").split("\n")) if (l !== "") pids.add(Number(l))
      } catch {
        // removed already
      }
    }
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // already gone
      }
    }
    return Math.max(listed, pids.size)
  }

  /** removes every group; false when one still holds a process */
  removeNow(): boolean {
    let all = true
    for (const g of [...this.groups]) {
      try {
        this.ioOf(g).rmdir(g.dir)
        this.groups.splice(this.groups.indexOf(g), 1)
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "ENOENT") this.groups.splice(this.groups.indexOf(g), 1)
        else all = false
      }
    }
    return all
  }
}

/** The cgroup name of a named launch. */
export const leftoverName = (name: string): string => `ocx2-run-${name.replace(/[^A-Za-z0-9_-]/g, "_")}`

const pause = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)

/**
 * Ends every process left in a named launch's cgroups and removes them: what recovery does for a
 * run whose watcher died while its process (not ending with its parent) ran on. Returns how many
 * processes it ended.
 */
export const endLeftovers = (name: string, host: CgroupHost = realHost()): number => {
  let ended = 0
  for (const controller of ["pids", "memory"] as const) {
    const own = host.v1(controller)
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
      pause(20)
    }
    try {
      Fs.rmdirSync(dir)
    } catch {
      // still busy or gone: the next recovery tries again
    }
  }
  // v2: one group for both, in the base (read from our own group: nothing is moved)
  const v2 = host.v2
  if (v2 !== undefined && (["pids", "memory"] as const).some((c) => versionOf(c, host) === 2)) {
    const b = baseOf(v2)
    const dir = typeof b === "string" ? undefined : Path.join(b.base, leftoverName(name))
    if (dir !== undefined && v2.io.exists(dir)) {
      for (let attempt = 0; attempt < 50; attempt++) {
        const listed = killV2(v2.io, dir)
        if (listed === 0) break
        if (attempt === 0) ended += listed
        pause(20)
      }
      try {
        v2.io.rmdir(dir)
      } catch {
        // still busy or gone: the next recovery tries again
      }
    }
  }
  return ended
}
