/**
 * The Repository service over a real Fossil repository file.
 *
 * Reads: better-sqlite3, read-only, busy_timeout set, short `.all()`/`.get()` reads
 * (no open iterators), deltas decoded in process (src/fossil/Content.ts).
 *
 * Writes:
 * - served (the server's host): the artifact is composed here, put in a bundle and
 *   imported by `fossil bundle import --publish -U USER` (one process, one receipt,
 *   rcvfrom.uid = USER); unversioned files by `fossil uv add -U USER`. Confirmed by
 *   reading the receipt back and checking its sender.
 * - clone: the composed artifact is pushed over Fossil's sync protocol with a
 *   `login` card for USER (src/fossil/Xfer.ts), then asked back of the server with
 *   `gimme`; the clone itself receives it at its next pull.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import type BetterSqlite3 from "better-sqlite3"
import { makeTempDir } from "../src/care/TempDirs.js"
import { busyTimeoutMs, heldReader, openDatabase } from "../src/fossil/Sqlite.js"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { type Artifact, composeForumPost, composeTag, composeTicketChange } from "../src/fossil/Artifact.js"
import { writeBundle } from "../src/fossil/Bundle.js"
import { errorLines, runFossil } from "../src/fossil/Command.js"
import { addEntry, alive, type HeldLock, holdLock, readEntries, removeEntry, spoolDirOf } from "../src/fossil/WriteSpool.js"
import { content } from "../src/fossil/Content.js"
import { isFullHash, isHashPrefix, sha1, sha3 } from "../src/fossil/Hash.js"
import * as Read from "../src/fossil/Read.js"
import {
  clientCode, fileCard, heldHashes, uvfileCard, type XferLogin, XferProtocolError, type XferReply, xferRequest,
  XferUnreachable
} from "../src/fossil/Xfer.js"
import {
  AmbiguousName, InvalidInput, NotFound, PhantomArtifact, Repository, RepositoryUnavailable, type RepositoryService,
  ServerUnreachable, WriteFailed, WriteNotConfirmed, WriteRefused, type Written, type WrittenUnversioned
} from "../services/Repository.js"

export interface FossilRepositoryConfig {
  /** the repository file */
  readonly path: string
  /**
   * Absent: `path` is the served repository on this host. Present: `path` is a
   * clone of the server at `url`, and writes are pushed with the named user's password.
   */
  readonly server?: {
    readonly url: string
    readonly passwords: Readonly<Record<string, string>>
  }
  /**
   * Descriptors every writing fossil child inherits: the watcher passes its run's lock, so a
   * write still in flight when the watcher dies keeps the lock until the write has landed.
   */
  readonly holdFds?: ReadonlyArray<number>
  /** how long a read waits for a writer's commit to end (default 15000 ms, Fossil's own) */
  readonly busyTimeoutMs?: number
}

const message = (e: unknown) => (e instanceof Error ? e.message : String(e))

/** Logins as Fossil stores them: no spaces or control characters (they would break a card). */
const validLogin = (user: string) => /^[^\s\x00-\x1f\\]{1,64}$/.test(user)
const validUvName = (name: string) =>
  /^[A-Za-z0-9._\-][A-Za-z0-9._\-/]{0,250}$/.test(name) && !name.split("/").some((p) => p === ".." || p === "")
const validField = (name: string) => /^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(name)

/** What every operation on one repository file acts with; made once by `make`. */
interface Opened {
  readonly config: FossilRepositoryConfig
  /** the repository file, resolved */
  readonly path: string
  readonly role: "served" | "clone"
  readonly readOptions: Read.ReadOptions
  /** a new read-only connection, checked to be a repository's */
  readonly open: () => BetterSqlite3.Database
  /** a synchronous read on the held connection, its throws made RepositoryUnavailable */
  readonly read: <A>(f: (db: BetterSqlite3.Database) => A) => Effect.Effect<A, RepositoryUnavailable>
  /** the lock file the node's writes take one at a time, beside the repository */
  readonly writeLock: string
  /** the configuration of the node's writes (FOSSIL_HOME), beside the repository */
  readonly writesHome: string
  /** the spool of writers' artifacts (src/fossil/WriteSpool.ts) */
  readonly spool: string
  /** the server a clone pushes to ("" on the served host) */
  readonly url: string
}

