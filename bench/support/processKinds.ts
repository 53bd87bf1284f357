/**
 * Where a run of the suite spends its CPU, by the kind of program (bench/suite): the watchers,
 * the CGI requests, the hook runs, the CLI calls, the vitest workers, Chromium, fossil, the
 * sandboxes, and the rest.
 *
 * Three sources, each for what the others cannot see:
 * - the kernel's process accounting (acct(2), BSD version 3 records): one record a process when
 *   it ends, however it ends (a watcher the world's close kills with SIGKILL too), with its user
 *   and system time, pid, parent and command name. Every short-lived process is in it, which no
 *   sampling of /proc sees (a fossil command lives a few milliseconds). Its times are truncated
 *   to 10 ms (comp_t in 1/100 s), so each record reads up to 20 ms short (its user and system
 *   time each), about 10 ms on average: the per-kind figures are printed with their process counts
 *   to bound that, and the gap to the exact total below is printed too.
 * - a cgroup of the cpuacct controller holding vitest and everything it starts (a child stays in
 *   its parent's cgroup, a detached watcher too): the suite's exact CPU time, in nanoseconds, and
 *   none of what other users of the machine run meanwhile. Which processes are the suite's: those
 *   the sampler below found in the cgroup, the Node programs the preload named, and any process
 *   whose parent is one of them.
 * - which program a process is: a Node program's script (argv[1]) as a preload given through
 *   NODE_OPTIONS records it when the program starts (every Node program the suite starts, however
 *   short, with the environment it was given: the test worlds' fossil servers pass it on to their
 *   hooks and CGI programs when OCX2_SUITE_WHO is set, src/demo/LocalServer.ts; a sandbox clears
 *   the environment, so none inside one), and, every 50 ms, the command lines of the cgroup's
 *   processes (a Node program started with an environment of its own); for the rest, the command
 *   name of the accounting record (fossil, bwrap, chrome, sh ...). A Node program neither named is
 *   told by what started it: a hook run under `fossil backoffice`, else one a fossil server started
 *   (a CGI request, or a hook run from the server's backoffice), else another Node program.
 *
 * PIDs are reused within a run (this machine's pid_max is 32768), so a process is its pid and its
 * start time: a record's parent is the process of that pid alive when the record's process began.
 * The parent the kernel records is the one at exit (a detached watcher's is pid 1 by then), so the
 * parent the preload or the sampler saw at the start is taken first.
 *
 * Needs root (acct(2) and the cgroup), Perl to call acct(2) (Node cannot), and a cgroup v1
 * cpuacct hierarchy at /sys/fs/cgroup/cpuacct; `start` says why not otherwise, and bench/suite
 * prints the totals without the split.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"

const cpuacct = "/sys/fs/cgroup/cpuacct"
/** acct(2) on x86_64 */
const acctSyscall = 163
const ticksPerSecond = 100

export const kinds = [
  "watchers",
  "CGI requests (ocx2-cgi, ocx2-git: Fossil's extension root)",
  "hook runs (ocx2-hook, ocx2-hook-round)",
  "CLI and MCP calls (ocx2, ocx2-mcp)",
  "supervisors (ocx2-supervise)",
  "other ocx2 programs",
  "Node programs Fossil started, not named (CGI requests or hook runs)",
  "vitest (its main process and workers)",
  "other Node programs (the tests' own servers, node -e)",
  "Chromium",
  "fossil (servers, their requests, commands)",
  "bwrap and the sandboxed programs",
  "other programs"
] as const
export type Kind = (typeof kinds)[number]

/** one process of the suite: who it is and what it cost */
interface Process {
  readonly pid: number
  /** seconds since the epoch */
  readonly start: number
  readonly end: number
  /** user and system time, seconds */
  readonly cpu: number
  readonly comm: string
  /** the parent at exit, as the kernel recorded it */
  readonly exitParent: number
}

/** what the preload or the sampler saw of a process while it lived */
interface Seen {
  readonly pid: number
  readonly ppid: number
  /** seconds since the epoch */
  readonly start: number
  readonly argv: ReadonlyArray<string>
  /** user and system time at the last look, seconds (the sampler's) */
  cpu: number
}

