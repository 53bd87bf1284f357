/**
 * SandboxLauncher on Linux: bubblewrap for the sandbox, util-linux prlimit for cpu and
 * file_size, setpriv to really become uid/gid, cgroup pids and memory groups (v1: nested
 * under our own; v2: in the subtree the node manages, src/sandbox/CgroupsV2.ts). The spawned
 * wrapper joins its cgroups first and then execs, so every descendant is counted from its
 * first instruction.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import {
  InvalidLaunchSpec,
  LaunchFailed,
  LimitUnavailable,
  SandboxLauncher,
  StdinClosed,
  type HostCapabilities,
  type LaunchResult,
  type LaunchSpec,
  type RunningProcess,
  type SandboxLauncherService,
  type SandboxPathRefused
} from "../services/SandboxLauncher.js"
import { ByteTail } from "../src/sandbox/ByteTail.js"
import { bwrapArgs, unconfinedArgs } from "../src/sandbox/BwrapArgs.js"
import { endLeftovers, leftoverName, LaunchCgroups, probeController } from "../src/sandbox/Cgroups.js"
import { decideEnding } from "../src/sandbox/Ending.js"
import { planMounts, type PlannedMounts } from "../src/sandbox/MountPlan.js"
import { hostTools } from "../src/sandbox/HostTools.js"
import { endTree } from "../src/sandbox/ProcessTree.js"
import { checkSpecForm } from "../src/sandbox/SpecCheck.js"
import { noteEnding, openStatusFile } from "../src/sandbox/StatusFile.js"
import { TerminalChild } from "../src/sandbox/TerminalChild.js"
import { openStreamWriter } from "../src/follow/StreamFile.js"
import { releasePaths } from "../src/release/ReleasePaths.js"

export interface BwrapSandboxOptions {
  readonly bash?: string
  readonly bwrap?: string
  readonly setpriv?: string
  readonly prlimit?: string
  /** the host name every sandbox sees */
  readonly hostname?: string
  /**
   * Where the host's measured capabilities are kept between processes (a watcher per run would
   * otherwise probe user namespaces on every start); measured again when older than ten minutes.
   */
  readonly capabilitiesCache?: string
}

