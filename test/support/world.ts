/**
 * The one test world: a served repository with its users and a check-in on trunk, a real
 * `fossil server` on a port of its own (fast hooks or Fossil's own backoffice; an extension root
 * or none), a node's ROOT beside it (a release root made from this checkout's dist, the node's
 * hook installed, as a test asks), and what the tests ask of it (tools called as a user, runs
 * posted, threads and records read, a watcher started). Every file is under one temporary
 * directory, removed with the server and what ran under ROOT when the world closes.
 *
 * The served repository and the node are the demo's (src/demo/LocalNode.ts); test/node/hookWorld.ts,
 * test/support/nodeWorld.ts and test/node/cloneWorld.ts are named uses of this world.
 * `makeWorld` is for a test's beforeAll/afterAll; `world` is the same as a scoped Effect.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as FossilReceipts from "../../layers/FossilReceipts.js"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { removeTree } from "../../src/demo/RemoveTree.js"
import { Repository } from "../../services/Repository.js"
import { capabilitiesOf } from "../../src/adapters/cli/RepositoryCapabilities.js"
import { makeLocalNode, type LocalNode, type LocalNodeOptions, users } from "../../src/demo/LocalNode.js"
import { readRunRecord } from "../../src/pickup/RunRecord.js"
import { namingNode } from "../../src/release/StagedNode.js"
import { stopSpare } from "../../src/pickup/SpareClient.js"
import { readMessage, writeMessage } from "../../src/protocol/Envelope.js"
import { hook } from "../../src/tools/hook.js"
import { runTool } from "../../src/tools/RunTool.js"
import type { Answer, Tool } from "../../src/tools/Tool.js"
import { explain, openWorlds, waitRanOut } from "./explain.js"

export { users } from "../../src/demo/LocalNode.js"
export { explain, processesIn, tailOf } from "./explain.js"

/**
 * The least time a test gives the product to answer a run (`ended`), and to do anything else a
 * test waits for it to do on its own (a watcher started, a spare answering, a supervisor up): a
 * run is answered within a few seconds on a quiet machine, and well within this beside three other
 * files on a loaded 2-core one. A limit catches a lost run, never measures speed; a test whose case
 * waits this long has a vitest limit above it (the waits it makes one after another, plus its setup).
 */
export const answerWithin = 90_000

/** the checkout: found upwards, so a bundled bench (bench/*.out.mjs) finds it too */
export const project = (() => {
  for (let dir = import.meta.dirname; ; dir = Path.dirname(dir)) {
    if (Fs.existsSync(Path.join(dir, "package.json")) && Fs.existsSync(Path.join(dir, "node_modules"))) return dir
    if (Path.dirname(dir) === dir) throw new Error(`no checkout above ${import.meta.dirname}`)
  }
})()
export const dist = Path.join(project, "dist")
const nodeModules = Path.join(project, "node_modules")

/** This checkout's built program NAME (npm run build). */
const distProgram = (name: string) => Path.join(dist, `${name}.mjs`)

/**
 * ROOT/staged/NAME holding the dist bundles as programs, served as current, with ROOT/ocx2-hook:
 * a release root as accept leaves it (staging runs the 60 s gate, so tests assemble it themselves),
 * with the code caches the checkout's programs left in dist/ when `caches` (a release that has run;
 * the first start of a fresh release, with none, is release.test's): each world's first watcher,
 * hook round and CLI would otherwise compile its bundle again.
 */