export interface Split {
  /** the suite's CPU time, every process in its cgroup, exact (seconds) */
  readonly total: number
  readonly byKind: ReadonlyArray<{
    readonly kind: Kind
    readonly cpu: number
    readonly processes: number
    /** its own and what it started that is no other product program (fossil, sandboxes, sh, git ...) */
    readonly inclusive: number
    /** the costliest names within the kind: scripts for Node programs, command names for the rest */
    readonly names: ReadonlyArray<readonly [string, number, number]>
  }>
  /** the fossil processes' CPU by the kind of the nearest process not fossil above them */
  readonly fossilBy: ReadonlyArray<readonly [Kind, number]>
  /** the total less every process accounted: the records' truncation, and whatever was not matched */
  readonly unaccounted: number
  readonly processes: number
  readonly sampled: number
}

export interface Accounting {
  /** the environment vitest runs with: the preload's */
  readonly env: Readonly<Record<string, string>>
  /** the command that runs `argv` inside the cgroup */
  readonly wrap: (argv: ReadonlyArray<string>) => ReadonlyArray<string>
  /** the cgroup's CPU time so far, seconds */
  readonly usage: () => number
  /** the cgroup's cpuacct.usage file (bench/suite's setup file reads it per test file) */
  readonly usageFile: string
  /** stops accounting and sampling, and splits what the cgroup's processes cost */
  readonly finish: () => Split
  /** stops accounting and removes the cgroup, without a split (on an error) */
  readonly abandon: () => void
}

const read = (file: string): string | undefined => {
  try {
    return Fs.readFileSync(file, "utf8")
  } catch {
    return undefined
  }
}

const acct = (file: string | null): void => {
  const script = file === null
    ? `syscall(${acctSyscall}, 0) == 0 or die "acct off: $!\\n"`
    : `my $f = $ARGV[0]; syscall(${acctSyscall}, $f) == 0 or die "acct($f): $!\\n"`
  const ran = ChildProcess.spawnSync("perl", ["-e", script, ...(file === null ? [] : [file])], { encoding: "utf8" })
  if (ran.status !== 0) throw new Error(`process accounting ${file === null ? "off" : "on"}: ${(ran.stderr || ran.error?.message) ?? "perl failed"}`.trim())
}

const bootTime = (): number => Number(/^btime (\d+)$/m.exec(read("/proc/stat") ?? "")?.[1] ?? "0")

/** pid, ppid, start (epoch seconds) and CPU seconds of a live process, from /proc/PID/stat */
const statOf = (pid: number, boot: number) => {
  const stat = read(`/proc/${pid}/stat`)
  if (stat === undefined) return undefined
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return { ppid: Number(f[1]), start: boot + Number(f[19]) / ticksPerSecond, cpu: (Number(f[11]) + Number(f[12])) / ticksPerSecond }
}

/** comp_t: a 13-bit mantissa and a 3-bit base-8 exponent */
const comp = (v: number) => (v & 0x1fff) << (3 * (v >> 13))

const records = (file: string): ReadonlyArray<Process> => {
  const b = Fs.readFileSync(file)
  const out: Array<Process> = []
  for (let o = 0; o + 64 <= b.length; o += 64) {
    if (b[o + 1] !== 3) throw new Error(`${file}: a record of version ${String(b[o + 1])} at byte ${o}, not 3`)
    const start = b.readUInt32LE(o + 24)
    out.push({
      pid: b.readUInt32LE(o + 16),
      exitParent: b.readUInt32LE(o + 20),
      start,
      end: start + b.readFloatLE(o + 28) / ticksPerSecond,
      cpu: (comp(b.readUInt16LE(o + 32)) + comp(b.readUInt16LE(o + 34))) / ticksPerSecond,
      comm: b.subarray(o + 48, o + 64).toString("latin1").replace(/\0.*$/s, "")
    })
  }
  return out
}