/** A read-only connection to the repository file, checked to be a repository's. */
const openReadOnly = (path: string, config: FossilRepositoryConfig): BetterSqlite3.Database => {
  const d = openDatabase(path, { readonly: true, fileMustExist: true })
  try {
    d.pragma(`busy_timeout = ${config.busyTimeoutMs ?? busyTimeoutMs}`)
    // a repository has these; anything else is not one
    d.prepare("SELECT 1 FROM blob, rcvfrom, config LIMIT 1").all()
  } catch (e) {
    d.close()
    throw e
  }
  return d
}

/** The repository opened: its held read connection, closed with the scope. */
const opened = (config: FossilRepositoryConfig) =>
  Effect.gen(function*() {
    const path = Path.resolve(config.path)
    const role: "served" | "clone" = config.server === undefined ? "served" : "clone"
    const open = () => openReadOnly(path, config)
    const held = heldReader(path, open)
    yield* Effect.addFinalizer(() => Effect.sync(held.close))
    const r: Opened = {
      config,
      path,
      role,
      readOptions: { senders: role === "served" },
      open,
      read: (f) => Effect.try({ try: () => held.read(f), catch: (e) => new RepositoryUnavailable({ path, reason: message(e) }) }),
      writeLock: Path.join(Path.dirname(path), `.${Path.basename(path)}.ocx2-write.lock`),
      writesHome: Path.join(Path.dirname(path), `.${Path.basename(path)}.ocx2-home`),
      spool: spoolDirOf(path),
      url: config.server?.url ?? ""
    }
    return r
  })

// ---------- names ----------

const resolve = (r: Opened, what: string, name: string) =>
  Effect.gen(function*() {
    if (!isHashPrefix(name)) return yield* new InvalidInput({ field: what, reason: `"${name}" is not a hash or a hash prefix (4 to 64 lower-case hex digits)` })
    const found = yield* r.read((d) => Read.resolveHash(d, name))
    if (found === "none") return yield* new NotFound({ what, name })
    if (found === "ambiguous") return yield* new AmbiguousName({ what, name })
    if (found.size < 0) return yield* new PhantomArtifact({ hash: found.hash })
    return found
  })

const resolvePost = (r: Opened, name: string) =>
  Effect.gen(function*() {
    const found = yield* resolve(r, "forum post", name)
    if (!(yield* r.read((d) => Read.isForumPost(d, found.rid)))) return yield* new NotFound({ what: "forum post", name })
    return found
  })

const resolveTicket = (r: Opened, name: string) =>
  Effect.gen(function*() {
    if (!isHashPrefix(name)) return yield* new InvalidInput({ field: "ticket", reason: `"${name}" is not a ticket id or prefix (4 to 40 hex digits)` })
    const ids = yield* r.read((d) => Read.ticketIds(d, name))
    if (ids.length === 0) return yield* new NotFound({ what: "ticket", name })
    if (ids.length > 1 && !ids.includes(name)) return yield* new AmbiguousName({ what: "ticket", name })
    return ids.includes(name) ? name : ids[0]!
  })

const checkUser = (user: string) =>
  validLogin(user)
    ? Effect.void
    : Effect.fail(new InvalidInput({ field: "user", reason: `"${user}" is not a Fossil login` }))

// ---------- reads ----------

const readAfter = (r: Opened): RepositoryService["readAfter"] => (cursor, limit = 1000) =>
  Number.isInteger(limit) && limit > 0
    ? r.read((d) => Read.readAfter(d, cursor, limit, r.readOptions))
    : Effect.fail(new InvalidInput({ field: "limit", reason: `${limit} is not a whole number above 0` }))

const thread = (r: Opened): RepositoryService["thread"] => (post) =>
  Effect.gen(function*() {
    const found = yield* resolvePost(r, post)
    const posts = yield* r.read((d) => Read.thread(d, found.rid, r.readOptions))
    if (posts === undefined) return yield* new NotFound({ what: "forum post", name: post })
    return posts
  })

