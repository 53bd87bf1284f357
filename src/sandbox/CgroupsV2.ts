/**
 * cgroup v2 (the unified hierarchy, what current distributions mount alone): where a launch's
 * group goes and how the node makes room for it. Every decision takes the hierarchy's root
 * directory and the text of /proc/self/cgroup as parameters, and reaches the files through
 * `CgroupIo`, so it is tested against a directory shaped as the kernel shapes cgroup2.
 *
 * The kernel's rules (Documentation/admin-guide/cgroup-v2.rst) that shape it:
 * - no internal processes: a cgroup other than the root hands memory or pids to its children
 *   (`+memory +pids` in its cgroup.subtree_control) only while it holds no process itself, and
 *   no process may join a cgroup that has them enabled. So the group the node may manage (its
 *   base) holds no process: the node's own processes live in the leaf `ocx2-node` beside the
 *   launches' groups `ocx2-run-…`.
 * - delegation: a process may move another only where it may write the cgroup.procs of their
 *   common ancestor, and a subtree is the node's to manage when it was delegated to it (systemd's
 *   `Delegate=yes`; `DelegateSubgroup=ocx2-node` starts the unit's processes in the leaf).
 *
 * The base is found from our own group (the `0::/PATH` line): when it is the leaf `ocx2-node`,
 * its parent; otherwise our own group, whose processes are then moved into its new leaf
 * `ocx2-node` before the controllers are enabled. Never a systemd service's own group: systemd
 * starts the unit's next processes there (Restart=, a timer's next call), which the kernel refuses
 * once the group enables memory, and the unit fails to start (status=219/CGROUP): bin/hosts saw
 * systemd 252 on Debian 12 fail so after the supervisor was SIGKILLed. There the unit needs
 * `DelegateSubgroup=ocx2-node` (systemd 254 or later), or the node run in a delegated scope of its
 * own (`systemd-run --scope -p Delegate=yes`, the shipped units), which is never started again.
 * Without delegation the writes are refused, and the answer names `Delegate=yes`.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"

export type V2Controller = "pids" | "memory"

/** the files of a cgroup hierarchy, as the kernel answers them */
export interface CgroupIo {
  readonly read: (file: string) => string
  readonly write: (file: string, value: string) => void
  readonly mkdir: (dir: string) => void
  readonly rmdir: (dir: string) => void
  readonly exists: (path: string) => boolean
  /** SIGKILL to one process */
  readonly kill: (pid: number) => void
}

export const kernelIo: CgroupIo = {
  read: (file) => Fs.readFileSync(file, "utf8"),
  write: (file, value) => Fs.writeFileSync(file, value),
  mkdir: (dir) => Fs.mkdirSync(dir),
  rmdir: (dir) => Fs.rmdirSync(dir),
  exists: (path) => Fs.existsSync(path),
  kill: (pid) => process.kill(pid, "SIGKILL")
}

export interface V2Host {
  /** where cgroup2 is mounted: /sys/fs/cgroup on a host that mounts v2 alone */
  readonly root: string
  /** the text of /proc/self/cgroup; its `0::/PATH` line names our own group */
  readonly selfCgroup: string
  /** the group the mount shows at `root` (mountinfo's root field): "/" except in some containers */
  readonly mountRoot: string
  /** our own pid, moved into the leaf with every other process of our group */
  readonly pid: number
  readonly io: CgroupIo
}

/** the leaf that holds the node's own processes, beside the launches' groups */
export const nodeLeaf = "ocx2-node"

/** the path of our own group in the unified hierarchy (the `0::` line), undefined without one */
export const ownPath = (selfCgroup: string): string | undefined => {
  const line = selfCgroup.split("\n").find((l) => l.startsWith("0::"))
  return line === undefined ? undefined : line.slice(3)
}

/** where cgroup2 is mounted, from /proc/self/mountinfo's text */
export const cgroup2Mount = (mountinfo: string): { readonly root: string; readonly mountRoot: string } | undefined => {
  for (const line of mountinfo.split("\n")) {
    const [pre, post] = line.split(" - ")
    if (pre === undefined || post === undefined || post.split(" ")[0] !== "cgroup2") continue
    const fields = pre.split(" ")
    return { mountRoot: fields[3]!, root: fields[4]! }
  }
  return undefined
}