/** the program a Node process runs: its script's name without the extension, or `-e` */
const scriptOf = (argv: ReadonlyArray<string>): string | undefined => {
  const script = argv.find((a, i) => i > 0 && !a.startsWith("-")) ?? (argv.includes("-e") ? "-e" : undefined)
  if (script === undefined) return undefined
  if (/node_modules\/(vitest|tinypool)\//.test(script)) return "vitest"
  return Path.basename(script).replace(/\.(mjs|cjs|js|ts)$/, "")
}

const nodeKind = (script: string): Kind => {
  if (script === "vitest") return "vitest (its main process and workers)"
  if (script === "ocx2-watcher") return "watchers"
  if (/^ocx2-cgi/.test(script) || script === "ocx2-git") return "CGI requests (ocx2-cgi, ocx2-git: Fossil's extension root)"
  if (/^ocx2-hook/.test(script)) return "hook runs (ocx2-hook, ocx2-hook-round)"
  if (script === "ocx2" || /^ocx2-mcp/.test(script)) return "CLI and MCP calls (ocx2, ocx2-mcp)"
  if (script === "ocx2-supervise") return "supervisors (ocx2-supervise)"
  if (/^ocx2-/.test(script)) return "other ocx2 programs"
  return "other Node programs (the tests' own servers, node -e)"
}

const productKinds = new Set<Kind>(kinds.filter((k) => !["fossil (servers, their requests, commands)", "bwrap and the sandboxed programs", "other programs"].includes(k)))

/**
 * Starts accounting into `dir`: the cgroup, acct(2) to DIR/pacct, the preload DIR/who.cjs
 * appending to DIR/who (through `env`), and the sampler. Throws, saying why, where it cannot.
 */
export const start = (dir: string): Accounting => {
  if (!Fs.existsSync(Path.join(cpuacct, "cpuacct.usage"))) throw new Error(`no cgroup v1 cpuacct hierarchy at ${cpuacct}`)
  // the kernel keeps one accounting file for the whole machine: a second bench would take it from the first
  for (const name of Fs.readdirSync(cpuacct).filter((n) => /^ocx2-suite-\d+$/.test(n))) {
    const pid = Number(name.slice("ocx2-suite-".length))
    if (Fs.existsSync(`/proc/${pid}`)) throw new Error(`another bench/suite (pid ${pid}) has the kernel's process accounting, which is one for the whole machine: run one at a time`)
    try {
      Fs.rmdirSync(Path.join(cpuacct, name))
    } catch {
      // a process left in it: the cgroup stays, harmless
    }
  }
  const cgroup = Path.join(cpuacct, `ocx2-suite-${process.pid}`)
  Fs.mkdirSync(cgroup)
  const pacct = Path.join(dir, "pacct")
  const who = Path.join(dir, "who")
  const preload = Path.join(dir, "who.cjs")
  Fs.writeFileSync(pacct, "")
  Fs.writeFileSync(who, "")
  // one line a Node program: pid, parent, start (ms since the epoch), argv; never fails the program
  Fs.writeFileSync(preload, `try { require("node:fs").appendFileSync(${JSON.stringify(who)}, JSON.stringify([process.pid, process.ppid, Date.now(), process.argv]) + "\\n") } catch {}\n`)
  try {
    acct(pacct)
  } catch (e) {
    Fs.rmdirSync(cgroup)
    throw e
  }
  const boot = bootTime()
  const seen = new Map<string, Seen>()
  const sample = () => {
    for (const line of (read(Path.join(cgroup, "cgroup.procs")) ?? "").split("\n")) {
      const pid = Number(line)
      if (!Number.isInteger(pid) || pid <= 0) continue
      const stat = statOf(pid, boot)
      if (stat === undefined) continue
      const key = `${pid}@${stat.start}`
      const known = seen.get(key)
      if (known !== undefined) {
        known.cpu = stat.cpu
        continue
      }
      const argv = (read(`/proc/${pid}/cmdline`) ?? "").split("\0").filter((a) => a !== "")
      seen.set(key, { pid, ppid: stat.ppid, start: stat.start, argv, cpu: stat.cpu })
    }
  }
  const sampler = setInterval(sample, 50)
  const usageFile = Path.join(cgroup, "cpuacct.usage")
  const usage = () => Number(read(usageFile) ?? "0") / 1e9
  let stopped = false
  const stop = () => {
    if (stopped) return
    stopped = true
    clearInterval(sampler)
    acct(null)
    // what still runs (a leak of some test's) goes back to the root cgroup, so this one can go
    for (const line of (read(Path.join(cgroup, "cgroup.procs")) ?? "").split("\n")) {
      if (line === "") continue
      try {
        Fs.appendFileSync(Path.join(cpuacct, "cgroup.procs"), line)
      } catch {
        // gone meanwhile
      }
    }
    try {
      Fs.rmdirSync(cgroup)
    } catch {
      // a process moved in meanwhile: left, named
      console.error(`bench/suite: the cgroup ${cgroup} could not be removed`)
    }
  }
  const finish = (): Split => {
    sample()
    const total = usage()
    const alive = [...seen.values()].filter((s) => statOf(s.pid, boot)?.start === s.start)
    stop()
    return split(total, records(pacct), read(who) ?? "", [...seen.values()], alive)
  }
  return {
    env: { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --require ${preload}`.trim(), OCX2_SUITE_WHO: who },
    wrap: (argv) => ["/bin/sh", "-c", `echo $$ > ${Path.join(cgroup, "cgroup.procs")} && exec "$@"`, "sh", ...argv],
    usage,
    usageFile,
    finish,
    abandon: stop
  }
}

/** the CPU time of one `node -e 0` in a cgroup of its own, exact (the `sh` that puts it there and execs it, about a millisecond, in it) */
export const bareNodeCpu = (): number => {
  const cgroup = Path.join(cpuacct, `ocx2-bare-${process.pid}`)
  Fs.mkdirSync(cgroup)
  try {
    const usage = () => Number(Fs.readFileSync(Path.join(cgroup, "cpuacct.usage"), "utf8")) / 1e9
    const before = usage()
    const ran = ChildProcess.spawnSync("/bin/sh", ["-c", `echo $$ > ${Path.join(cgroup, "cgroup.procs")} && exec "$0" -e 0`, process.execPath])
    if (ran.status !== 0) throw new Error(`node -e 0 in ${cgroup}: ${String(ran.stderr)}`)
    return usage() - before
  } finally {
    Fs.rmdirSync(cgroup)
  }
}

const split = (total: number, all: ReadonlyArray<Process>, whoText: string, sampled: ReadonlyArray<Seen>, alive: ReadonlyArray<Seen>): Split => {
  // the preload's lines: [pid, ppid, ms, argv]
  const named: Array<Seen> = whoText.split("\n").filter((l) => l !== "").flatMap((l) => {
    try {
      const [pid, ppid, ms, argv] = JSON.parse(l) as [number, number, number, Array<string>]
      return [{ pid, ppid, start: ms / 1000, argv, cpu: 0 }]
    } catch {
      return []
    }
  })
  // what was seen alive, by pid; a record is matched to what began within a second of it (acct's start is whole seconds)
  const byPid = new Map<number, Array<Seen>>()
  for (const s of [...named, ...sampled]) byPid.set(s.pid, [...(byPid.get(s.pid) ?? []), s])
  const sightOf = (p: { pid: number; start: number; end: number }) =>
    (byPid.get(p.pid) ?? []).filter((s) => s.start >= p.start - 1 && s.start <= p.end + 1)
  const sampledKeys = new Set(sampled.map((s) => `${s.pid}@${s.start}`))

  // the processes: every record, and what was alive at the end (no record yet)
  type Node = { readonly pid: number; readonly start: number; readonly end: number; readonly cpu: number; readonly comm: string; readonly argv: ReadonlyArray<string>; readonly ppid: number; readonly member: boolean }
  const nodes: Array<Node> = []
  for (const r of all) {
    const sights = sightOf(r)
    const argv = sights.find((s) => s.argv.length > 0)?.argv ?? []
    const ppid = sights[0]?.ppid ?? r.exitParent
    nodes.push({ ...r, argv, ppid, member: sights.length > 0 })
  }
  const now = Date.now() / 1000
  for (const s of alive) {
    nodes.push({ pid: s.pid, start: s.start, end: now, cpu: s.cpu, comm: Path.basename(s.argv[0] ?? "?").slice(0, 15), argv: s.argv, ppid: s.ppid, member: true })
  }
  const nodesByPid = new Map<number, Array<Node>>()
  for (const n of nodes) nodesByPid.set(n.pid, [...(nodesByPid.get(n.pid) ?? []), n])
  const parentOf = (n: Node): Node | undefined =>
    n.ppid <= 1 ? undefined : (nodesByPid.get(n.ppid) ?? []).find((p) => p !== n && p.start <= n.start + 1 && p.end >= n.start - 1)

  // membership: seen in the cgroup or named by the preload, or a child of a member
  const memo = new Map<Node, boolean>()
  const isMember = (n: Node, depth = 0): boolean => {
    const known = memo.get(n)
    if (known !== undefined) return known
    const parent = parentOf(n)
    const m = n.member || (depth < 64 && parent !== undefined && isMember(parent, depth + 1))
    memo.set(n, m)
    return m
  }
  const members = nodes.filter((n) => isMember(n))

  const ancestors = (n: Node): ReadonlyArray<Node> => {
    const chain: Array<Node> = []
    for (let p = parentOf(n); p !== undefined && chain.length < 64; p = parentOf(p)) chain.push(p)
    return chain
  }
  const isNode = (n: Node) => n.comm === "node" || n.comm.startsWith("ocx2") || (n.argv[0] !== undefined && Path.basename(n.argv[0]) === "node")
  const chromium = (n: Node) => /chrom|headless/i.test(n.comm)
  const kindMemo = new Map<Node, Kind>()
  const kindOf = (n: Node): Kind => {
    const known = kindMemo.get(n)
    if (known !== undefined) return known
    const up = ancestors(n)
    let kind: Kind
    if (n.comm === "bwrap" || up.some((a) => a.comm === "bwrap")) kind = "bwrap and the sandboxed programs"
    else if (chromium(n) || up.some(chromium)) kind = "Chromium"
    else if (isNode(n)) {
      const script = scriptOf(n.argv)
      if (script !== undefined) kind = nodeKind(script)
      // not named: it ended before the sampler saw it, and had no preload (a bare environment); what started it tells
      else if (up.some((a) => a.argv.includes("backoffice"))) kind = "hook runs (ocx2-hook, ocx2-hook-round)"
      else if (up.some((a) => a.comm === "fossil")) kind = "Node programs Fossil started, not named (CGI requests or hook runs)"
      else kind = "other Node programs (the tests' own servers, node -e)"
    } else if (n.comm === "fossil") kind = "fossil (servers, their requests, commands)"
    else kind = "other programs"
    kindMemo.set(n, kind)
    return kind
  }
  const nameOf = (n: Node) => (isNode(n) ? scriptOf(n.argv) ?? "node (unnamed)" : n.comm)

  const byKind = new Map<Kind, { cpu: number; processes: number; inclusive: number; names: Map<string, [number, number]> }>()
  for (const k of kinds) byKind.set(k, { cpu: 0, processes: 0, inclusive: 0, names: new Map() })
  const fossilBy = new Map<Kind, number>()
  for (const n of members) {
    const kind = kindOf(n)
    const entry = byKind.get(kind)!
    entry.cpu += n.cpu
    entry.inclusive += n.cpu
    entry.processes += 1
    const name = nameOf(n)
    const [c, p] = entry.names.get(name) ?? [0, 0]
    entry.names.set(name, [c + n.cpu, p + 1])
    // what a product program started that is no product program itself counts in its inclusive figure too
    const up = ancestors(n)
    if (!productKinds.has(kind)) {
      const owner = up.find((a) => productKinds.has(kindOf(a)))
      if (owner !== undefined) byKind.get(kindOf(owner))!.inclusive += n.cpu
    }
    if (kind === "fossil (servers, their requests, commands)") {
      const above = up.find((a) => kindOf(a) !== kind)
      const by = above === undefined ? "other programs" : kindOf(above)
      fossilBy.set(by, (fossilBy.get(by) ?? 0) + n.cpu)
    }
  }
  const accounted = members.reduce((a, n) => a + n.cpu, 0)
  return {
    total,
    byKind: kinds.map((kind) => {
      const e = byKind.get(kind)!
      return {
        kind, cpu: e.cpu, processes: e.processes, inclusive: e.inclusive,
        names: [...e.names.entries()].sort((a, b) => b[1][0] - a[1][0]).slice(0, 4).map(([n, [c, p]]) => [n, c, p] as const)
      }
    }),
    fossilBy: [...fossilBy.entries()].sort((a, b) => b[1] - a[1]),
    unaccounted: total - accounted,
    processes: members.length,
    sampled: sampledKeys.size
  }
}
