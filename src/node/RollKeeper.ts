// What the supervisor does with its roll of watchers, the same on the server's host and on a
// clone's (docs/architecture.md, "The supervisor"): it hears the care directory (a watcher taking
// its run's lock, a run handed to a watcher, a run written down as waiting for its process user),
// looks at the roll every 200 ms while it holds any, and when a watcher is gone decides its run
// again under round.lock as the node's start does (lost when it started, handed on when it never
// did), then hands on its process user's first waiting run. Its host runs the decisions when it
// is told work is due (`wake`), one piece at a time beside its rounds.

import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { actNow } from "../operations/Operations.js"
import { CareDirectory } from "../../services/CareDirectory.js"
import { Repository } from "../../services/Repository.js"
import type { NodeConfig } from "../root/NodeConfig.js"
import { decideRun, described, wakeWaitingOf } from "./Round.js"
import { processUserOf } from "../pickup/RunCheck.js"
import { readRunRecord } from "../pickup/RunRecord.js"
import { firstLine } from "./SupervisorLog.js"
import { processUserFileName } from "../care/ProcessUserFiles.js"
import { holderOf, runOfCareFile, WatcherRoll } from "./WatcherRoll.js"

/** How often the roll's watchers are looked at while it holds any: the bound on seeing one end. */
const lookEveryMs = 200
/** How often the runs waiting for a process user are looked at while any wait. */
const waitingEveryMs = 2000
/**
 * A run whose watchers end without answering it (a fault every watcher meets again) is handed to a
 * new watcher at most this often in a minute: each watcher costs a Node process and its memory, and
 * other runs of the node wait behind it. The watcher itself answers a launch that fails (refused, or
 * tried again a bounded number of times: src/watcher/LaunchFailures.ts); this bounds what is left.
 */
export const handsPerMinute = 3
const minuteMs = 60_000

/** How long a run handed at `times` (epoch ms, oldest first) waits before it is handed again. */
export const rehandWaitMs = (times: ReadonlyArray<number>, now: number, limit = handsPerMinute): number => {
  const recent = times.filter((t) => now - t < minuteMs)
  return recent.length < limit ? 0 : recent[recent.length - limit]! + minuteMs - now
}

/** The last line the run's watcher logged: why it ended, for the supervisor's log. */
const lastLogLine = (care: string, run: string): string => {
  try {
    const lines = Fs.readFileSync(Path.join(care, `${run}.log`), "utf8").trimEnd().split("\n")
    return lines[lines.length - 1]?.replace(/^\S+ /, "") ?? "its log is empty"
  } catch {
    return "it left no log"
  }
}

/** A watcher gone: its run decided again, then its process user's next run; undefined while its lock is still held. */
const decideEnded = (config: NodeConfig, run: string, handedOnly: boolean, watcherProgram: string) =>
  Effect.gen(function*() {
    const careDir = yield* CareDirectory
    if ((yield* careDir.probe(run)) === "alive") return undefined // its lock is still held: looked at again
    const { serverCode } = yield* (yield* Repository).codes()
    const record = yield* readRunRecord(run).pipe(Effect.option)
    const user = Option.isSome(record) && record.value.message !== undefined ? processUserOf(record.value.message) : undefined
    // handed a run and gone before it took the run's lock: its hand-off is over, so the run is not
    // written down behind its own hand-off when it is decided again
    if (handedOnly && user !== undefined) yield* careDir.clearHanded(user, run)
    const decision = yield* careDir.withRoundLock(described(run, decideRun(config, serverCode, run, { _tag: "Check" }, actNow, { watcherProgram })))
    const woke = user !== undefined ? yield* wakeWaitingOf(config, user, watcherProgram) : undefined
    return { action: decision.action, woke, user }
  })

/** What the host's runtime must provide to decide a watcher's end. */
export type RollNeeds = Effect.Effect.Context<ReturnType<typeof decideEnded>>
export type RollRunner = <A, E>(effect: Effect.Effect<A, E, RollNeeds>) => Promise<A>

export interface RollKeeperHost {
  readonly config: NodeConfig
  readonly care: string
  readonly run: RollRunner
  readonly log: (entry: Record<string, unknown>) => void
  /** the roll changed: the host writes its info file */
  readonly changed: () => void
  /** work is due: the host calls `decideEnded` and `lookAtWaiting` when its rounds let it */
  readonly wake: () => void
  readonly watcherProgram: () => string
}

/** Whether the run's watcher logged that the run's ended counts (written by it, or found). */
const wroteEnded = (care: string, run: string): boolean => {
  try {
    return / (wrote ended |ended already counts|the run has ended; nothing to do)/.test(Fs.readFileSync(Path.join(care, `${run}.log`), "utf8"))
  } catch {
    return false
  }
}

