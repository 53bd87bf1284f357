/**
 * CareDirectory on a local filesystem. Locks are flock(2) locks, tried in this process through
 * the addon (src/care/NativeFlock.ts) and otherwise taken by util-linux `flock` on a descriptor
 * we pass it (a wait, or no addon): the lock belongs to our open file description, so it stays
 * ours after `flock` exits and the kernel drops it when we die.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import {
  CareDirectory,
  CareDirError,
  InvalidRunName,
  RoundBusy,
  RunBusy,
  type CareDirectoryService,
  type RunCare
} from "../services/CareDirectory.js"
import { flockHeld } from "../src/care/FlockHeld.js"
import { tryFlock } from "../src/care/NativeFlock.js"
import * as ProcessUserFiles from "../src/care/ProcessUserFiles.js"
import * as SessionFiles from "../src/care/SessionFiles.js"
import { withTurn } from "../src/care/UserTurn.js"

export interface CareDirectoryFsOptions {
  /** OCX's ROOT: the care directory is ROOT/care */
  readonly root: string
  readonly flock?: string
}

const conflict = 75
const runName = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/

const failure = (op: string, path: string) => (e: unknown) =>
  new CareDirError({ op, path, reason: e instanceof Error ? e.message : String(e) })

/**
 * flock on `fd`: 0 held, `conflict` busy. Tried first in this process when `native` (no flock
 * program of the caller's); a busy lock waited for, or no addon, goes to `flock` (fd 3 of the child).
 */
const flockOn = (flock: string, fd: number, args: ReadonlyArray<string>, native: boolean) =>
  Effect.suspend(() => {
    const tried = native ? tryFlock(fd) : undefined
    if (tried === "held") return Effect.succeed(0)
    if (tried === "busy" && args.includes("--nonblock")) return Effect.succeed(conflict)
    if (tried !== undefined && tried !== "busy") return Effect.fail(new CareDirError({ op: "flock", path: `descriptor ${fd}`, reason: tried }))
    return flockChild(flock, fd, args)
  })