const ticket = (r: Opened): RepositoryService["ticket"] => (id) =>
  Effect.gen(function*() {
    const full = yield* resolveTicket(r, id)
    return yield* r.read((d) => Read.ticket(d, full, r.readOptions))
  })

const tags = (r: Opened): RepositoryService["tags"] => (checkin) =>
  Effect.gen(function*() {
    const found = yield* resolve(r, "check-in", checkin)
    if (!(yield* r.read((d) => Read.isCheckin(d, found.rid)))) return yield* new NotFound({ what: "check-in", name: checkin })
    return yield* r.read((d) => Read.checkinTags(d, found.rid, found.hash, r.readOptions))
  })

const artifact = (r: Opened): RepositoryService["artifact"] => (hash) =>
  Effect.gen(function*() {
    const found = yield* resolve(r, "artifact", hash)
    const bytes = yield* r.read((d) => content(d, found.rid))
    if (bytes === undefined) return yield* new PhantomArtifact({ hash: found.hash })
    return bytes
  })

const readUnversioned = (r: Opened): RepositoryService["readUnversioned"] => (name) =>
  Effect.gen(function*() {
    const f = yield* r.read((d) => Read.unversionedFile(d, name, r.readOptions))
    if (f === undefined) return yield* new NotFound({ what: "unversioned file", name })
    return f
  })

// ---------- writes on the server's host ----------

const withTempDir = <A, E>(f: (dir: string) => Effect.Effect<A, E>): Effect.Effect<A, E | WriteFailed> =>
  Effect.acquireUseRelease(
    Effect.try({
      try: () => makeTempDir("ocx2-write-"),
      catch: (e) => new WriteFailed({ operation: "make a temporary directory", reason: message(e) })
    }),
    f,
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )

// The served file is shared with the server: a write that meets another's transaction gets
// "database is locked" at once (SQLite refuses to wait where waiting could deadlock). Nothing
// was written, so it is tried again after a pause, for up to about ten seconds.
//
// People's posts must never get that refusal because of the node (issue 13; docs/architecture.md,
// "Writing beside the server"). Fossil's forum page reads in a deferred transaction and only then
// asks for the write lock, which SQLite refuses at once, without waiting, while another process
// holds it. So on a repository in rollback-journal mode the node's fossil runs with SQLite's
// unix-excl VFS: it takes the file's exclusive lock at its first read and keeps it until it exits,
// and a person's request arriving meanwhile waits for it (Fossil's 15 s busy timeout) instead of
// starting a transaction the node would refuse. And the node's writes run one at a time (a lock
// file beside the repository), so a person waiting is let in between two of them.
//
// An exclusive fossil holds every database it opens that way, the host's global configuration
// (~/.config/fossil.db, read by the server's every request) too, taken after the repository:
// two exclusive processes taking the two in opposite orders wait on each other until a busy
// timeout ends one. So the node's writes keep a configuration of their own (FOSSIL_HOME, a
// directory beside the repository, used by one write at a time under the write lock): an
// exclusive lock covers the repository and nothing another process reads.
const exclusive = (r: Opened): ReadonlyArray<string> => {
  try {
    return String(r.open().pragma("journal_mode", { simple: true })).toLowerCase() === "wal" ? [] : ["--vfs", "unix-excl"]
  } catch {
    return []
  }
}
const home = (r: Opened) => {
  Fs.mkdirSync(r.writesHome, { recursive: true, mode: 0o700 })
  return r.writesHome
}

const lockedRetry = Schedule.exponential("20 millis", 1.5).pipe(
  Schedule.union(Schedule.spaced("500 millis")),
  Schedule.jittered,
  Schedule.upTo("10 seconds")
)
const isLocked = (e: unknown) => e instanceof WriteFailed && /database is locked|SQLITE_BUSY/i.test(e.reason)