export const makeReleaseRoot = (
  root: string,
  name = "0123456789ab",
  from: { readonly dist: string; readonly nodeModules: string } = { dist, nodeModules },
  caches = true
): string => {
  const release = Path.join(root, "staged", name)
  Fs.mkdirSync(release, { recursive: true })
  for (const program of ["ocx2", "ocx2-hook", "ocx2-hook-round", "ocx2-watcher", "ocx2-git", "ocx2-cgi", "ocx2-cgi-pages", "ocx2-cgi-receipt", "ocx2-supervise"]) {
    const source = Path.join(from.dist, `${program}.mjs`)
    // an older commit's dist (bench/load's baseline) may not have the later programs
    if (!Fs.existsSync(source) && from.dist !== dist && !["ocx2", "ocx2-hook", "ocx2-hook-round", "ocx2-watcher"].includes(program)) continue
    if (!Fs.existsSync(source)) throw new Error(`${source} is missing: npm run build first`)
    // named the Node that runs the tests by its path, as staging names its own: Fossil's hooks and
    // the tests' bare environments would otherwise find another Node on their PATH (bin/setup's
    // .node/bin is first on the suite's PATH only)
    Fs.writeFileSync(Path.join(release, program), namingNode(Fs.readFileSync(source, "utf8"), Fs.realpathSync(process.execPath)))
    Fs.chmodSync(Path.join(release, program), 0o755)
    // a program run through the code cache has its bundle beside it (bin/build.mjs)
    const code = Path.join(from.dist, `${program}.cjs`)
    if (Fs.existsSync(code)) Fs.copyFileSync(code, Path.join(release, `${program}.cjs`))
    // a cache of another build is rejected by its loader, which then makes one of its own
    if (caches && Fs.existsSync(`${code}.cache`)) Fs.copyFileSync(`${code}.cache`, Path.join(release, `${program}.cjs.cache`))
  }
  // OCX2_TEST_WATCHER: a watcher program in place of this checkout's, for test/support/lost-run's
  // demonstration of a lost run (never set by the suite)
  const standIn = process.env.OCX2_TEST_WATCHER
  if (standIn !== undefined && standIn !== "") {
    for (const file of ["ocx2-watcher", "ocx2-watcher.cjs", "ocx2-watcher.cjs.cache"]) Fs.rmSync(Path.join(release, file), { force: true })
    Fs.copyFileSync(standIn, Path.join(release, "ocx2-watcher"))
    Fs.chmodSync(Path.join(release, "ocx2-watcher"), 0o755)
  }
  // the flock addon, beside the programs as staging puts it (an older commit's dist may have none)
  const addon = Path.join(from.dist, "ocx2-flock.node")
  if (Fs.existsSync(addon)) Fs.copyFileSync(addon, Path.join(release, "ocx2-flock.node"))
  Fs.writeFileSync(Path.join(release, "package.json"), JSON.stringify({ type: "module" }))
  Fs.symlinkSync(from.nodeModules, Path.join(release, "node_modules"))
  Fs.symlinkSync(`staged/${name}`, Path.join(root, "current"))
  Fs.symlinkSync("current/ocx2-hook", Path.join(root, "ocx2-hook"))
  return release
}

/** An extension root at DIR/ext whose ocx2-cgi runs `program` with the Node that runs the tests (Fossil gives an extension no PATH). */
export const cgiExtroot = (dir: string, program: string): string => {
  const extroot = Path.join(dir, "ext")
  Fs.mkdirSync(extroot, { recursive: true })
  Fs.writeFileSync(Path.join(extroot, "ocx2-cgi"), `#!/bin/sh\nexec ${process.execPath} ${program}\n`, { mode: 0o755 })
  return extroot
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Asks `probe` every `every` ms until it gives a value (returned), or `ms` have passed (undefined). */
const poll = async <A>(probe: () => Promise<A | undefined> | A | undefined, ms: number, every: number): Promise<A | undefined> => {
  const deadline = Date.now() + ms
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) return undefined
    await sleep(every)
  }
}

/**
 * Asks `probe` every `every` ms until it gives a value (returned), or `ms` have passed (undefined;
 * what the open worlds saw then is printed if the test fails: explain.ts's waitRanOut). A wait for
 * the product is better the world's `waitFor`, which throws naming what it waited for.
 */
export const waitFor = async <A>(probe: () => Promise<A | undefined> | A | undefined, ms: number, every = 100): Promise<A | undefined> => {
  const began = Date.now()
  const value = await poll(probe, ms, every)
  if (value === undefined) waitRanOut(ms, Date.now() - began)
  return value
}

const waitForValue = poll

/**
 * Asks `probe` every `every` ms (100) until it gives a value (returned); when `ms` (answerWithin by
 * default) run out first, throws: `what` did not come, and what the node at `where` saw (of `run`,
 * when named). A world's `waitFor` is this on its own node; this is for a node of another root (a
 * clone's host).
 */
export const waitOr = async <A>(
  where: { readonly dir: string; readonly root: string },
  what: string,
  probe: () => Promise<A | undefined> | A | undefined,
  options: { readonly ms?: number; readonly every?: number; readonly run?: string } = {}
): Promise<A> => {
  const ms = options.ms ?? answerWithin
  const began = Date.now()
  const value = await poll(probe, ms, options.every ?? 100)
  if (value !== undefined) return value
  throw new Error(`${what}: not within ${ms / 1000} s (waited ${((Date.now() - began) / 1000).toFixed(1)} s)\n${explain(where, options.run)}`)
}

/** `waitFor` as an Effect, for a condition: whether `probe` came true within `ms` (asked every `every` ms, in real time). */
export const waitUntil = (probe: () => boolean | Promise<boolean>, ms: number, every = 100): Effect.Effect<boolean> =>
  Effect.promise(() => waitFor(async () => ((await probe()) ? true : undefined), ms, every)).pipe(Effect.map((came) => came === true))