/** flock(1) on `fd` (as the child's fd 3); resolves its exit status */
const flockChild = (flock: string, fd: number, args: ReadonlyArray<string>) =>
  Effect.async<number, CareDirError>((resume) => {
    // no pipes: a watcher's run waits for each lock it takes, and a pipe costs a stream's set-up;
    // flock's status says all there is (75 busy, 1 a bad descriptor or a failed lock)
    const child = ChildProcess.spawn(flock, [...args, "--conflict-exit-code", String(conflict), "3"], {
      stdio: ["ignore", "ignore", "ignore", fd]
    })
    child.once("error", (e) => resume(Effect.fail(failure("flock", flock)(e))))
    child.once("exit", (code, signal) => {
      if (code === 0 || code === conflict) resume(Effect.succeed(code))
      else resume(Effect.fail(new CareDirError({ op: "flock", path: flock, reason: `flock ${args.join(" ")} on descriptor ${fd} ended with ${code ?? signal}` })))
    })
    // interrupted while waiting: the waiting flock must not take the lock after we left
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** What every operation on one care directory acts with; made once by `make`. */
interface Care {
  /** OCX's ROOT */
  readonly root: string
  /** ROOT/care */
  readonly dir: string
  /** the flock program a lock goes to when the addon cannot take it */
  readonly flock: string
  /** whether a lock is tried in this process first (no flock program of the caller's) */
  readonly native: boolean
  /**
   * Whether the kernel's table of locks (src/care/FlockHeld.ts) shows the locks taken in this
   * directory, found once with a lock of our own (undefined until then).
   */
  readonly lockTable: { shows: boolean | undefined }
}

const c = Fs.constants

const fileOf = (care: Care, run: string, ext: "lock" | "inbox" | "workspace" | "log") =>
  runName.test(run) && run !== "round" ? Effect.succeed(Path.join(care.dir, `${run}.${ext}`)) : Effect.fail(new InvalidRunName({ run }))

const open = (file: string, flags: number) =>
  Effect.try({ try: () => Fs.openSync(file, flags, 0o600), catch: failure("open", file) })
const closeQuietly = (fd: number) => Effect.sync(() => Fs.closeSync(fd))

const readHolder = (file: string): Option.Option<number> => {
  try {
    const n = Number.parseInt(Fs.readFileSync(file, "utf8").trim(), 10)
    return Number.isSafeInteger(n) && n > 0 ? Option.some(n) : Option.none()
  } catch {
    return Option.none()
  }
}

/** `flock --exclusive --nonblock` on `fd`: 0 held, `conflict` busy; `fd` closed on a failure. */
const lockNow = (care: Care, fd: number) =>
  flockOn(care.flock, fd, ["--exclusive", "--nonblock"], care.native).pipe(Effect.tapError(() => closeQuietly(fd)))

/** The run's lock taken now and its holder's pid written in it: RunBusy when another holds it. */
const takeRunLock = (care: Care, run: string, file: string) =>
  Effect.gen(function*() {
    const fd = yield* open(file, c.O_RDWR | c.O_CREAT)
    const status = yield* lockNow(care, fd)
    if (status === conflict) {
      Fs.closeSync(fd)
      const holder = readHolder(file)
      return yield* Effect.fail(
        Option.isSome(holder) ? new RunBusy({ run, lockPath: file, holder: holder.value }) : new RunBusy({ run, lockPath: file })
      )
    }
    yield* Effect.try({
      try: () => {
        Fs.ftruncateSync(fd, 0)
        Fs.writeSync(fd, `${process.pid}\n`, 0)
      },
      catch: failure("write", file)
    }).pipe(Effect.tapError(() => closeQuietly(fd)))
    return fd
  })

const lockRun = (care: Care): CareDirectoryService["lockRun"] => (run) =>
  Effect.flatMap(fileOf(care, run, "lock"), (file) =>
    Effect.acquireRelease(takeRunLock(care, run, file), closeQuietly).pipe(Effect.map((fd) => ({ run, lockPath: file, fd })))
  )

/**
 * Whether the kernel's table of locks shows the locks taken in this directory, found once with a
 * lock of our own: a look that takes a run's or a process user's lock, however briefly, refuses
 * whoever tries to take it in that instant.
 */
const tableTrusted = (care: Care) =>
  Effect.gen(function*() {
    if (care.lockTable.shows !== undefined) return care.lockTable.shows
    const file = Path.join(care.dir, "flock-table.check")
    const fd = yield* open(file, c.O_RDWR | c.O_CREAT)
    const status = yield* lockNow(care, fd)
    // held by us, or by another process looking the same way: either way the table must show it
    const shown = flockHeld(file) === "held"
    yield* closeQuietly(fd)
    if (shown || status === 0) care.lockTable.shows = shown
    return shown
  })

/** "held", "free" or "absent", without taking the lock where the kernel's table can say */
const lockState = (care: Care, file: string) =>
  Effect.gen(function*() {
    if (yield* tableTrusted(care)) {
      const seen = flockHeld(file)
      if (seen !== undefined) return seen
    }
    const fd = yield* Effect.try({ try: () => Fs.openSync(file, c.O_RDONLY), catch: (e) => e as NodeJS.ErrnoException }).pipe(
      Effect.catchAll((e) => (e.code === "ENOENT" ? Effect.succeed(-1) : Effect.fail(failure("open", file)(e))))
    )
    if (fd === -1) return "absent" as const
    const status = yield* Effect.ensuring(flockOn(care.flock, fd, ["--exclusive", "--nonblock"], care.native), closeQuietly(fd))
    return status === conflict ? "held" as const : "free" as const
  })

const probe = (care: Care): CareDirectoryService["probe"] => (run) =>
  Effect.flatMap(fileOf(care, run, "lock"), (file) =>
    Effect.map(lockState(care, file), (state): RunCare => (state === "held" ? "alive" : state === "free" ? "gone" : "absent")))

const listRuns = (care: Care) =>
  Effect.try({
    try: () =>
      Fs.readdirSync(care.dir)
        .filter((n) => n.endsWith(".lock") && n !== "round.lock")
        .map((n) => n.slice(0, -".lock".length))
        .filter((n) => runName.test(n))
        .sort(),
    catch: failure("readdir", care.dir)
  })

const withRoundLock = (care: Care): CareDirectoryService["withRoundLock"] => (effect, opts) => {
  const roundFile = Path.join(care.dir, "round.lock")
  const wait = Duration.decode(opts?.wait ?? "10 seconds")
  const seconds = (Duration.toMillis(wait) / 1000).toFixed(3)
  return Effect.acquireUseRelease(
    Effect.gen(function*() {
      const fd = yield* open(roundFile, c.O_RDWR | c.O_CREAT)
      const started = Date.now()
      // waiting may be interrupted; the waiting flock is then killed and the file closed
      const status = yield* flockOn(care.flock, fd, ["--exclusive", "--wait", seconds], care.native).pipe(
        Effect.interruptible,
        Effect.onExit((exit) => (exit._tag === "Success" ? Effect.void : closeQuietly(fd)))
      )
      if (status === conflict) {
        Fs.closeSync(fd)
        return yield* Effect.fail(new RoundBusy({ lockPath: roundFile, waitedMillis: Date.now() - started }))
      }
      return fd
    }),
    () => effect,
    closeQuietly
  )
}

const appendInbox = (care: Care): CareDirectoryService["appendInbox"] => (run, line) =>
  Effect.flatMap(fileOf(care, run, "inbox"), (file) =>
    line.includes("\n")
      ? Effect.fail(new CareDirError({ op: "append", path: file, reason: "an inbox line may not hold a newline" }))
      : Effect.try({ try: () => Fs.appendFileSync(file, `${line}\n`, { mode: 0o600 }), catch: failure("append", file) })
  )

/** The whole lines of FILE from `offset` on, and the offset after the last of them. */
const inboxLinesAfter = (file: string, offset: number) => {
  let data: Buffer
  try {
    const fd = Fs.openSync(file, "r")
    try {
      const size = Fs.fstatSync(fd).size
      data = Buffer.alloc(Math.max(0, size - offset))
      if (data.length > 0) Fs.readSync(fd, data, 0, data.length, offset)
    } finally {
      Fs.closeSync(fd)
    }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return { lines: [], nextOffset: offset }
    throw e
  }
  const end = data.lastIndexOf(0x0a)
  if (end < 0) return { lines: [], nextOffset: offset }
  const lines = data.subarray(0, end).toString("utf8").split("\n")
  return { lines, nextOffset: offset + end + 1 }
}

const readInbox = (care: Care): CareDirectoryService["readInbox"] => (run, offset) =>
  Effect.flatMap(fileOf(care, run, "inbox"), (file) => Effect.try({ try: () => inboxLinesAfter(file, offset), catch: failure("read", file) }))

const writeWorkspace = (care: Care): CareDirectoryService["writeWorkspace"] => (run, workspace) =>
  Effect.flatMap(fileOf(care, run, "workspace"), (file) =>
    Effect.try({
      try: () => {
        // written whole or not at all: a reader never sees half a path
        const tmp = `${file}.${process.pid}.tmp`
        Fs.writeFileSync(tmp, `${workspace}\n`, { mode: 0o600 })
        Fs.renameSync(tmp, file)
      },
      catch: failure("write", file)
    })
  )

/** FILE's text, or `missing` when there is no such file. */
const readOr = <A>(file: string, read: (text: string) => A, missing: A): A => {
  try {
    return read(Fs.readFileSync(file, "utf8"))
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return missing
    throw e
  }
}

const readWorkspace = (care: Care): CareDirectoryService["readWorkspace"] => (run) =>
  Effect.flatMap(fileOf(care, run, "workspace"), (file) =>
    Effect.try({ try: () => readOr(file, (text) => Option.some(text.replace(/\n$/, "")), Option.none()), catch: failure("read", file) })
  )

const appendLog = (care: Care): CareDirectoryService["appendLog"] => (run, text) =>
  Effect.flatMap(fileOf(care, run, "log"), (file) =>
    Effect.try({ try: () => Fs.appendFileSync(file, text.endsWith("\n") ? text : `${text}\n`, { mode: 0o600 }), catch: failure("append", file) })
  )

const readLog = (care: Care): CareDirectoryService["readLog"] => (run) =>
  Effect.flatMap(fileOf(care, run, "log"), (file) => Effect.try({ try: () => readOr(file, (text) => text, ""), catch: failure("read", file) }))

const userFile = (care: Care, user: string, ext: "lock" | "waiting") => Path.join(care.dir, ProcessUserFiles.processUserFileName(user, ext))

const lockUser = (care: Care): CareDirectoryService["lockUser"] => (user) => {
  const file = userFile(care, user, "lock")
  return Effect.acquireRelease(
    Effect.gen(function*() {
      const fd = yield* open(file, c.O_RDWR | c.O_CREAT)
      const status = yield* lockNow(care, fd)
      if (status === conflict) {
        Fs.closeSync(fd)
        return undefined
      }
      return fd
    }),
    (fd) => (fd === undefined ? Effect.void : closeQuietly(fd))
  ).pipe(Effect.map((fd) => (fd === undefined ? Option.none() : Option.some({ user, lockPath: file }))))
}

const userBusy = (care: Care): CareDirectoryService["userBusy"] => (user) =>
  Effect.map(lockState(care, userFile(care, user, "lock")), (state) => state === "held")

// the process users' queue and the sessions: their files' names and formats are src/care's,
// which the hook's plain fast path reads too; a failed write is the caller's to see
const queueFailure = (care: Care, op: string, user: string) => failure(op, userFile(care, user, "waiting"))

/** The process users' queue and the hand-off's notes (src/care/ProcessUserFiles.ts). */
const processUsers = (care: Care) => {
  const dir = care.dir
  return {
    withTurn: (user, effect, opts) => withTurn(dir, user, effect, opts?.hold ?? true),
    waiting: (user) => Effect.sync(() => ProcessUserFiles.readWaiting(dir, user)),
    waitingUsers: Effect.sync(() => ProcessUserFiles.waitingRuns(dir)),
    addWaiting: (user, waiting) =>
      Effect.try({ try: () => ProcessUserFiles.appendWaitingOnce(dir, user, waiting), catch: queueFailure(care, "append", user) }),
    removeWaiting: (user, run) => Effect.try({ try: () => ProcessUserFiles.removeWaiting(dir, user, run), catch: queueFailure(care, "remove", user) }),
    takeNextWaiting: (user) => Effect.try({ try: () => ProcessUserFiles.takeNextWaiting(dir, user), catch: queueFailure(care, "take", user) }),
    markHanded: (user, run) => Effect.sync(() => ProcessUserFiles.markHanded(dir, user, run)),
    handedLately: (user) => Effect.sync(() => Option.fromNullable(ProcessUserFiles.handedLately(dir, user))),
    clearHanded: (user, run) => Effect.sync(() => ProcessUserFiles.clearHanded(dir, user, run)),
    handedNotes: Effect.sync(() => ProcessUserFiles.handedNotes(dir)),
    clearAllHanded: Effect.sync(() => ProcessUserFiles.clearAllHanded(dir))
  } satisfies Partial<CareDirectoryService>
}

/** The sessions' files (src/care/SessionFiles.ts). */
const sessions = (care: Care) => {
  const sessionFailure = (op: string, run: string) => failure(op, SessionFiles.sessionFileOf(care.root, run))
  return {
    writeSession: (session) =>
      Effect.try({ try: () => SessionFiles.writeSessionFile(care.root, session), catch: sessionFailure("write", session.run) }),
    removeSession: (run) => Effect.try({ try: () => SessionFiles.removeSessionFile(care.root, run), catch: sessionFailure("remove", run) }),
    sessions: Effect.sync(() => SessionFiles.readSessionFiles(care.root)),
    anySession: Effect.sync(() => SessionFiles.anySession(care.root))
  } satisfies Partial<CareDirectoryService>
}

/** The service over ROOT/care, made first: each operation above, given the directory. */
export const make = (options: CareDirectoryFsOptions): Effect.Effect<CareDirectoryService, CareDirError> =>
  Effect.gen(function*() {
    const care: Care = {
      root: options.root,
      dir: Path.join(options.root, "care"),
      flock: options.flock ?? "/usr/bin/flock",
      native: options.flock === undefined,
      lockTable: { shows: undefined }
    }
    yield* Effect.try({ try: () => Fs.mkdirSync(care.dir, { recursive: true, mode: 0o700 }), catch: failure("mkdir", care.dir) })
    return {
      path: care.dir,
      lockRun: lockRun(care),
      probe: probe(care),
      holder: (run) => Effect.map(fileOf(care, run, "lock"), readHolder),
      lockUser: lockUser(care),
      userBusy: userBusy(care),
      ...processUsers(care),
      ...sessions(care),
      listRuns: listRuns(care),
      withRoundLock: withRoundLock(care),
      appendInbox: appendInbox(care),
      readInbox: readInbox(care),
      writeWorkspace: writeWorkspace(care),
      readWorkspace: readWorkspace(care),
      appendLog: appendLog(care),
      readLog: readLog(care)
    } satisfies CareDirectoryService
  })

export const layer = (options: CareDirectoryFsOptions): Layer.Layer<CareDirectory, CareDirError> =>
  Layer.effect(CareDirectory, make(options))