/** a write by `fossil` under the write lock: taken for it (`flock`), or held already (its descriptor, which the child keeps) */
const fossil = (r: Opened, operation: string, user: string, args: ReadonlyArray<string>) =>
  fossilOnce(r, operation, user, args, { lockFile: r.writeLock }).pipe(Effect.retry({ schedule: lockedRetry, while: isLocked }))

const fossilOnce = (
  r: Opened,
  operation: string,
  user: string,
  args: ReadonlyArray<string>,
  lock: { readonly lockFile: string } | { readonly heldFd: number }
) =>
  Effect.gen(function*() {
    const ran = yield* Effect.tryPromise({
      try: () => runFossil([...exclusive(r), ...args], {
        user,
        env: { FOSSIL_HOME: home(r) },
        ...("lockFile" in lock ? { oneAtATime: { lockFile: lock.lockFile } } : {}),
        holdFds: [...(r.config.holdFds ?? []), ...("heldFd" in lock ? [lock.heldFd] : [])]
      }),
      catch: (e) => new WriteFailed({ operation, reason: `cannot run fossil: ${message(e)}` })
    })
    const out = `${ran.stdout}\n${ran.stderr}`.trim()
    if (/no such user/i.test(out)) return yield* new WriteRefused({ user, reason: `no such user in ${r.path}` })
    if (ran.code !== 0 || errorLines(out).length > 0) {
      return yield* new WriteFailed({ operation, reason: out.split("\n").slice(-3).join(" ").slice(0, 500) || `exit ${String(ran.code)}` })
    }
    return ran
  })

// ---------- the spool: many writers' artifacts in one write (src/fossil/WriteSpool.ts) ----------

const received = (r: Opened, hash: string) => r.read((d) => Read.receipt(d, hash) !== undefined)

const withWriteLock = <A, E>(r: Opened, f: (lock: HeldLock) => Effect.Effect<A, E>) =>
  Effect.acquireUseRelease(
    Effect.tryPromise({ try: () => holdLock(r.writeLock), catch: (e) => new WriteFailed({ operation: "take the write lock", reason: message(e) }) }),
    f,
    (lock) => Effect.sync(() => lock.release())
  )

const importBundle = (r: Opened, user: string, artifacts: ReadonlyArray<Artifact>, lock: HeldLock, projectCode: string) =>
  withTempDir((dir) =>
    Effect.gen(function*() {
      const bundle = Path.join(dir, "write.bundle")
      yield* Effect.try({
        try: () => writeBundle(bundle, projectCode, artifacts),
        catch: (e) => new WriteFailed({ operation: "write a bundle", reason: message(e) })
      })
      yield* fossilOnce(r, "fossil bundle import", user, ["bundle", "import", bundle, "--publish", "-U", user, "-R", r.path], { heldFd: lock.fd })
    })
  )

/** at most this much in one write, so one write never holds the file for long */
const batchLimit = { artifacts: 256, bytes: 8 * 1024 * 1024 }

/**
 * One turn under the write lock: unless another's turn wrote them already, `mine`'s artifacts
 * and those every live writer of the same user left waiting, in one import. One the server
 * will not take must not hold the others up: on a failure that is not the lock, mine alone.
 */
const writeTurn = (r: Opened, user: string, mine: string, artifacts: ReadonlyArray<Artifact>, projectCode: string) =>
  withWriteLock(r, (lock) =>
    Effect.gen(function*() {
      const waiting: Array<Artifact> = []
      for (const a of artifacts) if (!(yield* received(r, a.hash))) waiting.push(a)
      if (waiting.length === 0) return
      const entries = readEntries(r.spool)
      if (!entries.some((e) => e.file === mine)) {
        return yield* new WriteFailed({ operation: "fossil bundle import", reason: "its write was withdrawn (its run's recovery took it back)" })
      }
      const batch: Array<Artifact> = [...waiting]
      const taken: Array<string> = []
      let bytes = waiting.reduce((n, a) => n + a.bytes.length, 0)
      for (const e of entries) {
        if (e.file === mine || e.user !== user) continue
        if (!alive(e.pid)) {
          removeEntry(e.file) // never written: its writer is gone
          continue
        }
        const more: Array<Artifact> = []
        for (const a of e.artifacts) if (!batch.some((b) => b.hash === a.hash) && !(yield* received(r, a.hash))) more.push(a)
        const size = more.reduce((n, a) => n + a.bytes.length, 0)
        if (batch.length + more.length > batchLimit.artifacts || bytes + size > batchLimit.bytes) break
        batch.push(...more)
        bytes += size
        taken.push(e.file)
      }
      const together = yield* importBundle(r, user, batch, lock, projectCode).pipe(Effect.either)
      if (together._tag === "Left") {
        if (taken.length === 0 || isLocked(together.left)) return yield* Effect.fail(together.left)
        yield* importBundle(r, user, waiting, lock, projectCode)
        return
      }
      for (const file of taken) removeEntry(file)
    })
  )

