/**
 * Who refused whose SQLite transaction on one file, from the kernel's own record of every fcntl
 * lock request (docs/locks.md): `perf record -a` of the tracepoints filelock:fcntl_setlk and
 * filelock:locks_remove_posix, and sched fork and exec for each process's ancestry. No ptrace:
 * under strace every lock call is slowed, which changes what meets what. Needs root and perf.
 *
 * A failed transaction is a process holding SHARED that was refused RESERVED and never took it
 * after (SQLite's refusal without its busy handler: a deferred transaction upgrading to write);
 * its holders are the processes that held RESERVED, PENDING or EXCLUSIVE at that instant.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Readline from "node:readline"

export interface FailedTransaction {
  /** epoch ms */
  readonly t: number
  readonly pid: number
  /** the process's ancestry by program, from a named root: "SERVER", "POLLER>flock>fossil" */
  readonly chain: string
  readonly holders: ReadonlyArray<{ readonly pid: number; readonly chain: string }>
}

export interface LockTrace {
  /** stops recording (a second call reads nothing) and reads back the failed transactions on the file `ino`; `roots` name the processes chains start from */
  readonly stop: (ino: number, roots: ReadonlyMap<number, string>) => Promise<ReadonlyArray<FailedTransaction>>
}

/** Why a trace cannot be taken here, or undefined when it can. */
export const traceUnavailable = (): string | undefined =>
  process.getuid?.() !== 0 || ChildProcess.spawnSync("perf", ["--version"]).status !== 0
    ? "needs root and perf (the kernel's filelock tracepoints)"
    : undefined

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Starts recording every fcntl lock request on the host (give it a moment: perf starts in about a second). */
export const startLockTrace = async (): Promise<LockTrace> => {
  const work = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-locktrace-"))
  const perfData = Path.join(work, "perf.data")
  const perf = ChildProcess.spawn("perf", [
    "record", "-a", "-k", "mono", "-o", perfData,
    "-e", "filelock:fcntl_setlk", "-e", "filelock:locks_remove_posix", "-e", "sched:sched_process_fork", "-e", "sched:sched_process_exec"
  ], { stdio: "ignore" })
  await sleep(2000)
  /** perf's clock (CLOCK_MONOTONIC) to the epoch's, in ms */
  const clock = Date.now() - Number(process.hrtime.bigint() / 1000000n)
  let stopped = false
  const stop: LockTrace["stop"] = async (ino, roots) => {
    if (stopped) return []
    stopped = true
    try {
      if (perf.exitCode === null) {
        perf.kill("SIGINT")
        await new Promise((resolve) => perf.once("exit", resolve))
      }
      const text = Path.join(work, "perf.txt")
      ChildProcess.spawnSync("sh", ["-c", `perf script -i "$1" -F comm,pid,time,event,trace > "$2" 2>/dev/null`, "perf", perfData, text])
      return await failedTransactions(text, clock, ino, roots)
    } finally {
      Fs.rmSync(work, { recursive: true, force: true })
    }
  }
  return { stop }
}

const failedTransactions = async (text: string, clock: number, ino: number, roots: ReadonlyMap<number, string>) => {
  const inode = `ino=0x${ino.toString(16)} `
  const named = [...roots.keys()]
  const parent = new Map<number, number>()
  const exe = new Map<number, string>(roots)
  const chain = (pid: number) => {
    const parts: Array<string> = []
    for (let p: number | undefined = pid, n = 0; p !== undefined && n < 64; p = parent.get(p), n++) {
      const e = exe.get(p)
      if (e !== undefined) parts.unshift(e)
      if (roots.has(p)) break
    }
    return parts.join(">")
  }
  const R = 1073741825
  type Held = { P?: string | undefined; R?: string | undefined; S?: string | undefined }
  const locks = new Map<number, Held>()
  const refused: Array<{ t: number; pid: number; holders: Array<number> }> = []
  const lastReserved = new Map<number, number>()
  const lines = Readline.createInterface({ input: Fs.createReadStream(text), crlfDelay: Infinity })
  for await (const line of lines) {
    const m = /^\s*\S.*?\s+(\d+)\s+(\d+\.\d+):\s+(\S+):\s+(.*)$/.exec(line)
    if (m === null) continue
    const t = Number(m[2]) * 1000 + clock, event = m[3]!, rest = m[4]!
    if (event === "sched:sched_process_fork") {
      // a new process (its pid may be an old one's again): its parent's until it execs, no locks
      const f = /pid=(\d+) child_comm=.* child_pid=(\d+)/.exec(rest)
      const child = Number(f?.[2])
      if (f !== null && !named.includes(child)) {
        parent.set(child, Number(f[1]))
        exe.delete(child)
        locks.delete(child)
      }
    } else if (event === "sched:sched_process_exec") {
      const f = /filename=(\S+) pid=(\d+)/.exec(rest)
      if (f !== null && !named.includes(Number(f[2]))) exe.set(Number(f[2]), Path.basename(f[1]!))
    } else if (rest.includes(inode)) {
      const f = /fl_pid=(\d+) .*fl_type=(F_\w+) fl_start=(\d+) fl_end=(\d+) ret=(-?\d+)/.exec(rest)
      if (f === null) continue
      const pid = Number(f[1])
      if (event === "filelock:locks_remove_posix") {
        locks.delete(pid)
        continue
      }
      const type = f[2] === "F_WRLCK" ? "wr" : f[2] === "F_RDLCK" ? "rd" : undefined
      const start = Number(f[3]), end = Number(f[4])
      const held = locks.get(pid) ?? {}
      if (f[5] !== "0") {
        if (start === R && type === "wr" && held.S === "rd") {
          refused.push({ t, pid, holders: [...locks].filter(([p, x]) => p !== pid && (x.R === "wr" || x.P === "wr" || x.S === "wr")).map(([p]) => p) })
        }
        continue
      }
      if (start <= R - 1 && R - 1 <= end) held.P = type
      if (start <= R && R <= end) held.R = type
      if (start <= R + 1 && R + 1 <= end) held.S = type
      locks.set(pid, held)
      if (start === R && type === "wr") lastReserved.set(pid, t)
    }
  }
  return refused
    .filter((r) => !((lastReserved.get(r.pid) ?? 0) > r.t))
    .map((r): FailedTransaction => ({ t: r.t, pid: r.pid, chain: chain(r.pid), holders: r.holders.map((pid) => ({ pid, chain: chain(pid) })) }))
}