export class RollKeeper {
  readonly roll: WatcherRoll
  /** watchers gone whose runs wait to be decided again */
  readonly ended = new Map<string, number>()
  /** the runs waiting for a process user are due to be looked at */
  waitingDue = false
  /** runs whose holder is gone but whose lock is still held (a write of theirs landing): looked at again */
  private readonly dying = new Map<string, number>()
  private readonly waitingUsers = new Set<string>()
  /** when each run was last handed on after its watcher ended without answering it */
  private readonly handed = new Map<string, Array<number>>()
  /** runs held back from a new watcher until their minute allows one */
  private readonly held = new Map<string, NodeJS.Timeout>()
  /** runs whose decision failed, how many times in a row, and the timer that decides them again */
  private readonly failures = new Map<string, number>()
  private readonly retries = new Map<string, NodeJS.Timeout>()
  private looking: NodeJS.Timeout | undefined
  private waitingTimer: NodeJS.Timeout | undefined
  private stopped = false

  constructor(private readonly host: RollKeeperHost) {
    this.roll = new WatcherRoll(host.care)
  }

  get pending(): boolean {
    return this.ended.size > 0 || this.waitingDue
  }

  /** A name written in the care directory (its inotify event). */
  heard(name: string): void {
    const file = runOfCareFile(name)
    if (file !== undefined) {
      const noted = file.kind === "lock" ? this.roll.note(file.run) : this.roll.noteHandOff(file.run)
      if (noted?._tag === "added") {
        this.host.changed()
        this.lookWhileHeld()
      } else if (noted?._tag === "dead") {
        this.ended.set(file.run, noted.pid)
        this.host.wake()
      }
    } else if (name.startsWith("~") && name.endsWith(".waiting")) {
      try {
        this.waitingUsers.add(decodeURIComponent(name.slice(1, -".waiting".length)))
        this.lookAtWaitingSoon()
      } catch {
        // not a name the node writes
      }
    }
  }

  /** The supervisor starting: every live watcher taken back, every process user with runs waiting looked at. */
  start(): number {
    const taken = this.roll.takeBack()
    let names: Array<string> = []
    try {
      names = Fs.readdirSync(this.host.care)
    } catch {
      // no care directory yet
    }
    for (const name of names) {
      if (name.startsWith("~") && name.endsWith(".waiting")) this.waitingUsers.add(decodeURIComponent(name.slice(1, -".waiting".length)))
    }
    if (this.waitingUsers.size > 0) this.lookAtWaitingSoon()
    this.lookWhileHeld()
    return taken
  }

  stop(): void {
    this.stopped = true
    if (this.looking !== undefined) clearInterval(this.looking)
    if (this.waitingTimer !== undefined) clearTimeout(this.waitingTimer)
    for (const timer of [...this.held.values(), ...this.retries.values()]) clearTimeout(timer)
    this.held.clear()
    this.retries.clear()
  }

  /** Whether the run may be handed to a new watcher now (the supervisor's second look asks before it decides). */
  mayHandOn(run: string): boolean {
    return !this.held.has(run) && rehandWaitMs(this.handed.get(run) ?? [], Date.now()) <= 0
  }

  /** A hand-off made outside the roll (the supervisor's second look): it counts toward the run's minute. */
  handedOn(run: string): void {
    this.handed.set(run, [...(this.handed.get(run) ?? []), Date.now()])
  }

  /** A run handed on too often this minute waits for its turn, the log saying why; false when it may go now. */
  private holdBack(run: string, pid: number): boolean {
    const now = Date.now()
    const times = (this.handed.get(run) ?? []).filter((t) => now - t < minuteMs)
    this.handed.set(run, times)
    const wait = rehandWaitMs(times, now)
    if (wait <= 0) return false
    if (!this.held.has(run)) {
      this.decideLater(this.held, run, pid, wait)
      this.host.log({
        watcher: pid, run, did: [
          `its watcher ended without answering the run (its last word: ${lastLogLine(this.host.care, run)}); handed on ${times.length} times in the last minute, so decided again in ${Math.ceil(wait / 1000)} s`
        ]
      })
    }
    return true
  }

  /** Every watcher seen gone: its run decided again (the host calls it when `pending`). */
  async decideEnded(): Promise<void> {
    const ended = [...this.ended]
    this.ended.clear()
    for (const [run, pid] of ended) {
      await this.decideOne(run, pid).then(
        () => this.failures.delete(run),
        (e) => this.decideAgainLater(run, pid, e)
      )
    }
  }

  /**
   * A decision that failed (the server unreachable from a clone's host, the repository locked) is
   * made again after a pause, 1 s doubling to 30 s: the run's watcher is gone and the cursor is past
   * the run, so nothing else would decide it before the node's next start.
   */
  private decideAgainLater(run: string, pid: number, e: unknown): void {
    const failures = (this.failures.get(run) ?? 0) + 1
    this.failures.set(run, failures)
    const pause = Math.min(30_000, 1000 * 2 ** (failures - 1))
    this.host.log({ watcher: pid, run, did: [`failed: ${firstLine(e)}; decided again in ${pause / 1000} s`] })
    if (!this.retries.has(run)) this.decideLater(this.retries, run, pid, pause)
  }

