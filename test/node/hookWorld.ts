/**
 * The world the hook is tested in: a served repository with the node's users and a check-in on
 * trunk, served in fast mode (backoffice-disable on, fossil backoffice --poll 1), and a release
 * root built directly from this checkout's dist bundles (staging runs the 60 s gate, so tests
 * assemble ROOT/staged/NAME themselves and link current and ocx2-hook as accept does).
 */
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { Repository } from "../../services/Repository.js"
import { capabilitiesOf } from "../../src/adapters/cli/RepositoryCapabilities.js"
import { runFossil } from "../../src/fossil/Command.js"
import { readMessage, writeMessage } from "../../src/protocol/Envelope.js"
import { runTool } from "../../src/tools/RunTool.js"
import type { Answer, Tool } from "../../src/tools/Tool.js"
import { createRepository, fossil, makeTempDir, startServer, type RunningServer } from "../support/fossilServer.js"
import { users } from "../support/nodeWorld.js"
import { stopSpare } from "../../src/node/SpareClient.js"
import { hook } from "../../src/tools/hook.js"

/** the checkout: found upwards, so a bundled bench (bench/*.out.mjs) finds it too */
const project = (() => {
  for (let dir = import.meta.dirname; ; dir = Path.dirname(dir)) {
    if (Fs.existsSync(Path.join(dir, "package.json")) && Fs.existsSync(Path.join(dir, "node_modules"))) return dir
    if (Path.dirname(dir) === dir) throw new Error(`no checkout above ${import.meta.dirname}`)
  }
})()
export const dist = Path.join(project, "dist")
const nodeModules = Path.join(project, "node_modules")

/** ROOT/staged/NAME holding the dist bundles as programs, served as current, with ROOT/ocx2-hook. */
export const makeReleaseRoot = (root: string, name = "0123456789ab", from: { readonly dist: string; readonly nodeModules: string } = { dist, nodeModules }): string => {
  const release = Path.join(root, "staged", name)
  Fs.mkdirSync(release, { recursive: true })
  for (const program of ["ocx2", "ocx2-hook", "ocx2-hook-round", "ocx2-watcher", "ocx2-git", "ocx2-cgi", "ocx2-supervise"]) {
    const source = Path.join(from.dist, `${program}.mjs`)
    // an older commit's dist (bench/load's baseline) may not have the later programs
    if (!Fs.existsSync(source) && from.dist !== dist && !["ocx2", "ocx2-hook", "ocx2-hook-round", "ocx2-watcher"].includes(program)) continue
    if (!Fs.existsSync(source)) throw new Error(`${source} is missing: npm run build first`)
    Fs.copyFileSync(source, Path.join(release, program))
    Fs.chmodSync(Path.join(release, program), 0o755)
    // a program run through the code cache has its bundle beside it (bin/build.mjs)
    const code = Path.join(from.dist, `${program}.cjs`)
    if (Fs.existsSync(code)) Fs.copyFileSync(code, Path.join(release, `${program}.cjs`))
  }
  Fs.writeFileSync(Path.join(release, "package.json"), JSON.stringify({ type: "module" }))
  Fs.symlinkSync(from.nodeModules, Path.join(release, "node_modules"))
  Fs.symlinkSync(`staged/${name}`, Path.join(root, "current"))
  Fs.symlinkSync("current/ocx2-hook", Path.join(root, "ocx2-hook"))
  return release
}

export interface HookWorld {
  readonly dir: string
  readonly root: string
  readonly repository: string
  readonly server: RunningServer
  readonly serverCode: string
  /** calls a tool as `user` (its capabilities read from the repository) on the served repository */
  readonly call: <O>(tool: Tool<any, any, O>, input: object, options?: { readonly as?: string; readonly dryRun?: boolean }) => Promise<Answer<O>>
  /** a run's post text for the node user */
  readonly runText: (run: object, to?: string) => string
  /** the run's replies that are messages naming it: kind, sender, content */
  readonly replies: (run: string) => Promise<ReadonlyArray<{ readonly kind: string; readonly sender: string | undefined; readonly content: unknown; readonly hash: string }>>
  /** waits until the run has an ended (or the time is up); returns the replies */
  readonly waitEnded: (run: string, ms?: number) => Promise<Awaited<ReturnType<HookWorld["replies"]>>>
  /** a reply written on the server's host as `user` (received from that user) */
  readonly reply: (user: string, to: string, text: string) => Promise<string>
  readonly close: () => Promise<void>
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

export const waitFor = async <A>(probe: () => Promise<A | undefined> | A | undefined, ms: number, every = 100): Promise<A | undefined> => {
  const deadline = Date.now() + ms
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) return undefined
    await sleep(every)
  }
}