/** the processes bwrap itself adds to a sandbox's pids group: bwrap and the namespace's init */
const bwrapProcesses = 2
const wrapperEnv = { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" }
// closes every descriptor it inherited but stdio and the created files' (3 .. 2+$1); joins each
// cgroup named before "--"; when gated ($2 = 1) waits for one line on stdin, the caller's go (see
// `release`), so that all but the exec is done before it; then becomes the rest of its arguments
// (bash: dash cannot close fd 10+)
const wrapperScript = [
  'last=$((2 + $1)); gated=$2; shift 2',
  'for f in /proc/$$/fd/*; do n=${f##*/}; if [ "$n" -gt "$last" ]; then eval "exec $n>&-" 2>/dev/null; fi; done',
  'while [ "$1" != "--" ]; do echo "$$" > "$1" || exit 125; shift; done; shift',
  'if [ "$gated" = 1 ]; then IFS= read -r go || exit 125; [ "$go" = go ] || exit 125; fi',
  'exec "$@"'
].join("\n")

const exists = (p: string) => {
  try {
    Fs.accessSync(p, Fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

const measureCapabilities = (o: Required<Omit<BwrapSandboxOptions, "capabilitiesCache">>): HostCapabilities => {
  const notes: Array<string> = []
  let sandbox = exists(o.bwrap) && exists(o.setpriv) && exists(o.bash)
  if (!sandbox) notes.push(`sandbox: ${o.bwrap} or ${o.setpriv} is missing`)
  else {
    // unprivileged user namespaces for a non-root uid: what every sandbox relies on
    const r = ChildProcess.spawnSync(
      o.setpriv,
      ["--reuid", "65534", "--regid", "65534", "--clear-groups", o.bwrap, "--unshare-user", "--unshare-pid", "--uid", "65534",
        "--gid", "65534", "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
        "--", "/usr/bin/true"],
      { env: wrapperEnv, cwd: "/", stdio: ["ignore", "ignore", "pipe"], timeout: 10_000 }
    )
    if (r.status !== 0) {
      sandbox = false
      notes.push(`sandbox: bwrap in a user namespace as uid 65534 failed: ${r.stderr?.toString().trim() ?? r.error?.message}`)
    }
  }
  const limits = exists(o.prlimit)
  if (!limits) notes.push(`cpu, file_size: ${o.prlimit} is missing`)
  const pidsProblem = probeController("pids")
  if (pidsProblem !== undefined) notes.push(`processes: ${pidsProblem}`)
  const memoryProblem = probeController("memory")
  if (memoryProblem !== undefined) notes.push(`memory: ${memoryProblem}`)
  return {
    sandbox,
    wall: true,
    cpu: limits,
    file_size: limits,
    processes: pidsProblem === undefined,
    memory: memoryProblem === undefined,
    notes
  }
}

const signalNumber = (s: NodeJS.Signals) => Os.constants.signals[s] ?? 0

/** the system's code of a failure, for LaunchFailed: whether it may pass is decided from it (src/watcher/LaunchFailures.ts) */
const errorCode = (e: unknown): { code?: string } => {
  const code = (e as NodeJS.ErrnoException | undefined)?.code
  return typeof code === "string" ? { code } : {}
}

/** opens DIR/NAME for writing without following a link the process may have left there */
const openLog = (file: string): number => {
  try {
    Fs.unlinkSync(file)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e
  }
  const c = Fs.constants
  // read-write: a bounded log reads its own end back when it keeps only that (BoundedLog)
  return Fs.openSync(file, c.O_RDWR | c.O_CREAT | c.O_EXCL | c.O_NOFOLLOW, 0o644)
}

/**
 * A log file that never passes `bound` bytes (the run's file_size, which bounds every file the
 * process writes): when a write would pass it, the file keeps its last part, as the kept logs
 * keep a stream's end. It then holds the last half of the bound, and grows again from there, so
 * each rewrite is paid for by half a bound of new bytes; the rewrite copies within the file, a
 * mebibyte at a time, so its memory is bounded too. No bound: the whole stream.
 */
export class BoundedLog {
  private size = 0
  constructor(readonly fd: number, readonly bound: number | undefined) {}

  write(chunk: Uint8Array): void {
    const bound = this.bound
    if (bound === undefined || this.size + chunk.length <= bound) {
      this.append(chunk)
      return
    }
    // keep the last half of the bound (all of it for a bound too small to halve)
    const keep = bound < 2 ? bound : Math.floor(bound / 2)
    const fromChunk = Math.min(chunk.length, keep)
    const fromFile = Math.min(this.size, keep - fromChunk)
    const step = 1024 * 1024
    const buffer = Buffer.alloc(Math.min(step, Math.max(1, fromFile)))
    // forward, the destination always before the source: nothing is overwritten before it is read
    for (let done = 0; done < fromFile;) {
      const n = Fs.readSync(this.fd, buffer, 0, Math.min(buffer.length, fromFile - done), this.size - fromFile + done)
      if (n <= 0) break
      this.writeAt(buffer.subarray(0, n), done)
      done += n
    }
    this.size = fromFile
    Fs.ftruncateSync(this.fd, this.size)
    this.append(chunk.subarray(chunk.length - fromChunk))
  }

  private append(bytes: Uint8Array): void {
    this.writeAt(bytes, this.size)
    this.size += bytes.length
  }

  private writeAt(bytes: Uint8Array, position: number): void {
    for (let off = 0; off < bytes.length;) off += Fs.writeSync(this.fd, bytes, off, bytes.length - off, position + off)
  }
}

/** a stream read into a bounded tail and, once it printed a byte, into its log file (bounded by `logBound`) */
class StreamSink {
  readonly tail: ByteTail
  private log: BoundedLog | undefined
  private logFailed = false
  logPath: string | undefined
  readonly done: Promise<void>

  constructor(
    readonly name: "stdout" | "stderr",
    readable: NodeJS.ReadableStream & { pause(): void; resume(): void },
    keep: number,
    logDir: string | undefined,
    problems: Array<string>,
    logBound: number | undefined,
    live?: (stream: "stdout" | "stderr", chunk: Buffer) => void
  ) {
    this.tail = new ByteTail(keep)
    this.done = new Promise<void>((resolve) => {
      readable.on("data", (chunk: Buffer) => {
        this.tail.push(chunk)
        live?.(name, chunk)
        if (logDir === undefined || this.logFailed) return
        const file = Path.join(logDir, `${name}.log`)
        try {
          if (this.log === undefined) {
            this.log = new BoundedLog(openLog(file), logBound)
            this.logPath = file
          }
          this.log.write(chunk)
        } catch (e) {
          // a log that cannot be written (the disk full, the workspace gone) is given up, not the run
          this.logFailed = true
          problems.push(`${file}: ${(e as Error).message}`)
        }
      })
      readable.on("error", () => resolve())
      readable.on("close", () => resolve())
      readable.on("end", () => resolve())
    }).then(() => {
      if (this.log === undefined) return
      try {
        Fs.closeSync(this.log.fd)
      } catch {
        // closed
      }
    })
  }
}

/** what the launch needs of its child: a child process, or a terminal launch (TerminalChild.ts) */
interface LaunchedChild {
  readonly pid?: number | undefined
  readonly stdin: NodeJS.WritableStream & { destroy(): void; readonly writableLength: number } | null
  readonly stdout: (NodeJS.ReadableStream & { pause(): void; resume(): void; destroy(): void }) | null
  readonly stderr: (NodeJS.ReadableStream & { pause(): void; resume(): void; destroy(): void }) | null
  once(event: "exit", listener: (code: number | null, signal: NodeJS.Signals | null) => void): unknown
  once(event: "error", listener: (e: Error) => void): unknown
  once(event: "spawn", listener: () => void): unknown
}

/** The tools a launch runs, as the layer's options name them (defaults filled in). */
export type SandboxTools = Required<Omit<BwrapSandboxOptions, "capabilitiesCache">>

export const defaultTools = (options: BwrapSandboxOptions = {}): SandboxTools => ({
  bash: options.bash ?? hostTools.bash,
  bwrap: options.bwrap ?? hostTools.bwrap,
  setpriv: options.setpriv ?? hostTools.setpriv,
  prlimit: options.prlimit ?? hostTools.prlimit,
  hostname: options.hostname ?? hostTools.hostname
})

/**
 * What the wrapper becomes once released: prlimit (cpu, file_size), setpriv (the uid and gid),
 * bwrap with the run's sandbox, and its command. bench/launch runs it with /bin/true as the run's
 * own floor.
 */
export const sandboxCommand = (o: SandboxTools, spec: LaunchSpec, mounts: PlannedMounts | undefined): Array<string> => {
  const sb = spec.sandbox
  const inner: Array<string> = []
  const prlimits: Array<string> = []
  // the status file's descriptor follows the created files' (3, 4, ...), as both launches pass them
  const statusFd = spec.statusFile === undefined ? undefined : 3 + (sb?.createdFiles.length ?? 0)
  if (spec.limits.cpuSeconds !== undefined) {
    // hard one second later: at the hard limit the kernel sends SIGKILL, which names nothing
    prlimits.push(`--cpu=${spec.limits.cpuSeconds}:${spec.limits.cpuSeconds + 1}`)
  }
  if (spec.limits.fileSizeBytes !== undefined) prlimits.push(`--fsize=${spec.limits.fileSizeBytes}:${spec.limits.fileSizeBytes}`)
  if (prlimits.length > 0) inner.push(o.prlimit, ...prlimits, "--")
  if (sb !== undefined) {
    inner.push(o.setpriv, "--reuid", String(sb.uid), "--regid", String(sb.gid), "--clear-groups", "--")
    inner.push(o.bwrap, ...bwrapArgs({
      uid: sb.uid,
      gid: sb.gid,
      linuxCapabilities: sb.linuxCapabilities,
      network: sb.network,
      isolateTerminal: sb.isolateTerminal,
      endsWithParent: sb.endsWithParent,
      proc: sb.proc,
      dev: sb.dev,
      tmp: sb.tmp,
      mounts: mounts!.mounts,
      links: mounts!.links,
      createdFiles: sb.createdFiles.map((f, i) => ({ fd: 3 + i, at: f.at })),
      statusFd,
      env: spec.env,
      cwd: spec.cwd,
      command: spec.command,
      hostname: o.hostname
    }))
  } else {
    inner.push(o.bwrap, ...unconfinedArgs({ env: spec.env, cwd: spec.cwd, command: spec.command, statusFd }))
  }
  return inner
}

/** The files a launch creates in the sandbox: their text reaches bwrap on inherited descriptors. */
interface Created {
  readonly fds: Array<number>
  /** where their text was written (a terminal's wrapper opens the files itself, by name) */
  dir: string | undefined
}

const closeCreated = (created: Created) => {
  for (const fd of created.fds.splice(0)) Fs.closeSync(fd)
  if (created.dir !== undefined) Fs.rmSync(created.dir, { recursive: true, force: true })
  created.dir = undefined
}

/**
 * The created files written and opened, and the status file opened after them (a terminal's
 * wrapper opens that itself); LaunchFailed, with everything closed again, when one cannot be.
 */
const createFiles = (spec: LaunchSpec): Created | LaunchFailed => {
  const created: Created = { fds: [], dir: undefined }
  const sb = spec.sandbox
  try {
    if (sb !== undefined && sb.createdFiles.length > 0) {
      created.dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-created-"))
      sb.createdFiles.forEach((f, i) => {
        const file = Path.join(created.dir!, String(i))
        Fs.writeFileSync(file, f.text, { mode: 0o600 })
        created.fds.push(Fs.openSync(file, "r"))
      })
    }
  } catch (e) {
    closeCreated(created)
    return new LaunchFailed({ step: "created_files", reason: (e as Error).message, ...errorCode(e) })
  }
  if (spec.statusFile !== undefined && spec.terminal === undefined) {
    try {
      created.fds.push(openStatusFile(spec.statusFile))
    } catch (e) {
      closeCreated(created)
      return new LaunchFailed({ step: "status_file", reason: (e as Error).message, ...errorCode(e) })
    }
  }
  return created
}

/** The wrapper started: a child with pipes, or with a terminal (2.10) whose wrapper opens the created files itself. */
const spawnWrapper = (
  o: SandboxTools,
  spec: LaunchSpec,
  created: Created,
  cgroups: LaunchCgroups | undefined,
  inner: ReadonlyArray<string>
): { readonly child: LaunchedChild; readonly terminal: TerminalChild | undefined } => {
  const gated = spec.gated === true
  if (spec.terminal === undefined) {
    const argv = [
      "--norc", "--noprofile", "-c", wrapperScript, "ocx2-launch", String(created.fds.length), gated ? "1" : "0",
      ...(cgroups?.procsFiles() ?? []), "--", ...inner
    ]
    const child = ChildProcess.spawn(o.bash, argv, { cwd: "/", env: wrapperEnv, detached: true, stdio: ["pipe", "pipe", "pipe", ...created.fds] })
    return { child, terminal: undefined }
  }
  const terminal = new TerminalChild({
    bash: o.bash,
    stty: "/usr/bin/stty",
    mkfifo: "/usr/bin/mkfifo",
    env: wrapperEnv,
    size: spec.terminal,
    gated,
    createdFiles: created.fds.map((_, i) => Path.join(created.dir!, String(i))),
    statusFile: spec.statusFile,
    procsFiles: cgroups?.procsFiles() ?? [],
    command: [...inner]
  })
  return { child: terminal, terminal }
}

/** One launched process and what its ends (wall, memory, stop, exit) and its input have changed. */
interface Launched {
  readonly spec: LaunchSpec
  readonly child: LaunchedChild
  readonly terminal: TerminalChild | undefined
  readonly pid: number
  readonly stdin: NonNullable<LaunchedChild["stdin"]>
  readonly cgroups: LaunchCgroups | undefined
  readonly created: Created
  readonly timers: Array<NodeJS.Timeout>
  readonly startedAt: number
  stopped: boolean
  wallExpired: boolean
  oomSeen: boolean
  ended: boolean
  exitCode: number | undefined
  stdinOpen: boolean
}

/** Wall counts from the launch: for a gated launch, from its release. */
const startWall = (l: Launched) => {
  if (l.spec.limits.wallSeconds === undefined || l.ended) return
  l.timers.push(setTimeout(() => {
    if (l.ended) return
    l.wallExpired = true
    noteEnding(l.spec.statusFile, "wall")
    void endTree(l.pid)
  }, l.spec.limits.wallSeconds * 1000))
}

/** Past the memory limit the run is over, even when the kernel killed only a child. */
const watchMemory = (l: Launched) => {
  const cgroups = l.cgroups
  if (cgroups === undefined || l.spec.limits.memoryBytes === undefined) return
  l.timers.push(setInterval(() => {
    if (l.ended || l.oomSeen || cgroups.oomKills() === 0) return
    l.oomSeen = true
    noteEnding(l.spec.statusFile, "memory")
    void endTree(l.pid)
  }, 200))
}

/** What the launch ends with, once its process exited: its groups emptied and removed, its output drained. */
const resultAfterExit = async (l: Launched, out: StreamSink, err: StreamSink, problems: Array<string>): Promise<LaunchResult> => {
  l.ended = true
  if (l.terminal !== undefined) closeCreated(l.created)
  for (const t of l.timers) clearTimeout(t)
  l.stdinOpen = false
  l.stdin.destroy()
  const cgroups = l.cgroups
  // the pid namespace is gone with bwrap; whatever an odd path left in the groups goes too
  if (cgroups !== undefined) {
    for (let i = 0; i < 100 && cgroups.killAll() > 0; i++) await new Promise((r) => setTimeout(r, 10))
  }
  const drained = await Promise.race([
    Promise.all([out.done, err.done]).then(() => true),
    new Promise<boolean>((r) => setTimeout(() => r(false), 2000))
  ])
  if (!drained) {
    l.child.stdout!.destroy()
    l.child.stderr!.destroy()
    await Promise.all([out.done, err.done])
  }
  const oomKilled = l.oomSeen || (cgroups?.oomKills() ?? 0) > 0
  if (cgroups !== undefined) {
    for (let i = 0; i < 100 && !cgroups.removeNow(); i++) await new Promise((r) => setTimeout(r, 20))
  }
  const logs: { stdout?: string; stderr?: string } = {}
  if (out.logPath !== undefined) logs.stdout = out.logPath
  if (err.logPath !== undefined) logs.stderr = err.logPath
  return {
    ending: decideEnding({ exit: l.exitCode, stopped: l.stopped, wallExpired: l.wallExpired, oomKilled, limits: l.spec.limits }),
    stdout: { tail: out.tail.bytes(), totalBytes: out.tail.total },
    stderr: { tail: err.tail.bytes(), totalBytes: err.tail.total },
    startedAt: l.startedAt,
    endedAt: Date.now(),
    logs,
    logProblems: problems
  }
}

const writeRaw = (l: Launched, text: string) =>
  new Promise<void>((resolve, reject) => {
    if (!l.stdinOpen) return reject(new StdinClosed({ reason: l.ended ? "the process ended" : "it was closed" }))
    l.stdin.write(text, (e) => (e ? reject(new StdinClosed({ reason: e.message })) : resolve()))
  })

const closeStdin = (l: Launched) => {
  if (!l.stdinOpen) return
  l.stdinOpen = false
  l.stdin.end()
}

/** The running process as the service gives it. */
const handleOf = (l: Launched, exited: Promise<void>, result: Promise<LaunchResult>): RunningProcess => ({
  pid: l.pid,
  writeLine: (line) =>
    line.includes("\n")
      ? Effect.fail(new StdinClosed({ reason: "a line may not hold a newline" }))
      : Effect.tryPromise({ try: () => writeRaw(l, `${line}\n`), catch: (e) => e as StdinClosed }),
  queueLine: (line) =>
    line.includes("\n") ? Effect.fail(new StdinClosed({ reason: "a line may not hold a newline" }))
    : !l.stdinOpen ? Effect.fail(new StdinClosed({ reason: l.ended ? "the process ended" : "it was closed" }))
    : Effect.sync(() => {
      // a failed write shows as stdin closed at the next line
      l.stdin.write(`${line}\n`, () => {})
    }),
  pendingInput: Effect.sync(() => (l.stdinOpen ? l.stdin.writableLength : 0)),
  closeStdin: Effect.sync(() => closeStdin(l)),
  stop: Effect.promise(async () => {
    if (l.ended) return
    l.stopped = true
    noteEnding(l.spec.statusFile, "stopped")
    await endTree(l.pid)
    await exited
  }),
  result: Effect.promise(() => result),
  release: Effect.void,
  processIds: Effect.sync(() => (l.ended ? [] : l.cgroups?.pids() ?? [l.pid])),
  terminal: l.terminal?.access
})

/** The first lines (after the go of a gated launch), then stdin closed unless the caller keeps it. */
const beginInput = (l: Launched, prefix: string) => {
  const text = prefix + l.spec.stdin.lines.map((line) => `${line}\n`).join("")
  // a terminal's end of input is typed (Ctrl-D); the plan keeps a terminal open for the people who join it
  const afterFirst = () => {
    if (!l.spec.stdin.keepOpen) closeStdin(l)
  }
  if (text.length > 0) writeRaw(l, text).then(afterFirst, afterFirst)
  else afterFirst()
}

/** The handle once the wrapper runs: a gated launch's release lets the program start (its go, or the terminal's). */
const started = (l: Launched, handle: RunningProcess): RunningProcess => {
  if (l.spec.gated !== true) {
    beginInput(l, "")
    return handle
  }
  let released = false
  return {
    ...handle,
    release: Effect.sync(() => {
      if (released) return
      released = true
      startWall(l)
      if (l.terminal !== undefined) {
        l.terminal.go()
        beginInput(l, "")
      } else beginInput(l, "go\n")
    })
  }
}

const launch = (
  o: Required<Omit<BwrapSandboxOptions, "capabilitiesCache">>,
  spec: LaunchSpec,
  mounts: PlannedMounts | undefined,
  cgroups: LaunchCgroups | undefined
): Promise<RunningProcess> => {
  const created = createFiles(spec)
  if (created instanceof LaunchFailed) return Promise.reject(created)
  const inner = sandboxCommand(o, spec, mounts)
  return new Promise<RunningProcess>((resolveStart, rejectStart) => {
    const startedAt = Date.now()
    let spawned: ReturnType<typeof spawnWrapper>
    try {
      spawned = spawnWrapper(o, spec, created, cgroups, inner)
    } catch (e) {
      closeCreated(created)
      return rejectStart(new LaunchFailed({ step: "spawn", reason: (e as Error).message, ...errorCode(e) }))
    }
    const { child, terminal } = spawned
    const l: Launched = {
      spec, child, terminal, pid: child.pid!, stdin: child.stdin!, cgroups, created, timers: [], startedAt,
      stopped: false, wallExpired: false, oomSeen: false, ended: false, exitCode: undefined, stdinOpen: true
    }
    l.stdin.on("error", () => {
      l.stdinOpen = false
    })
    // the logs the launcher writes for the process are bounded as the files it writes itself (file_size)
    const problems: Array<string> = []
    const live = spec.streamFile === undefined ? undefined : openStreamWriter(spec.streamFile)
    const out = new StreamSink("stdout", child.stdout!, spec.keep.stdout, spec.logDir, problems, spec.limits.fileSizeBytes, live)
    const err = new StreamSink("stderr", child.stderr!, spec.keep.stderr, spec.logDir, problems, spec.limits.fileSizeBytes, live)
    if (spec.gated !== true) startWall(l)
    watchMemory(l)
    const exited = new Promise<void>((resolve) => {
      child.once("exit", (code, sig) => {
        l.exitCode = code ?? (sig === null ? undefined : 128 + signalNumber(sig))
        resolve()
      })
    })
    const result = exited.then(() => resultAfterExit(l, out, err, problems))
    child.once("error", (e) => {
      closeCreated(created)
      for (const t of l.timers) clearTimeout(t)
      rejectStart(new LaunchFailed({ step: "spawn", reason: e.message, ...errorCode(e) }))
    })
    child.once("spawn", () => {
      if (terminal === undefined) closeCreated(created)
      resolveStart(started(l, handleOf(l, exited, result)))
    })
  })
}

const capabilitiesLifetimeMs = 10 * 60 * 1000

const cachedCapabilities = (file: string | undefined, measure: () => HostCapabilities): HostCapabilities => {
  if (file !== undefined) {
    try {
      if (Date.now() - Fs.statSync(file).mtimeMs < capabilitiesLifetimeMs) return JSON.parse(Fs.readFileSync(file, "utf8")) as HostCapabilities
    } catch {
      // absent or unreadable: measure
    }
  }
  const measured = measure()
  if (file !== undefined) {
    try {
      Fs.mkdirSync(Path.dirname(file), { recursive: true })
      Fs.writeFileSync(`${file}.${process.pid}`, JSON.stringify(measured))
      Fs.renameSync(`${file}.${process.pid}`, file)
    } catch {
      // the next process measures again
    }
  }
  return measured
}

export const make = (options: BwrapSandboxOptions = {}): SandboxLauncherService => {
  const o = defaultTools(options)
  let measured: HostCapabilities | undefined
  const caps = () => (measured ??= cachedCapabilities(options.capabilitiesCache, () => measureCapabilities(o)))

  const checkAll = (spec: LaunchSpec): PlannedMounts | undefined | SandboxPathRefused | InvalidLaunchSpec | LimitUnavailable => {
    const form = checkSpecForm(spec)
    if (form !== undefined) return form
    const c = caps()
    const unavailable = (which: string, ok: boolean) =>
      ok ? undefined : new LimitUnavailable({ which, reason: c.notes.find((n) => n.startsWith(which)) ?? "not on this host" })
    const l = spec.limits
    const refused =
      unavailable("sandbox", c.sandbox || spec.sandbox === undefined) ??
      (spec.sandbox === undefined && !Fs.existsSync(o.bwrap) ? unavailable("sandbox", false) : undefined) ??
      unavailable("cpu", c.cpu || l.cpuSeconds === undefined) ??
      unavailable("file_size", c.file_size || l.fileSizeBytes === undefined) ??
      unavailable("processes", c.processes || l.processes === undefined) ??
      unavailable("memory", c.memory || l.memoryBytes === undefined)
    if (refused !== undefined) return refused
    return spec.sandbox === undefined ? undefined : planMounts(spec.sandbox)
  }

  const check: SandboxLauncherService["check"] = (spec) =>
    Effect.suspend(() => {
      const r = checkAll(spec)
      return r === undefined || !("_tag" in r) ? Effect.void : Effect.fail(r)
    })

  const start: SandboxLauncherService["start"] = (spec) =>
    Effect.acquireRelease(
      Effect.gen(function*() {
        const checked = checkAll(spec)
        if (checked !== undefined && "_tag" in checked) return yield* Effect.fail(checked)
        const processes = spec.limits.processes
        // a named launch's groups are its owner's alone (the watcher holds the run's lock): groups of
        // that name are what a launcher killed before its launch left, ended and removed first, or
        // every later launch of the run would fail to make them (EEXIST)
        if (spec.name !== undefined) endLeftovers(spec.name)
        const cgroups = yield* Effect.try({
          try: () =>
            caps().processes || spec.limits.memoryBytes !== undefined
              ? LaunchCgroups.make(spec.name !== undefined ? leftoverName(spec.name) : `ocx2-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`, {
                pids: caps().processes,
                pidsMax: processes === undefined ? undefined : processes + bwrapProcesses,
                memoryBytes: spec.limits.memoryBytes
              })
              : undefined,
          catch: (e) => new LaunchFailed({ step: "cgroups", reason: (e as Error).message, ...errorCode(e) })
        })
        return yield* Effect.tryPromise({
          try: () => launch(o, spec, checked, cgroups),
          catch: (e) => {
            cgroups?.removeNow()
            return e instanceof LaunchFailed ? e : new LaunchFailed({ step: "spawn", reason: String(e), ...errorCode(e) })
          }
        })
      }),
      // the scope's end stops whatever still runs and waits until it is gone
      (handle) => Effect.zipRight(handle.stop, handle.result)
    )

  return {
    capabilities: Effect.sync(caps),
    check,
    start,
    run: (spec) => Effect.scoped(Effect.flatMap(start(spec), (h) => h.result))
  }
}

export const layer = (options: BwrapSandboxOptions = {}): Layer.Layer<SandboxLauncher> =>
  Layer.sync(SandboxLauncher, () => make(options))

/** A node's sandbox options: its measure of the host kept in ROOT/node, shared by the node's processes. */
export const ofRoot = (root: string): BwrapSandboxOptions => ({ capabilitiesCache: releasePaths(root).capabilities })
