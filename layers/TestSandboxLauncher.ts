/**
 * An in-memory SandboxLauncher for unit tests: nothing is spawned. Each launch ends as the test
 * scripted it (an exit code, a signal, a limit passed, what it printed), its printed bytes kept as
 * the spec's `keep` says, a gated launch running only once released; every LaunchSpec given is
 * recorded, so a test can read what the caller asked the sandbox for. `check` makes the checks the
 * live layer makes (the spec's form, refusal 6 from the scripted capabilities, refusal 7's paths).
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { planMounts } from "../src/sandbox/MountPlan.js"
import { checkSpecForm } from "../src/sandbox/SpecCheck.js"
import {
  type Ending, type HostCapabilities, type KeptTail, type LaunchError, LimitUnavailable, type LaunchResult,
  type LaunchSpec, type RunningProcess, SandboxLauncher, type SandboxLauncherService, StdinClosed
} from "../services/SandboxLauncher.js"

/** How one launch ends, as the test writes it. */
export interface ScriptedLaunch {
  /** exit N, a signal (128+N, as the live layer reports it) or a limit passed; default: exit 0 */
  readonly ending?:
    | { readonly exit: number }
    | { readonly signal: number }
    | { readonly limit: "wall" | "cpu" | "processes" | "file_size" | "memory"; readonly exit?: number }
  readonly stdout?: string | Uint8Array
  readonly stderr?: string | Uint8Array
  /** the launch fails before anything runs, with this error */
  readonly fails?: LaunchError
  /** "stdin closed": ends once its stdin is closed (a session); "stopped": runs until stopped */
  readonly runs?: "at once" | "stdin closed" | "stopped"
}

export interface TestSandboxLauncherOptions {
  /** what the host provides; every capability by default */
  readonly capabilities?: Partial<HostCapabilities>
  /** the launches in order (the last one repeats), or a function of the spec and its index */
  readonly launches?: ReadonlyArray<ScriptedLaunch> | ((spec: LaunchSpec, index: number) => ScriptedLaunch)
}

/** What a test reads back: every spec started, in order, and each launch's stdin as written. */
export interface LaunchRecord {
  readonly spec: LaunchSpec
  /** the spec's lines, then every line written or queued later */
  readonly stdin: Array<string>
  stdinClosed: boolean
  released: boolean
  stopped: boolean
}

export interface TestSandboxLauncher extends SandboxLauncherService {
  readonly launched: ReadonlyArray<LaunchRecord>
}

export const allCapabilities: HostCapabilities = {
  sandbox: true, wall: true, cpu: true, file_size: true, processes: true, memory: true, notes: []
}

const bytesOf = (text: string | Uint8Array | undefined): Uint8Array =>
  text === undefined ? new Uint8Array() : typeof text === "string" ? new TextEncoder().encode(text) : text

const kept = (text: string | Uint8Array | undefined, keep: number): KeptTail => {
  const all = bytesOf(text)
  return { tail: all.slice(Math.max(0, all.length - keep)), totalBytes: all.length }
}

const endingOf = (scripted: ScriptedLaunch["ending"]): Ending => {
  if (scripted === undefined) return { outcome: "exited", exit: 0 }
  if ("limit" in scripted) return { outcome: "budget", limit: scripted.limit, exit: scripted.exit }
  if ("signal" in scripted) return { outcome: "exited", exit: 128 + scripted.signal }
  return { outcome: "exited", exit: scripted.exit }
}

const scriptOf = (options: TestSandboxLauncherOptions, spec: LaunchSpec, index: number): ScriptedLaunch => {
  const launches = options.launches ?? []
  if (typeof launches === "function") return launches(spec, index)
  return launches[Math.min(index, launches.length - 1)] ?? {}
}

/** The live layer's checks, in its order, against the scripted capabilities. */
const checkOf = (capabilities: HostCapabilities, spec: LaunchSpec) => {
  const form = checkSpecForm(spec)
  if (form !== undefined) return form
  const unavailable = (which: string, ok: boolean) =>
    ok ? undefined : new LimitUnavailable({ which, reason: capabilities.notes.find((n) => n.startsWith(which)) ?? "not on this host" })
  const l = spec.limits
  const refused =
    unavailable("sandbox", capabilities.sandbox || spec.sandbox === undefined) ??
    unavailable("cpu", capabilities.cpu || l.cpuSeconds === undefined) ??
    unavailable("file_size", capabilities.file_size || l.fileSizeBytes === undefined) ??
    unavailable("processes", capabilities.processes || l.processes === undefined) ??
    unavailable("memory", capabilities.memory || l.memoryBytes === undefined)
  if (refused !== undefined) return refused
  if (spec.sandbox === undefined) return undefined
  const planned = planMounts(spec.sandbox)
  return "_tag" in planned ? planned : undefined
}

/** One scripted launch under way: what the test reads back, and the moments of its life. */
interface Scripted {
  readonly spec: LaunchSpec
  readonly script: ScriptedLaunch
  readonly record: LaunchRecord
  readonly startedAt: number
  readonly released: Deferred.Deferred<void>
  readonly stdinClosed: Deferred.Deferred<void>
  readonly stopped: Deferred.Deferred<void>
  readonly ended: Deferred.Deferred<LaunchResult>
}