/** `waitFor` of an Effect: runs `probe` every `every` ms until its value is `done` or `ms` have passed (then told as `waitFor` tells it); its last value. */
export const eventually = <A, E, R>(probe: Effect.Effect<A, E, R>, done: (value: A) => boolean, ms: number, every = 100): Effect.Effect<A, E, R> =>
  Effect.gen(function*() {
    const began = Date.now()
    for (;;) {
      const value = yield* probe
      if (done(value)) return value
      if (Date.now() > began + ms) {
        waitRanOut(ms, Date.now() - began)
        return value
      }
      yield* Effect.sleep(every)
    }
  })

/** Every process whose command line names `needle` (the tests' own temporary paths), by pid. */
export const pidsNaming = (needle: string): ReadonlyArray<number> =>
  Fs.readdirSync("/proc").filter((e) => /^\d+$/.test(e)).flatMap((e) => {
    try {
      return Fs.readFileSync(`/proc/${e}/cmdline`, "utf8").includes(needle) ? [Number(e)] : []
    } catch {
      return []
    }
  })

/** Ends the watchers (and their processes) a test left running under `root`, by pid. */
export const endWatchers = (root: string): void => {
  for (const pid of pidsNaming(root)) {
    if (pid === process.pid) continue
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // already gone
    }
  }
}

export interface WorldOptions extends LocalNodeOptions {
  /** ROOT holds a release root made from this checkout's dist (makeReleaseRoot) */
  readonly release?: boolean
  /** the server's extension root runs the release's OCX pages (ext/ocx2-cgi runs ROOT/current/ocx2-cgi) */
  readonly cgi?: boolean
  /** the node's hook installed on the served repository (the hook tool's answer is `installed`); implies `release` */
  readonly node?: boolean
}

export interface Reply {
  readonly kind: string
  readonly sender: string | undefined
  readonly content: unknown
  readonly hash: string
}

export interface World extends LocalNode {
  /** the hook tool's answer when the world was made with `node` */
  readonly installed: Answer<unknown> | undefined
  readonly watcherProgram: string
  /** calls a tool as `user` (its capabilities read from the repository) on the served repository */
  readonly call: <O>(tool: Tool<any, any, O>, input: object, options?: { readonly as?: string; readonly dryRun?: boolean }) => Promise<Answer<O>>
  /** a run's post text for the node user */
  readonly runText: (run: object, to?: string) => string
  /** a run's content with the given changes, posted as `as` (alice) to `to` (the node user); its hash */
  readonly post: (run: object, options?: { readonly as?: string; readonly to?: string; readonly title?: string }) => Promise<string>
  /** a reply written on the server's host as `user` (received from that user) */
  readonly reply: (user: string, to: string, text: string) => Promise<string>
  /** every post of the run's thread: sender and text, in server order */
  readonly thread: (run: string) => Promise<ReadonlyArray<{ readonly hash: string; readonly sender: string | undefined; readonly text: string }>>
  /** the run's replies that are messages naming it: kind, sender, content */
  readonly replies: (run: string) => Promise<ReadonlyArray<Reply>>
  /**
   * waits until the run has an ended; returns the replies. When `ms` (answerWithin by default) run
   * out first, throws, its message what the node saw (explain)
   */
  readonly waitEnded: (run: string, ms?: number) => Promise<ReadonlyArray<Reply>>
  /**
   * Asks `probe` every `every` ms until it gives a value (returned); when `ms` (answerWithin by
   * default) run out first, throws: `what` did not come, and what the node saw (of `run`, when named).
   */
  readonly waitFor: <A>(what: string, probe: () => Promise<A | undefined> | A | undefined, options?: { readonly ms?: number; readonly every?: number; readonly run?: string }) => Promise<A>
  /** what the node saw (test/support/explain.ts): its logs, the run's care files when `run` is named, the world's processes, the load */
  readonly explain: (run?: string) => string
  readonly record: (run: string) => ReturnType<typeof readRecord>
  /** the node's watcher for one run, as the hook starts it; its exit */
  readonly watch: (run: string, env?: Readonly<Record<string, string>>) => Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
}

const served = (repository: string) =>
  Layer.mergeAll(FossilRepository.layer({ path: repository }), FossilReceipts.layer({ path: repository }))

const readRecord = (repository: string, run: string) =>
  Effect.runPromise(readRunRecord(run).pipe(Effect.provide(served(repository))))

const onRepository = <A, E>(repository: string, use: Effect.Effect<A, E, Repository>) =>
  Effect.runPromise(use.pipe(Effect.provide(FossilRepository.layer({ path: repository }))))