/**
 * `pages`: the server serves the release's OCX pages from an extension root, as docs/operations.md
 * says (ext/ocx2-cgi runs ROOT/current/ocx2-cgi, with the Node that runs the tests: Fossil gives an
 * extension no PATH). `extroot`: an extension root of the test's own making.
 */
export const makeHookWorld = async (
  options: { readonly fastHooks?: boolean; readonly release?: boolean; readonly pages?: boolean; readonly extroot?: (root: string) => string } = {}
): Promise<HookWorld> => {
  const dir = makeTempDir("ocx2-hook-")
  Fs.chmodSync(dir, 0o755) // the sandbox's uid 1000 reaches the workspaces under it
  const root = Path.join(dir, "root")
  Fs.mkdirSync(root, { mode: 0o755 })
  if (options.release !== false) makeReleaseRoot(root)
  const repository = await createRepository(Path.join(dir, "served.fossil"), Object.values(users))
  const checkout = Path.join(dir, "checkout")
  Fs.mkdirSync(checkout)
  const inCheckout = async (args: ReadonlyArray<string>) => {
    const r = await runFossil(args, { user: "alice", cwd: checkout })
    if (r.code !== 0) throw new Error(`fossil ${args.join(" ")}: ${r.stderr}${r.stdout}`)
  }
  await inCheckout(["open", repository])
  Fs.writeFileSync(Path.join(checkout, "hello.txt"), "hello from trunk\n")
  await inCheckout(["add", "hello.txt"])
  await inCheckout(["commit", "-m", "the first check-in", "--user-override", "alice"])
  const serverCode = (await fossil(["sql", "-R", repository, "SELECT value FROM config WHERE name='server-code'"])).trim().replace(/'/g, "")
  const extroot = options.extroot?.(root) ?? (options.pages === true ? Path.join(dir, "ext") : undefined)
  if (options.pages === true && extroot !== undefined) {
    Fs.mkdirSync(extroot, { recursive: true })
    Fs.writeFileSync(Path.join(extroot, "ocx2-cgi"), `#!/bin/sh\nexec ${process.execPath} ${Path.join(root, "current", "ocx2-cgi")}\n`, { mode: 0o755 })
  }
  const server = await startServer(repository, { fastHooks: options.fastHooks ?? true, ...(extroot !== undefined ? { extroot } : {}) })

  const call: HookWorld["call"] = async (tool, input, o = {}) => {
    const user = o.as ?? users.admin.login
    const capabilities = await Effect.runPromise(capabilitiesOf(repository, user))
    return Effect.runPromise(runTool(tool, input, { caller: { user, capabilities, sandboxed: false }, dryRun: o.dryRun ?? false, repository }))
  }
  const replies: HookWorld["replies"] = async (run) => {
    // a burst's writers may hold the repository past a read's 15 s wait: that is not an answer
    const posts = await Effect.runPromise(
      Effect.flatMap(Repository, (r) => r.thread(run)).pipe(
        Effect.provide(FossilRepository.layer({ path: repository })),
        Effect.retry({
          while: (e) => e._tag === "RepositoryUnavailable" && e.reason.includes("database is locked"),
          times: 3
        })
      )
    )
    return posts.flatMap((p) => {
      const reading = readMessage(p.text)
      return reading._tag === "Message" && reading.re === run
        ? [{ kind: reading.kind, sender: p.sender, content: reading.content, hash: p.hash }]
        : []
    })
  }
  const waitEnded: HookWorld["waitEnded"] = async (run, ms = 30_000) => {
    await waitFor(async () => ((await replies(run)).some((m) => m.kind === "ended") ? true : undefined), ms, 150)
    return replies(run)
  }
  return {
    dir, root, repository, server, serverCode, call, replies, waitEnded,
    reply: (user, to, text) =>
      Effect.runPromise(
        Effect.flatMap(Repository, (r) => r.reply({ user, to, text })).pipe(
          Effect.map((w) => w.hash),
          Effect.provide(FossilRepository.layer({ path: repository }))
        )
      ),
    runText: (run, to = users.node.login) => writeMessage({ ocx: 2, to, run }, "A run for the tests."),
    close: async () => {
      stopSpare(root)
      await server.stop()
      // a process ending as the world is removed may still write into it: try again while it does
      if (process.env.OCX2_KEEP_TEST_DIR === undefined) Fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 })
    }
  }
}

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

/** A hook world whose node's hook is installed (the tools' answer, for the test to check), as a node runs on a served repository. */
export const makeHookedWorld = async (): Promise<{ readonly world: HookWorld; readonly installed: Answer<unknown> }> => {
  const world = await makeHookWorld()
  const installed = await world.call(hook, { node: users.node.login, root: world.root })
  return { world, installed }
}

/** Ends what a test left running under the world's root, then the world. */
export const closeHookWorld = async (world: HookWorld | undefined): Promise<void> => {
  if (world === undefined) return
  endWatchers(world.root)
  await world.close()
}