/** What the launch ends with; a gated launch stopped before its release never ran its program: it printed nothing. */
const resultOf = (l: Scripted, ending: Ending, ran: boolean): LaunchResult => ({
  ending,
  stdout: kept(ran ? l.script.stdout : undefined, l.spec.keep.stdout),
  stderr: kept(ran ? l.script.stderr : undefined, l.spec.keep.stderr),
  startedAt: l.startedAt,
  endedAt: Date.now(),
  // nothing is written: a test that needs the log files uses the live layer
  logs: {},
  logProblems: []
})

/**
 * Its end, whichever comes first: the scripted one, or a stop (interruptible: acquire is not, and
 * the race interrupts its loser).
 */
const endWhenDue = (l: Scripted) => {
  const runs = l.script.runs ?? "at once"
  const endsOnItsOwn = runs === "at once"
    ? Deferred.await(l.released)
    : runs === "stdin closed"
    ? Effect.zipRight(Deferred.await(l.released), Deferred.await(l.stdinClosed))
    : Effect.never
  return Effect.forkDaemon(Effect.interruptible(
    Effect.raceFirst(
      Effect.map(endsOnItsOwn, () => resultOf(l, endingOf(l.script.ending), true)),
      Effect.flatMap(Deferred.await(l.stopped), () =>
        Effect.map(Deferred.isDone(l.released), (ran) => resultOf(l, { outcome: "stopped", exit: undefined }, ran)))
    ).pipe(Effect.flatMap((result) => Deferred.succeed(l.ended, result)))
  ))
}

/** The running process as the service gives it; its stdin as a pipe: closed by the caller, or gone with the process. */
const runningOf = (l: Scripted): RunningProcess => {
  const write = (line: string) =>
    Effect.flatMap(Deferred.isDone(l.ended), (gone) => {
      if (line.includes("\n")) return Effect.fail(new StdinClosed({ reason: "a line may not hold a newline" }))
      if (l.record.stdinClosed || gone) {
        return Effect.fail(new StdinClosed({ reason: gone ? "the process ended" : "it was closed" }))
      }
      l.record.stdin.push(line)
      return Effect.void
    })
  return {
    pid: 0,
    writeLine: write,
    queueLine: write,
    pendingInput: Effect.succeed(0),
    closeStdin: Effect.suspend(() => {
      l.record.stdinClosed = true
      return Deferred.succeed(l.stdinClosed, undefined)
    }),
    stop: Effect.suspend(() => {
      l.record.stopped = true
      return Deferred.succeed(l.stopped, undefined)
    }),
    release: Effect.suspend(() => {
      l.record.released = true
      return Deferred.succeed(l.released, undefined)
    }),
    result: Deferred.await(l.ended),
    processIds: Effect.map(Deferred.isDone(l.ended), (done) => (done ? [] : [0]))
  }
}

/** A launch started as scripted: checked, recorded, ended when its script says. */
const startScripted = (options: TestSandboxLauncherOptions, capabilities: HostCapabilities, launched: Array<LaunchRecord>, spec: LaunchSpec) =>
  Effect.gen(function*() {
    const script = scriptOf(options, spec, launched.length)
    const refused = checkOf(capabilities, spec)
    if (refused !== undefined) return yield* Effect.fail(refused)
    const record: LaunchRecord = { spec, stdin: [...spec.stdin.lines], stdinClosed: !spec.stdin.keepOpen, released: false, stopped: false }
    launched.push(record)
    if (script.fails !== undefined) return yield* Effect.fail(script.fails)
    const released = yield* Deferred.make<void>()
    const stdinClosed = yield* Deferred.make<void>()
    const stopped = yield* Deferred.make<void>()
    const ended = yield* Deferred.make<LaunchResult>()
    if (spec.gated !== true) yield* Deferred.succeed(released, undefined)
    if (record.stdinClosed) yield* Deferred.succeed(stdinClosed, undefined)
    const l: Scripted = { spec, script, record, startedAt: Date.now(), released, stdinClosed, stopped, ended }
    yield* endWhenDue(l)
    return runningOf(l)
  })

export const make = (options: TestSandboxLauncherOptions = {}): TestSandboxLauncher => {
  const capabilities: HostCapabilities = { ...allCapabilities, ...options.capabilities }
  const launched: Array<LaunchRecord> = []
  const check: SandboxLauncherService["check"] = (spec) =>
    Effect.suspend(() => {
      const refused = checkOf(capabilities, spec)
      return refused === undefined ? Effect.void : Effect.fail(refused)
    })
  const start: SandboxLauncherService["start"] = (spec) =>
    Effect.acquireRelease(
      startScripted(options, capabilities, launched, spec),
      // as the live layer: the scope's end stops whatever still runs and waits until it is gone
      (running) => Effect.zipRight(running.stop, running.result)
    )
  return {
    launched,
    capabilities: Effect.sync(() => capabilities),
    check,
    start,
    run: (spec) => Effect.scoped(Effect.flatMap(start(spec), (running) => running.result))
  }
}

/** The layer, and the launcher itself for reading what was launched. */
export const layer = (options: TestSandboxLauncherOptions = {}) => {
  const launcher = make(options)
  return { launcher, layer: Layer.succeed(SandboxLauncher, launcher) }
}
