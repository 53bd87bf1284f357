/**
 * What a node saw, for a test whose wait for the product ran out: enough to tell a slow machine
 * (a high load, the run's watcher alive and its log growing) from a lost run (no watcher, no
 * `started`, a hook log that never named the run). One function, used by every wait of the test
 * worlds (world.waitEnded, world.waitFor, cloneWorld's waitForKind, supervisorWorld's starts), so
 * every test that waits on the product prints it when the wait runs out.
 *
 * It reads only files and /proc: the load average and the cores; the tail of each log the node
 * keeps in ROOT/node (hook.log, supervisor.log, ...) and of the outputs the world's tests keep
 * beside ROOT (a supervisor's *.out); the spare's log; the run's care files (ROOT/care/RUN.log,
 * RUN.status, RUN.outbox, RUN.lock with whether its pid lives ...) and its workspace's names, or
 * the names in ROOT/care when no run is named; and every process whose command line or working
 * directory is in the world's directory: pid, parent, state, age and command line.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

export interface Explained {
  /** the world's directory: its processes are those whose command line or cwd names it */
  readonly dir: string
  /** the node's release root */
  readonly root: string
}

const clip = (line: string, width = 400) => (line.length > width ? `${line.slice(0, width)}… (${line.length} chars)` : line)

const read = (file: string): string | undefined => {
  try {
    return Fs.readFileSync(file, "utf8")
  } catch {
    return undefined
  }
}

const names = (dir: string): ReadonlyArray<string> => {
  try {
    return Fs.readdirSync(dir).sort()
  } catch {
    return []
  }
}

/** FILE's last `lines` lines (each cut at `width` characters), headed by its name and length; a line saying so when it is absent */
export const tailOf = (file: string, lines = 40, width = 400): string => {
  const text = read(file)
  if (text === undefined) {
    let why = "absent"
    try {
      if (Fs.statSync(file).isDirectory()) why = `a directory: ${names(file).join(" ") || "(empty)"}`
    } catch {
      // absent it is
    }
    return `--- ${file}: ${why}`
  }
  const all = text.split("\n")
  if (all[all.length - 1] === "") all.pop()
  const shown = all.slice(-lines).map((l) => clip(l, width))
  return [`--- ${file} (${all.length > lines ? `last ${lines} of ${all.length} lines` : `${all.length} lines`}, ${text.length} bytes)`, ...shown].join("\n")
}

const alive = (pid: number) => Fs.existsSync(`/proc/${pid}`)

/** the seconds since boot and the clock ticks per second (Linux's USER_HZ is 100) */
const uptime = () => Number((read("/proc/uptime") ?? "0").split(" ")[0])

