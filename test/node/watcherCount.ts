/**
 * Counts a node's watcher processes from outside (tests and bench/load): every process whose
 * command line runs ocx2-watcher under the node's root, sampled every few milliseconds. A child a
 * watcher forks shows the watcher's command line until it execs its own program: a millisecond
 * on a quiet machine, tens on a loaded one, long enough to be seen twice. So a process whose
 * parent has the same command line is that fork, not a watcher (a watcher starts another watcher
 * for another run, or a spare, never for its own run), and a process counts once seen in two
 * samples in a row with the same command line, which a watcher lives far longer than.
 */
import * as Fs from "node:fs"

export interface WatcherCount {
  /** distinct watcher processes seen (spares included), and of those, spares */
  readonly started: number
  readonly spares: number
  /** the most alive at once, and their resident memory together at its most (bytes) */
  readonly peakAlive: number
  readonly peakRss: number
}

const pageSize = 4096

/** the parent's pid, from /proc/PID/stat: the field after the command's name, which is in parentheses and may hold any */
const parentOf = (pid: string): number => Number(Fs.readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /s, "").split(" ")[1])

const watchersUnder = (root: string): Array<{ pid: number; cmdline: string; spare: boolean; rss: number }> => {
  const found = Fs.readdirSync("/proc").filter((e) => /^\d+$/.test(e)).flatMap((e) => {
    try {
      // a spare that took a run names it in its process title (one string, spaces for NULs)
      const cmdline = Fs.readFileSync(`/proc/${e}/cmdline`, "utf8")
      if (!cmdline.includes("ocx2-watcher") || !cmdline.includes(root)) return []
      const rss = Number(Fs.readFileSync(`/proc/${e}/statm`, "utf8").split(" ")[1]) * pageSize
      return [{ pid: Number(e), parent: parentOf(e), cmdline, spare: cmdline.split("\0").includes("--spare"), rss }]
    } catch {
      return []
    }
  })
  const cmdlineOf = new Map(found.map((w) => [w.pid, w.cmdline]))
  return found.filter((w) => cmdlineOf.get(w.parent) !== w.cmdline).map(({ parent: _, ...w }) => w)
}

/** Starts sampling; `stop` ends it and says what was seen. */
export const countWatchers = (root: string, everyMs = 10): { readonly stop: () => WatcherCount; readonly now: () => WatcherCount } => {
  const counted = new Map<number, boolean>()
  let last = new Map<number, string>()
  let peakAlive = 0
  let peakRss = 0
  const sample = () => {
    const alive = watchersUnder(root)
    const confirmed = alive.filter((w) => counted.has(w.pid) || last.get(w.pid) === w.cmdline || (w.spare && last.has(w.pid)))
    for (const w of confirmed) counted.set(w.pid, counted.get(w.pid) === true || w.spare)
    last = new Map(alive.map((w) => [w.pid, w.cmdline]))
    peakAlive = Math.max(peakAlive, confirmed.length)
    peakRss = Math.max(peakRss, confirmed.reduce((sum, w) => sum + w.rss, 0))
  }
  sample()
  const timer = setInterval(sample, everyMs)
  const now = (): WatcherCount => ({ started: counted.size, spares: [...counted.values()].filter((s) => s).length, peakAlive, peakRss })
  return {
    now,
    stop: () => {
      clearInterval(timer)
      sample()
      return now()
    }
  }
}