const spooledWrite = (r: Opened, user: string, artifacts: ReadonlyArray<Artifact>, projectCode: string) =>
  Effect.acquireUseRelease(
    Effect.try({
      try: () => addEntry(r.spool, user, artifacts),
      catch: (e) => new WriteFailed({ operation: "leave the write in the spool", reason: message(e) })
    }),
    (mine) => writeTurn(r, user, mine, artifacts, projectCode).pipe(Effect.retry({ schedule: lockedRetry, while: isLocked })),
    (mine) => Effect.sync(() => removeEntry(mine))
  )

const withdraw = (r: Opened): RepositoryService["withdraw"] => (hashes) =>
  r.role !== "served" || hashes.length === 0 || readEntries(r.spool).length === 0
    ? Effect.void
    : withWriteLock(r, () =>
      Effect.sync(() => {
        for (const e of readEntries(r.spool)) if (e.artifacts.some((a) => hashes.includes(a.hash))) removeEntry(e.file)
      })
    )

const confirmServed = (r: Opened, user: string, hash: string) =>
  Effect.gen(function*() {
    const receipt = yield* r.read((d) => Read.receipt(d, hash))
    if (receipt === undefined) return yield* new WriteNotConfirmed({ hash, reason: `${r.path} has no receipt for it` })
    if (receipt.sender !== user) {
      return yield* new WriteNotConfirmed({ hash, reason: `${r.path} received it from ${receipt.sender}, not ${user}` })
    }
    return { hash: receipt.hash, rid: receipt.rid, rcvid: receipt.rcvid, sender: receipt.sender }
  })

const putServed = (r: Opened, user: string, artifacts: ReadonlyArray<Artifact>) =>
  Effect.gen(function*() {
    const held = new Set<string>()
    for (const a of artifacts) if ((yield* r.read((d) => Read.receipt(d, a.hash))) !== undefined) held.add(a.hash)
    const toSend = artifacts.filter((a) => !held.has(a.hash))
    if (toSend.length > 0) {
      if ((yield* r.read((d) => Read.user(d, user))) === undefined) {
        return yield* new WriteRefused({ user, reason: `no such user in ${r.path}` })
      }
      const { projectCode } = yield* r.read(Read.codes)
      yield* spooledWrite(r, user, toSend, projectCode)
    }
    const written: Array<Written> = []
    for (const a of artifacts) {
      const receipt = yield* confirmServed(r, user, a.hash)
      written.push({ hash: a.hash, receipt, sent: !held.has(a.hash) })
    }
    return written
  })

// ---------- writes from a clone ----------

const loginFor = (r: Opened, user: string) =>
  Effect.gen(function*() {
    const password = r.config.server?.passwords[user]
    if (password === undefined) {
      return yield* new WriteRefused({ user, reason: "no password for this user on this host" })
    }
    const { projectCode } = yield* r.read(Read.codes)
    return { user, password, projectCode } satisfies XferLogin
  })

const exchange = (r: Opened, operation: string, login: XferLogin, payload: Buffer) =>
  Effect.gen(function*() {
    const url = r.url
    const reply: XferReply = yield* Effect.tryPromise({
      try: () => xferRequest(url, login, payload),
      catch: (e) =>
        e instanceof XferUnreachable
          ? new ServerUnreachable({ url, reason: e.message })
          : new WriteFailed({ operation, reason: e instanceof XferProtocolError ? e.message : message(e) })
    })
    const error = reply.errors[0]
    if (error === undefined) return reply
    if (/login failed|not authorized/i.test(error)) {
      return yield* new WriteRefused({ user: login.user, reason: `${url} says: ${error}` })
    }
    return yield* new WriteFailed({ operation, reason: `${url} says: ${error}` })
  })