/** every process whose command line or working directory is in `dir`: pid, ppid, state, age, command line */
export const processesIn = (dir: string): ReadonlyArray<string> => {
  const now = uptime()
  const rows: Array<string> = []
  for (const entry of names("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    const cmdline = read(`/proc/${entry}/cmdline`)
    if (cmdline === undefined) continue
    let cwd = ""
    try {
      cwd = Fs.readlinkSync(`/proc/${entry}/cwd`)
    } catch {
      // another user's, or gone
    }
    if (!cmdline.includes(dir) && !(cwd === dir || cwd.startsWith(`${dir}/`))) continue
    // stat: pid (comm) state ppid ...; comm may hold spaces and parentheses, so read after the last ")"
    const stat = read(`/proc/${entry}/stat`) ?? ""
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    const state = fields[0] ?? "?"
    const ppid = fields[1] ?? "?"
    const started = Number(fields[19]) / 100
    const age = Number.isFinite(started) ? `${(now - started).toFixed(1)} s` : "?"
    // its own CPU time, user and system (clock ticks): a process busy on a slow machine, or one that does nothing
    const cpu = (Number(fields[11]) + Number(fields[12])) / 100
    // whole up to 1000 characters: a watcher's Node flags and paths come before the run it names
    const command = cmdline.split("\0").filter((a) => a !== "").join(" ")
    rows.push(`${entry} ppid ${ppid} ${state} age ${age} cpu ${Number.isFinite(cpu) ? `${cpu.toFixed(2)} s` : "?"} cwd ${cwd === "" ? "?" : cwd}: ${clip(command, 1000)}`)
  }
  return rows
}

/** What the node at `where` saw, for `run` when one is named: the text a failed wait prints. */
export const explain = (where: Explained, run?: string): string => {
  const { dir, root } = where
  const out: Array<string> = []
  const [one, five, fifteen] = Os.loadavg()
  out.push(`=== what the node saw, at ${new Date().toISOString()}: load average ${one!.toFixed(2)} ${five!.toFixed(2)} ${fifteen!.toFixed(2)} on ${Os.cpus().length} cores`)
  out.push(`ROOT ${root}${run === undefined ? "" : `, run ${run}`}`)
  // the node's own logs: hook.log, supervisor.log and whatever else it keeps there
  const nodeDir = Path.join(root, "node")
  const nodeLogs = names(nodeDir).filter((n) => /\.(log|out)$/.test(n))
  if (nodeLogs.length === 0) out.push(`--- ${nodeDir}: no logs (${names(nodeDir).join(" ") || "absent or empty"})`)
  // a line of hook.log or supervisor.log is one JSON object per round, its `did` the part that matters: kept whole
  for (const name of nodeLogs) out.push(tailOf(Path.join(nodeDir, name), name === "hook.log" ? 40 : 25, 2000))
  // what the world's tests keep beside ROOT: a supervisor's or a spare's output (supervisorWorld, spare.test)
  for (const name of names(dir).filter((n) => /\.(log|out)$/.test(n))) out.push(tailOf(Path.join(dir, name), 15))
  const spareLog = Path.join(root, "care", "spare", "log")
  if (Fs.existsSync(spareLog)) out.push(tailOf(spareLog, 15))
  const care = Path.join(root, "care")
  if (run === undefined) {
    out.push(`--- ${care}: ${names(care).join(" ") || "absent or empty"}`)
  } else {
    const files = names(care).filter((n) => n.startsWith(run))
    if (files.length === 0) out.push(`--- ${care} holds nothing of the run (it holds: ${names(care).join(" ") || "nothing"})`)
    if (!files.includes(`${run}.lock`)) out.push(`--- ${Path.join(care, `${run}.lock`)}: absent (no watcher has taken the run)`)
    for (const name of files) {
      const file = Path.join(care, name)
      if (name.endsWith(".lock")) {
        const pid = Number((read(file) ?? "").trim())
        out.push(`--- ${file}: ${Number.isInteger(pid) && pid > 0 ? `pid ${pid}, ${alive(pid) ? "alive" : "gone"}` : JSON.stringify(read(file) ?? "")}`)
      } else {
        out.push(tailOf(file, name.endsWith(".log") ? 40 : 10, 1000))
      }
    }
    const workspace = Path.join(root, "work", run)
    out.push(`--- ${workspace}: ${Fs.existsSync(workspace) ? names(workspace).join(" ") || "(empty)" : "absent"}`)
  }
  const processes = processesIn(dir)
  out.push(`--- the processes of ${dir} (${processes.length}; state R running, S sleeping, D in the kernel, Z ended unreaped; cpu: its own user and system time):`)
  out.push(...(processes.length === 0 ? ["(none)"] : processes))
  out.push("=== end of what the node saw")
  return out.join("\n")
}

/** the worlds open in this process: makeWorld adds each, its close takes it out */
export const openWorlds = new Set<Explained>()

const ranOutKey = Symbol.for("ocx2.waitRanOut")
type RanOut = (text: string) => void

/** Where a test runs, the way a wait that ran out is told (test/support/failedWaits.ts sets it in vitest's workers); the way before. */
export const onWaitRanOut = (tell: RanOut | undefined): RanOut | undefined => {
  const holder = globalThis as { [ranOutKey]?: RanOut }
  const before = holder[ranOutKey]
  if (tell === undefined) delete holder[ranOutKey]
  else holder[ranOutKey] = tell
  return before
}

/**
 * A bare wait (world.ts's `waitFor`, which gives undefined when its limit runs out) ran out: what
 * every open world saw at that moment, told if the test fails (such a wait is often asserted
 * after it, `expect(...).toBe(true)`, whose own message says only "expected undefined to be
 * true"); a wait meant to run out tells nothing in a test that passes. Outside vitest (a bench)
 * nothing is told.
 */
export const waitRanOut = (ms: number, waited: number): void => {
  const tell = (globalThis as { [ranOutKey]?: RanOut })[ranOutKey]
  if (tell === undefined) return
  // the wait's caller: the first frame outside the test worlds' own files
  const site = (new Error().stack ?? "").split("\n").slice(1).map((l) => l.trim()).find((l) => !/test\/support\/(world|explain)\.ts/.test(l)) ?? "?"
  const worlds = [...openWorlds]
  tell([
    `a wait of ${ms / 1000} s ran out (waited ${(waited / 1000).toFixed(1)} s), ${site}; ${worlds.length === 0 ? "no world was open" : `what ${worlds.length === 1 ? "its world" : `each of the ${worlds.length} open worlds`} saw then:`}`,
    ...worlds.map((w) => explain(w))
  ].join("\n"))
}