export interface V2Base {
  /** our own group's directory */
  readonly own: string
  /** the group the node manages: launches' groups are made in it */
  readonly base: string
}

/** our own group and the base, or why there is none */
export const baseOf = (host: V2Host): V2Base | string => {
  const path = ownPath(host.selfCgroup)
  if (path === undefined) return "/proc/self/cgroup has no cgroup v2 line (0::/PATH)"
  if (path.endsWith(" (deleted)")) return `our own cgroup ${path} is deleted`
  const rel = Path.relative(host.mountRoot, path)
  if (rel.startsWith("..")) return `our own cgroup ${path} is outside the cgroup2 mount at ${host.root}`
  const own = Path.join(host.root, rel)
  const base = Path.basename(own) === nodeLeaf && own !== host.root ? Path.dirname(own) : own
  return { own, base }
}

const words = (text: string) => text.split(/\s+/).filter((w) => w !== "")

const readWords = (io: CgroupIo, file: string): ReadonlyArray<string> => {
  try {
    return words(io.read(file))
  } catch {
    return []
  }
}

const readPids = (io: CgroupIo, dir: string): ReadonlyArray<number> => readWords(io, Path.join(dir, "cgroup.procs")).map(Number)

const message = (e: unknown) => (e as Error).message

/** why base must not become an inner group: it is a systemd service's own group */
const systemdUnitProblem = (b: V2Base): string | undefined =>
  b.own === b.base && /\.service$/.test(Path.basename(b.base))
    ? `our own cgroup ${b.base} is a systemd service's: systemd starts the unit's next processes there, which it could not ` +
      `once the cgroup hands memory to its children (status=219/CGROUP); run the node in a delegated scope of its own ` +
      `(ExecStart=/usr/bin/systemd-run --scope -p Delegate=yes ..., as docs/systemd's units do), or give the unit ` +
      `Delegate=yes and DelegateSubgroup=${nodeLeaf} (systemd 254 or later)`
    : undefined

/** the kernel's answer to enabling a controller in a group that holds processes (no internal processes; a thread root) */
const holdsProcesses = (e: unknown): boolean => ["EBUSY", "ENOTSUP", "EOPNOTSUPP"].includes((e as NodeJS.ErrnoException).code ?? "")

/** what to change where the kernel refuses a write for want of rights: the subtree is not delegated */
const undelegated = (e: unknown): string =>
  ["EACCES", "EPERM"].includes((e as NodeJS.ErrnoException).code ?? "")
    ? ` (the group is not delegated to this account: give its systemd unit Delegate=yes, docs/operations.md "Limits and cgroups")`
    : ""

/** what base's parent does not give it of `controllers` */
const notGivenProblem = (io: CgroupIo, base: string, controllers: ReadonlyArray<V2Controller>): string | undefined => {
  const given = readWords(io, Path.join(base, "cgroup.controllers"))
  const missing = controllers.filter((c) => !given.includes(c))
  return missing.length === 0
    ? undefined
    : `${base} is not given ${missing.join(" and ")}: its cgroup.controllers lists ${given.length === 0 ? "none" : given.join(" ")} ` +
      `(a subtree delegated to the node has them: systemd's Delegate=yes)`
}

/**
 * Read only: whether the base can give a launch's group `controller`, or why not (what status
 * shows where the node has not measured the host yet). Moves nothing and enables nothing.
 */
export const lookV2 = (host: V2Host, controller: V2Controller): string | undefined => {
  const b = baseOf(host)
  if (typeof b === "string") return b
  if (readWords(host.io, Path.join(b.base, "cgroup.subtree_control")).includes(controller)) return undefined
  return notGivenProblem(host.io, b.base, [controller]) ?? (readPids(host.io, b.base).length > 0 ? systemdUnitProblem(b) : undefined)
}