const pullCard = (login: XferLogin) => `pull ${clientCode} ${login.projectCode}\n`
const pushCard = (login: XferLogin) => `push ${clientCode} ${login.projectCode}\n`

/** which of `hashes` the server holds, asked in one exchange */
const serverHolds = (r: Opened, login: XferLogin, hashes: ReadonlyArray<string>) =>
  exchange(r, "ask the server for the artifact", login, Buffer.from(`${pullCard(login)}${hashes.map((h) => `gimme ${h}\n`).join("")}`)).pipe(
    Effect.map((reply) => heldHashes(reply.cards))
  )

const putClone = (r: Opened, user: string, artifacts: ReadonlyArray<Artifact>) =>
  Effect.gen(function*() {
    const login = yield* loginFor(r, user)
    const held = yield* serverHolds(r, login, artifacts.map((a) => a.hash))
    const toSend = artifacts.filter((a) => !held.has(a.hash))
    if (toSend.length > 0) {
      yield* exchange(r, "push", login, Buffer.concat([Buffer.from(pushCard(login)), ...toSend.map((a) => fileCard(a.hash, a.bytes))]))
      const after = yield* serverHolds(r, login, toSend.map((a) => a.hash))
      const missing = toSend.find((a) => !after.has(a.hash))
      if (missing !== undefined) {
        return yield* new WriteNotConfirmed({ hash: missing.hash, reason: `${r.url} does not return it after the push` })
      }
    }
    return artifacts.map((a) => ({ hash: a.hash, receipt: undefined, sent: !held.has(a.hash) }) satisfies Written)
  })

// ---------- writes ----------

const putAll = (r: Opened) => (user: string, artifacts: ReadonlyArray<Artifact>) =>
  Effect.gen(function*() {
    yield* checkUser(user)
    for (const artifact of artifacts) {
      if (sha3(artifact.bytes) !== artifact.hash) {
        return yield* new InvalidInput({ field: "artifact", reason: `its hash ${artifact.hash} is not the SHA3-256 of its bytes` })
      }
    }
    if (artifacts.length === 0) return []
    return yield* (r.role === "served" ? putServed(r, user, artifacts) : putClone(r, user, artifacts))
  })

const put = (r: Opened) => (user: string, artifact: Artifact) => Effect.map(putAll(r)(user, [artifact]), (written) => written[0]!)

type UnversionedInput = Parameters<RepositoryService["putUnversioned"]>[0]

/** An unversioned file added by `fossil uv add` on the served file, and its receipt read back. */
const putUnversionedServed = (r: Opened, input: UnversionedInput, bytes: Buffer, hash: string) =>
  Effect.gen(function*() {
    const before = yield* r.read((d) => Read.unversionedReceipt(d, input.name))
    if (before === undefined || before.hash !== hash || before.sender !== input.user) {
      if ((yield* r.read((d) => Read.user(d, input.user))) === undefined) {
        return yield* new WriteRefused({ user: input.user, reason: `no such user in ${r.path}` })
      }
      yield* withTempDir((dir) =>
        Effect.gen(function*() {
          const file = Path.join(dir, "content")
          yield* Effect.try({
            try: () => Fs.writeFileSync(file, bytes),
            catch: (e) => new WriteFailed({ operation: "write a temporary file", reason: message(e) })
          })
          yield* fossil(r, "fossil uv add", input.user, ["uv", "add", file, "--as", input.name, "-U", input.user, "-R", r.path])
        })
      )
    }
    const after = yield* r.read((d) => Read.unversionedReceipt(d, input.name))
    if (after === undefined || (after.hash !== hash && after.hash !== sha1(bytes))) {
      return yield* new WriteNotConfirmed({ hash, reason: `${r.path} does not hold ${input.name} with this content` })
    }
    if (after.sender !== input.user) {
      return yield* new WriteNotConfirmed({ hash, reason: `${r.path} received ${input.name} from ${String(after.sender)}, not ${input.user}` })
    }
    return { name: input.name, hash: after.hash, rcvid: after.rcvid, sender: after.sender } satisfies WrittenUnversioned
  })