  /** The run queued to be decided again in `ms`, its timer kept in `timers` until then. */
  private decideLater(timers: Map<string, NodeJS.Timeout>, run: string, pid: number, ms: number): void {
    if (this.stopped) return
    timers.set(run, setTimeout(() => {
      timers.delete(run)
      if (this.stopped) return
      this.ended.set(run, pid)
      this.host.wake()
    }, ms))
  }

  private async decideOne(run: string, pid: number): Promise<void> {
    const handedOnly = holderOf(this.host.care, run) !== pid
    // a watcher that wrote ended (its log says so once the server has it) left nothing to decide: its
    // run is not read again (on a clone's host a pull and the server asked twice, ahead of the next pull)
    if (!handedOnly && wroteEnded(this.host.care, run)) {
      this.dying.delete(run)
      this.handed.delete(run)
      this.host.log({ watcher: pid, run, did: ["ended: its watcher wrote ended; nothing to do"] })
      this.host.changed()
      return
    }
    if (this.held.has(run) || this.holdBack(run, pid)) return
    const outcome = await this.host.run(decideEnded(this.host.config, run, handedOnly, this.host.watcherProgram()))
    // the lock taken meanwhile (recovery found it busy after all): looked at again, like a lock still held
    if (outcome === undefined || outcome.action === "not lost: alive") {
      // a new watcher took the run meanwhile (it is on the roll now), or a write of the old one is landing
      if (this.roll.note(run)?._tag !== "added" && holderOf(this.host.care, run) === pid) this.dying.set(run, pid)
      else this.dying.delete(run)
      this.lookWhileHeld()
      return
    }
    this.dying.delete(run)
    const handedAgain = outcome.action.startsWith("handed")
    if (handedAgain) this.handed.set(run, [...(this.handed.get(run) ?? []), Date.now()])
    else this.handed.delete(run)
    // a watcher handed the run again (by the decision, or by the turn its process user passed on) holds it now, or soon
    const again = this.roll.note(run)?._tag === "added" || this.roll.noteHandOff(run)?._tag === "added" ? this.roll.snapshot()[run] : undefined
    this.lookWhileHeld()
    this.host.log({
      watcher: pid, run, did: [
        handedOnly ? `its watcher was handed the run and ended before it took the run's lock: ${outcome.action}` : outcome.action,
        ...(handedAgain && !handedOnly ? [`its watcher ended without answering it; its last word: ${lastLogLine(this.host.care, run)}`] : []),
        ...(again !== undefined ? [`the run is with the watcher ${again} now`] : []),
        ...(outcome.woke !== undefined ? [`its process user ${String(outcome.user)} was free: handed ${outcome.woke}, the first run waiting for it`] : [])
      ]
    })
    this.host.changed()
  }

  /** Each process user free with runs waiting and no hand-off on its way: its first waiting run handed on. */
  async lookAtWaiting(): Promise<void> {
    this.waitingDue = false
    try {
      for (const user of [...this.waitingUsers]) {
        const woke = await this.host.run(wakeWaitingOf(this.host.config, user, this.host.watcherProgram()))
        if (woke !== undefined) this.host.log({ did: [`${user} was free and nobody was handing its runs on: handed ${woke}, the first run waiting for it`] })
        else if (!Fs.existsSync(Path.join(this.host.care, processUserFileName(user, "waiting")))) this.waitingUsers.delete(user)
      }
    } finally {
      if (this.waitingUsers.size > 0) this.lookAtWaitingSoon()
    }
  }

  // ---- looking at the roll: only while it holds a watcher (idle, nothing wakes)
  private look(): void {
    for (const { run, pid } of this.roll.gone()) this.ended.set(run, pid)
    for (const [run, pid] of this.dying) this.ended.set(run, pid)
    if (this.ended.size > 0) {
      this.host.changed()
      this.host.wake()
    }
    if (this.roll.size === 0 && this.dying.size === 0 && this.looking !== undefined) {
      clearInterval(this.looking)
      this.looking = undefined
    }
  }

  private lookWhileHeld(): void {
    if (!this.stopped && this.looking === undefined && (this.roll.size > 0 || this.dying.size > 0)) {
      this.looking = setInterval(() => this.look(), lookEveryMs)
    }
  }

  private lookAtWaitingSoon(): void {
    if (this.waitingTimer !== undefined || this.stopped) return
    this.waitingTimer = setTimeout(() => {
      this.waitingTimer = undefined
      this.waitingDue = true
      this.host.wake()
    }, waitingEveryMs)
  }
}