/** Makes the world; `close` ends what runs under its ROOT, its server, and removes its files (kept when OCX2_KEEP_TEST_DIR is set). */
export const makeWorld = async (options: WorldOptions = {}): Promise<World> => {
  const local = await makeLocalNode({
    ...options,
    ...(options.cgi === true && options.extroot === undefined ? { extroot: (root: string, dir: string) => cgiExtroot(dir, Path.join(root, "current", "ocx2-cgi")) } : {})
  })
  const { dir, root, repository, server } = local
  const where = { dir, root }
  openWorlds.add(where)
  const close = async () => {
    openWorlds.delete(where)
    endWatchers(root)
    stopSpare(root)
    await server.stop()
    if (process.env.OCX2_KEEP_TEST_DIR === undefined) await removeTree(dir)
  }
  try {
    if (options.release === true || options.node === true) makeReleaseRoot(root)
    const call: World["call"] = async (tool, input, o = {}) => {
      const user = o.as ?? users.admin.login
      const capabilities = await Effect.runPromise(capabilitiesOf(repository, user))
      return Effect.runPromise(runTool(tool, input, { caller: { user, capabilities, sandboxed: false }, dryRun: o.dryRun ?? false, repository }))
    }
    const thread: World["thread"] = (run) =>
      onRepository(repository, Effect.flatMap(Repository, (r) => r.thread(run))).then((posts) =>
        posts.map((p) => ({ hash: p.hash, sender: p.sender, text: p.text })))
    const replies: World["replies"] = async (run) => {
      // a burst's writers may hold the repository past a read's 15 s wait: that is not an answer
      const posts = await onRepository(repository, Effect.flatMap(Repository, (r) => r.thread(run)).pipe(
        Effect.retry({ while: (e) => e._tag === "RepositoryUnavailable" && e.reason.includes("database is locked"), times: 3 })
      ))
      return posts.flatMap((p) => {
        const reading = readMessage(p.text)
        return reading._tag === "Message" && reading.re === run
          ? [{ kind: reading.kind, sender: p.sender, content: reading.content, hash: p.hash }]
          : []
      })
    }
    const explained = (run?: string) => explain({ dir, root }, run)
    const waitFor: World["waitFor"] = (what, probe, o = {}) => waitOr(where, what, probe, o)
    const waitEnded: World["waitEnded"] = async (run, ms = answerWithin) => {
      let last: ReadonlyArray<Reply> = []
      const ended = await waitForValue(async () => {
        last = await replies(run)
        return last.some((m) => m.kind === "ended") ? last : undefined
      }, ms, 150)
      if (ended !== undefined) return replies(run)
      throw new Error(`the run ${run} was not answered ended within ${ms / 1000} s (its replies: ${last.map((m) => m.kind).join(", ") || "none"})\n${explained(run)}`)
    }
    const watcherProgram = distProgram("ocx2-watcher")
    const watch: World["watch"] = (run, env = {}) =>
      new Promise((resolve) => {
        const child = ChildProcess.spawn(
          process.execPath,
          [watcherProgram, "--root", root, "--repository", repository, "--node", users.node.login, "--run", run, "--server-url", server.url],
          { stdio: "ignore", env: { ...process.env, ...env } }
        )
        child.once("exit", (code, signal) => resolve({ code, signal }))
      })
    const installed = options.node === true ? await call(hook, { node: users.node.login, root }) : undefined
    return {
      ...local, close, installed, watcherProgram, call, thread, replies, waitEnded, waitFor, explain: explained, watch,
      runText: (run, to = users.node.login) => writeMessage({ ocx: 2, to, run }, "A run for the tests."),
      post: (run, o = {}) =>
        onRepository(repository, Effect.flatMap(Repository, (r) =>
          r.post({
            user: o.as ?? users.admin.login,
            title: o.title ?? "a run",
            text: writeMessage({ ocx: 2, to: o.to ?? users.node.login, run }, "A run for the tests.")
          })).pipe(Effect.map((w) => w.hash))),
      reply: (user, to, text) => onRepository(repository, Effect.flatMap(Repository, (r) => r.reply({ user, to, text })).pipe(Effect.map((w) => w.hash))),
      record: (run) => readRecord(repository, run)
    }
  } catch (e) {
    await close()
    throw e
  }
}

/** The world as a scoped Effect: made when the scope opens, closed when it closes. */
export const world = (options: WorldOptions = {}): Effect.Effect<World, Error, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({ try: () => makeWorld(options), catch: (e) => (e instanceof Error ? e : new Error(String(e))) }),
    (w) => Effect.promise(() => w.close())
  )