/** Why the server kept another version of an unversioned file than the one a clone pushed. */
const keptOther = (r: Opened, input: UnversionedInput, held: XferReply["cards"][number] | undefined, mtime: number) => {
  if (held === undefined) return `${r.url} does not hold ${input.name} after the push (does ${input.user} hold capability y?)`
  const heldTime = Number(held.args[1])
  return `${r.url} keeps another version of ${input.name} (hash ${String(held.args[2])}, time ${String(held.args[1])}) over the one sent (time ${mtime}): ` +
    (heldTime > mtime
      ? "Fossil keeps the version with the later time, and the server's is later (was it written meanwhile, or is a clock ahead?)"
      : heldTime === mtime
      ? "at the same time Fossil keeps the version with the larger hash"
      : `it took an earlier version: does ${input.user} hold capability y?`)
}

/** An unversioned file pushed from a clone, and asked back of the server. */
const putUnversionedClone = (r: Opened, input: UnversionedInput, bytes: Buffer, hash: string) =>
  Effect.gen(function*() {
    const login = yield* loginFor(r, input.user)
    // Fossil keeps, of two versions of an unversioned file, the one with the later time (whole
    // seconds), and of two at the same time the one with the larger hash: a version sent at
    // the time the server's already has would be dropped one time in two. So the time sent is
    // the later of now and the server's version's time + 1 s, read from its catalog first (a
    // uv-hash pragma that differs from the server's makes it send one uvigot card per file).
    const catalog = yield* exchange(r, "ask the server for its unversioned files", login,
      Buffer.from(`${pullCard(login)}pragma uv-hash ${sha1("ocx2")}\n`))
    const theirs = catalog.cards.find((c) => c.name === "uvigot" && c.args[0] === input.name)
    const theirTime = theirs === undefined ? undefined : Number(theirs.args[1])
    const now = Math.floor(Date.now() / 1000)
    const mtime = theirTime !== undefined && Number.isSafeInteger(theirTime) && theirs!.args[2] !== hash ? Math.max(now, theirTime + 1) : now
    // the pragma also makes the server create its unversioned table and say whether it takes uv files
    const pushed = yield* exchange(r, "push an unversioned file", login,
      Buffer.concat([Buffer.from(`${pushCard(login)}pragma uv-hash ${sha1("ocx2")}\n`), uvfileCard(input.name, mtime, hash, bytes)]))
    if (pushed.cards.some((c) => c.name === "pragma" && c.args[0] === "uv-pull-only")) {
      return yield* new WriteRefused({ user: input.user, reason: `${r.url} takes no unversioned files from ${input.user} (capability y)` })
    }
    const reply = yield* exchange(r, "ask the server for the unversioned file", login,
      Buffer.from(`${pullCard(login)}uvgimme ${input.name}\n`))
    const held = reply.cards.find((c) => c.name === "uvfile" && c.args[0] === input.name)
    if (held === undefined || held.args[2] !== hash) {
      return yield* new WriteNotConfirmed({ hash, reason: keptOther(r, input, held, mtime) })
    }
    return { name: input.name, hash, rcvid: undefined, sender: undefined } satisfies WrittenUnversioned
  })

const putUnversioned = (r: Opened): RepositoryService["putUnversioned"] => (input) =>
  Effect.gen(function*() {
    yield* checkUser(input.user)
    if (!validUvName(input.name)) {
      return yield* new InvalidInput({ field: "name", reason: `"${input.name}" is not a valid unversioned file name` })
    }
    const bytes = typeof input.content === "string" ? Buffer.from(input.content, "utf8") : Buffer.from(input.content)
    const hash = sha3(bytes)
    return yield* (r.role === "served" ? putUnversionedServed(r, input, bytes, hash) : putUnversionedClone(r, input, bytes, hash))
  })

