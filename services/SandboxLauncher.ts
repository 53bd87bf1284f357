import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"

/**
 * One fully resolved launch: every placeholder already substituted, every size in
 * bytes, every duration in seconds. The launcher knows nothing of runs or Fossil.
 */
export interface LaunchSpec {
  /**
   * Names the launch's cgroups (ocx2-run-NAME), so what is left of it after its launcher died
   * can be found and ended (sandbox/Cgroups.ts endLeftovers). The watcher gives the run's hash.
   */
  readonly name?: string | undefined
  /**
   * Prepare everything up to the program but run nothing until `release`: the watcher writes
   * started while the sandbox is being set up, and releases it once started is in the record.
   */
  readonly gated?: boolean | undefined
  /** the program, then its arguments; a program without "/" is found on env's PATH */
  readonly command: ReadonlyArray<string>
  /** the process's whole environment; nothing is added */
  readonly env: Readonly<Record<string, string>>
  /** where it starts (a path inside the sandbox, or on the host when unconfined) */
  readonly cwd: string
  /** absent: unconfined (the host allowed it); present: bubblewrap, 2.8 */
  readonly sandbox?: SandboxSpec | undefined
  readonly limits: Limits
  readonly stdin: StdinSpec
  /** how many bytes of the end of each stream to keep in memory */
  readonly keep: { readonly stdout: number; readonly stderr: number }
  /** when given (the workspace), each stream that printed a byte is written whole to
   *  DIR/stdout.log and DIR/stderr.log, rewritten for each process */
  readonly logDir?: string | undefined
  /** when given (ROOT/care/RUN.stream), every chunk either stream prints is appended to it as it is read,
   *  for the people following the run (src/follow/StreamFile.ts) */
  readonly streamFile?: string | undefined
  /**
   * present: the process runs on a pseudo-terminal the launcher holds, this size (2.10 "With a
   * terminal"): STDIN and STDOUT are the terminal, STDERR a pipe of its own that the launcher keeps
   * and copies to what the terminal shows; stdin lines are typed in. See `RunningProcess.terminal`.
   */
  readonly terminal?: TerminalSize | undefined
  /**
   * when given (ROOT/care/RUN.status), bubblewrap reports the process's start and exit to it as JSON
   * lines (`--json-status-fd`), and the launcher adds why it ended the process when it did: a
   * record of the exit that outlives the launcher, so a node whose watcher died after its process
   * exited still answers the real outcome (src/watcher/StatusFile.ts)
   */
  readonly statusFile?: string | undefined
}

export interface TerminalSize {
  readonly rows: number
  readonly cols: number
}

/**
 * A terminal launch's screen for the people who join it (the watcher's TerminalServer). Plain
 * callbacks, not Effects: they carry every byte the terminal shows, as it is shown.
 */
export interface TerminalAccess {
  /** the last bytes the terminal showed (its output and the copies of STDERR), for a joiner's context */
  readonly recent: () => Uint8Array
  /** each later chunk the terminal shows; returns the function that ends the subscription */
  readonly subscribe: (listener: (bytes: Uint8Array) => void) => () => void
  /** what a person joined types, byte for byte (nothing once the process ended) */
  readonly type: (bytes: Uint8Array) => void
  readonly resize: (size: TerminalSize) => void
  readonly size: () => TerminalSize
}

/** 2.8, every key as the run said it, paths already substituted */
export interface SandboxSpec {
  readonly uid: number
  readonly gid: number
  /** names such as "CAP_NET_ADMIN"; empty keeps none */
  readonly linuxCapabilities: ReadonlyArray<string>
  readonly network: boolean
  readonly isolateTerminal: boolean
  readonly endsWithParent: boolean
  /** paths inside the sandbox */
  readonly proc: string
  readonly dev: string
  readonly tmp: string
  /** host paths, each seen where it is on the host */
  readonly readOnly: ReadonlyArray<string>
  readonly readWrite: ReadonlyArray<string>
  /** host paths, each seen read-write at WORKSPACE/<base name> */
  readonly homes: ReadonlyArray<string>
  readonly createdFiles: ReadonlyArray<{ readonly at: string; readonly text: string }>
  /** the run's workspace (host path), seen read-write where it is; may be named anywhere */
  readonly workspace?: string | undefined
  /** the release directory, which read_only alone may name */
  readonly release?: string | undefined
  /** OCX's own paths (the clone, ROOT/care, ROOT/settings, the release root, the
   *  passwords file): a sandbox path that is, holds or lies within one is refused (refusal 7) */
  readonly ownPaths: ReadonlyArray<string>
}

export type LimitName = "wall" | "cpu" | "processes" | "file_size" | "memory"

export interface Limits {
  readonly wallSeconds?: number | undefined
  readonly cpuSeconds?: number | undefined
  readonly processes?: number | undefined
  readonly fileSizeBytes?: number | undefined
  readonly memoryBytes?: number | undefined
}

export interface StdinSpec {
  /** written first, one line each (a line holds no newline; one is added) */
  readonly lines: ReadonlyArray<string>
  /** false: stdin closes after the lines; true: the caller writes more and closes it */
  readonly keepOpen: boolean
}