/**
 * Makes the base ready for launches' groups with `controllers`: enables each in its
 * cgroup.subtree_control; where the base holds processes (the no internal processes rule), moves
 * every process of it into the leaf `ocx2-node` first, then enables. Undefined when ready, else why not. Doing it again changes nothing.
 */
export const prepareV2 = (host: V2Host, controllers: ReadonlyArray<V2Controller>): string | undefined => {
  const io = host.io
  const b = baseOf(host)
  if (typeof b === "string") return b
  const control = Path.join(b.base, "cgroup.subtree_control")
  const missing = () => controllers.filter((c) => !readWords(io, control).includes(c))
  if (missing().length === 0) return undefined
  const notGiven = notGivenProblem(io, b.base, missing())
  if (notGiven !== undefined) return notGiven
  const enable = () => {
    for (const c of missing()) io.write(control, `+${c}`)
  }
  // A base (but the root) that holds processes is emptied into the leaf before anything is enabled:
  // the kernel refuses it memory (EBUSY), and it would let it have pids, which makes it a thread
  // root that refuses memory from then on (EOPNOTSUPP; Linux 6.1 on Debian 12, bin/hosts)
  if (b.base === host.root || readPids(io, b.base).length === 0) {
    try {
      enable()
      return undefined
    } catch (e) {
      if (!holdsProcesses(e)) return `cannot enable ${missing().join(" and ")} in ${control}: ${message(e)}${undelegated(e)}`
    }
  }
  // the base holds processes: they go into the leaf, then the controllers can be enabled
  const unit = systemdUnitProblem(b)
  if (unit !== undefined) return unit
  const leaf = Path.join(b.base, nodeLeaf)
  try {
    if (!io.exists(leaf)) io.mkdir(leaf)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") return `cannot make ${leaf} for the node's own processes: ${message(e)}${undelegated(e)}`
  }
  let last: unknown
  // processes forked meanwhile land in the base too: move again until none is left
  for (let attempt = 0; attempt < 20; attempt++) {
    const pids = readPids(io, b.base)
    // our own first: what we fork from then on starts in the leaf
    for (const pid of [...pids].sort((x, y) => (x === host.pid ? -1 : y === host.pid ? 1 : 0))) {
      try {
        io.write(Path.join(leaf, "cgroup.procs"), String(pid))
      } catch (e) {
        // ESRCH: it ended meanwhile
        if ((e as NodeJS.ErrnoException).code !== "ESRCH") return `cannot move process ${pid} from ${b.base} into ${leaf}: ${message(e)}${undelegated(e)}`
      }
    }
    try {
      enable()
      return undefined
    } catch (e) {
      last = e
      if (!holdsProcesses(e)) break
    }
  }
  return `cannot enable ${missing().join(" and ")} in ${control}: ${message(last)}`
}

/** the limit files of a launch's group */
export const writeV2Limits = (
  io: CgroupIo,
  dir: string,
  limits: { readonly pids: boolean; readonly pidsMax: number | undefined; readonly memoryBytes: number | undefined }
): void => {
  if (limits.pids) io.write(Path.join(dir, "pids.max"), limits.pidsMax === undefined ? "max" : String(limits.pidsMax))
  if (limits.memoryBytes !== undefined) {
    io.write(Path.join(dir, "memory.max"), String(limits.memoryBytes))
    // with swap accounting, no swap at all, or the limit only moves pages to swap
    const swap = Path.join(dir, "memory.swap.max")
    if (io.exists(swap)) io.write(swap, "0")
  }
}

/**
 * Ends every process of a group: cgroup.kill (Linux 5.14) ends them all at once, the group's
 * descendants too; without it, each listed process is sent SIGKILL.
 * Returns how many processes the group listed.
 */
export const killV2 = (io: CgroupIo, dir: string): number => {
  const pids = readPids(io, dir)
  if (pids.length === 0) return 0
  const kill = Path.join(dir, "cgroup.kill")
  if (io.exists(kill)) {
    try {
      io.write(kill, "1")
      return pids.length
    } catch {
      // removed meanwhile, or refused: each process then
    }
  }
  for (const pid of pids) {
    try {
      io.kill(pid)
    } catch {
      // already gone
    }
  }
  return pids.length
}