const post = (r: Opened): RepositoryService["post"] => (input) =>
  Effect.gen(function*() {
    if (input.title.trim() === "") return yield* new InvalidInput({ field: "title", reason: "a new thread needs a title" })
    const composed = composeForumPost({
      user: input.user, date: new Date(), title: input.title, text: input.text,
      ...(input.mimetype === undefined ? {} : { mimetype: input.mimetype })
    })
    return yield* put(r)(input.user, composed)
  })

const reply = (r: Opened): RepositoryService["reply"] => (input) =>
  Effect.gen(function*() {
    const to = yield* resolvePost(r, input.to)
    const posts = yield* r.read((d) => Read.thread(d, to.rid, { senders: false }))
    const root = posts?.find((p) => p.hash === to.hash)?.root ?? posts?.[0]?.root
    if (root === undefined) return yield* new NotFound({ what: "forum post", name: input.to })
    const composed = composeForumPost({
      user: input.user, date: new Date(), root, replyTo: to.hash, text: input.text,
      ...(input.mimetype === undefined ? {} : { mimetype: input.mimetype })
    })
    const written = yield* put(r)(input.user, composed)
    return { ...written, root }
  })

const ticketChange = (r: Opened): RepositoryService["ticketChange"] => (input) =>
  Effect.gen(function*() {
    const names = [...Object.keys(input.fields), ...Object.keys(input.append ?? {})]
    const bad = names.find((n) => !validField(n))
    if (bad !== undefined) return yield* new InvalidInput({ field: "fields", reason: `"${bad}" is not a ticket field name` })
    if (names.length === 0) return yield* new InvalidInput({ field: "fields", reason: "a ticket change sets at least one field" })
    const id = input.ticket === undefined ? Crypto.randomBytes(20).toString("hex") : yield* resolveTicket(r, input.ticket)
    const composed = composeTicketChange({
      user: input.user, date: new Date(), ticket: id, fields: input.fields,
      ...(input.append === undefined ? {} : { append: input.append })
    })
    const written = yield* put(r)(input.user, composed)
    return { ...written, ticket: id }
  })

const tag = (r: Opened): RepositoryService["tag"] => (input) =>
  Effect.gen(function*() {
    if (!/^[^\s\x00-\x1f]{1,100}$/.test(input.name)) return yield* new InvalidInput({ field: "name", reason: `"${input.name}" is not a tag name` })
    if (/[\r\n]/.test(input.value)) return yield* new InvalidInput({ field: "value", reason: "a tag value is one line" })
    const found = yield* resolve(r, "check-in", input.checkin)
    if (!(yield* r.read((d) => Read.isCheckin(d, found.rid)))) return yield* new NotFound({ what: "check-in", name: input.checkin })
    const composed = composeTag({ user: input.user, date: new Date(), target: found.hash, name: input.name, value: input.value })
    return yield* put(r)(input.user, composed)
  })

/** The service over one repository file: each operation above, given the file opened. */
export const make = (config: FossilRepositoryConfig) =>
  Effect.gen(function*() {
    const r = yield* opened(config)
    const service: RepositoryService = {
      path: r.path,
      role: r.role,
      readAfter: readAfter(r),
      thread: thread(r),
      ticket: ticket(r),
      tags: tags(r),
      user: (login) => r.read((d) => Read.user(d, login)),
      codes: () => r.read(Read.codes),
      artifact: artifact(r),
      unversioned: () => r.read((d) => Read.unversionedList(d, r.readOptions)),
      readUnversioned: readUnversioned(r),
      post: post(r),
      reply: reply(r),
      ticketChange: ticketChange(r),
      tag: tag(r),
      putUnversioned: putUnversioned(r),
      put: put(r),
      putAll: putAll(r),
      withdraw: withdraw(r)
    }
    return service
  })

/** The Repository over one repository file; the read connection closes with the layer. */
export const layer = (config: FossilRepositoryConfig) => Layer.scoped(Repository, make(config))

export { isFullHash }