/** What the host can provide (refusal 6 asks this before a run is taken). */
export interface HostCapabilities {
  /** bubblewrap present and unprivileged user namespaces usable for a non-root uid */
  readonly sandbox: boolean
  readonly wall: boolean
  readonly cpu: boolean
  readonly file_size: boolean
  /** cgroup v1 pids controller usable under our own cgroup */
  readonly processes: boolean
  /** cgroup v1 memory controller usable under our own cgroup */
  readonly memory: boolean
  /** why each missing capability is missing */
  readonly notes: ReadonlyArray<string>
}

export interface KeptTail {
  /** the last bytes printed, at most the kept size */
  readonly tail: Uint8Array
  /** every byte the stream printed */
  readonly totalBytes: number
}

/** 2.12's outcomes a process can have; `exit` is the code, or 128+N for signal N */
export type Ending =
  | { readonly outcome: "exited"; readonly exit: number }
  | { readonly outcome: "budget"; readonly limit: LimitName; readonly exit: number | undefined }
  | { readonly outcome: "stopped"; readonly exit: number | undefined }

export interface LaunchResult {
  readonly ending: Ending
  readonly stdout: KeptTail
  readonly stderr: KeptTail
  /** epoch milliseconds */
  readonly startedAt: number
  readonly endedAt: number
  /** the log files written (only for a stream that printed a byte) */
  readonly logs: { readonly stdout?: string; readonly stderr?: string }
  /** why a log could not be written, if it could not */
  readonly logProblems: ReadonlyArray<string>
}

export interface RunningProcess {
  /** host pid of the launcher's direct child (the wrapper that becomes bwrap) */
  readonly pid: number
  /** write one more line on stdin (sessions); waits until the process's pipe took it */
  readonly writeLine: (line: string) => Effect.Effect<void, StdinClosed>
  /** hands one more line to stdin without waiting for the process to read it (see pendingInput) */
  readonly queueLine: (line: string) => Effect.Effect<void, StdinClosed>
  /** bytes handed to stdin that the process's pipe has not taken yet: what it has not read */
  readonly pendingInput: Effect.Effect<number>
  readonly closeStdin: Effect.Effect<void>
  /** ends the whole process tree; the result is "stopped" unless it had already ended */
  readonly stop: Effect.Effect<void>
  /** lets a gated launch run its program (the first stdin lines follow); nothing for another */
  readonly release: Effect.Effect<void>
  /** waits for the end: the process and everything it started are gone */
  readonly result: Effect.Effect<LaunchResult>
  /** host pids of every process of the launch still present (empty once ended) */
  readonly processIds: Effect.Effect<ReadonlyArray<number>>
  /** a terminal launch's screen, for the people who join it; absent without a terminal */
  readonly terminal?: TerminalAccess | undefined
}

export class SandboxPathRefused extends Schema.TaggedError<SandboxPathRefused>()("SandboxPathRefused", {
  path: Schema.String,
  resolved: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `sandbox path ${this.path}${this.resolved !== this.path ? ` (${this.resolved})` : ""} refused: ${this.reason}`
  }
}

export class InvalidLaunchSpec extends Schema.TaggedError<InvalidLaunchSpec>()("InvalidLaunchSpec", {
  key: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `launch spec ${this.key}: ${this.reason}`
  }
}

export class LimitUnavailable extends Schema.TaggedError<LimitUnavailable>()("LimitUnavailable", {
  which: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `this host cannot provide ${this.which}: ${this.reason}`
  }
}

export class LaunchFailed extends Schema.TaggedError<LaunchFailed>()("LaunchFailed", {
  step: Schema.String,
  reason: Schema.String,
  /** the system's error code (E2BIG, ENOSPC, ...) when the step failed on one: whether it may pass */
  code: Schema.optional(Schema.String)
}) {
  override get message() {
    return `launch failed at ${this.step}: ${this.reason}`
  }
}

export class StdinClosed extends Schema.TaggedError<StdinClosed>()("StdinClosed", {
  reason: Schema.String
}) {
  override get message() {
    return `stdin is closed: ${this.reason}`
  }
}

/** What `check` finds against a launch: each is a refusal of the run it came from (src/watcher/LaunchPlan.ts). */
export type LaunchCheckError = SandboxPathRefused | InvalidLaunchSpec | LimitUnavailable

export type LaunchError = LaunchCheckError | LaunchFailed

export interface SandboxLauncherService {
  /** what this host can provide, measured once */
  readonly capabilities: Effect.Effect<HostCapabilities>
  /** every check made before launch (spec form, refusal 6, refusal 7); launches nothing */
  readonly check: (spec: LaunchSpec) => Effect.Effect<void, LaunchCheckError>
  /** launches; closing the scope stops whatever still runs and removes its cgroups */
  readonly start: (spec: LaunchSpec) => Effect.Effect<RunningProcess, LaunchError, Scope.Scope>
  /** start, then wait for the result */
  readonly run: (spec: LaunchSpec) => Effect.Effect<LaunchResult, LaunchError>
}

export class SandboxLauncher extends Context.Tag("ocx2/SandboxLauncher")<SandboxLauncher, SandboxLauncherService>() {}
