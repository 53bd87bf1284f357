/**
 * A served repository with the users a node needs, a check-in on trunk, a running fossil
 * server, and a release root: the world in which the watcher, the hook and the tools are tested.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import * as FossilReceipts from "../../layers/FossilReceipts.js"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { Repository } from "../../services/Repository.js"
import type { NodeConfig } from "../../src/node/NodeConfig.js"
import { readRunRecord } from "../../src/node/RunRecord.js"
import { writeMessage } from "../../src/protocol/Envelope.js"
import { createRepository, fossil, makeTempDir, startServer, type RunningServer, type TestUser } from "./fossilServer.js"
import * as Layer from "effect/Layer"
import { stopSpare } from "../../src/node/SpareClient.js"

export const users = {
  admin: { login: "alice", capabilities: "s", password: "alice-pw" },
  node: { login: "lab", capabilities: "", password: "lab-pw" },
  builder: { login: "builder", capabilities: "oi", password: "builder-pw" },
  stranger: { login: "mallory", capabilities: "oi234", password: "mallory-pw" },
  runner: { login: "rita", capabilities: "R234oi", password: "rita-pw" }
} satisfies Record<string, TestUser>

export interface NodeWorld {
  readonly dir: string
  readonly root: string
  readonly repository: string
  readonly server: RunningServer
  readonly serverCode: string
  readonly trunk: string
  readonly config: NodeConfig
  readonly watcherProgram: string
  /** a run's content with the given changes, sent as `to` the node user */
  readonly post: (run: object, options?: { readonly as?: string; readonly to?: string; readonly title?: string }) => Promise<string>
  readonly record: (run: string) => Promise<Awaited<ReturnType<typeof readRecord>>>
  /** every post of the run's thread: sender and text, in server order */
  readonly thread: (run: string) => Promise<ReadonlyArray<{ readonly hash: string; readonly sender: string | undefined; readonly text: string }>>
  readonly watch: (run: string, env?: Readonly<Record<string, string>>) => Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
  readonly close: () => Promise<void>
}

const served = (repository: string) =>
  Layer.mergeAll(FossilRepository.layer({ path: repository }), FossilReceipts.layer({ path: repository }))

const readRecord = (repository: string, run: string) =>
  Effect.runPromise(readRunRecord(run).pipe(Effect.provide(served(repository))))

export const distProgram = (name: string) => Path.join(import.meta.dirname, "../../dist", `${name}.mjs`)

/**
 * The OCX pages in an extension root, as docs/operations.md says to serve them: `ocx2-cgi`, a
 * link to the active release's program, and `ocx2-cgi-next`, to the pre-release candidate's; and
 * the git export's program the same way, as `git` and `git-next`.
 */
export const linkPages = (extroot: string, root: string): void => {
  Fs.mkdirSync(extroot, { recursive: true })
  Fs.symlinkSync(Path.join(root, "current", "ocx2-cgi"), Path.join(extroot, "ocx2-cgi"))
  Fs.symlinkSync(Path.join(root, "next", "ocx2-cgi"), Path.join(extroot, "ocx2-cgi-next"))
  // the git export, read-only over smart HTTP (docs/operations.md, "The git export")
  Fs.symlinkSync(Path.join(root, "current", "ocx2-git"), Path.join(extroot, "git"))
  Fs.symlinkSync(Path.join(root, "next", "ocx2-git"), Path.join(extroot, "git-next"))
}

export const makeNodeWorld = async (options: { readonly fastHooks?: boolean; readonly pages?: boolean } = {}): Promise<NodeWorld> => {
  const dir = makeTempDir("ocx2-node-")
  // the sandbox runs as an unprivileged uid that must reach the workspace's directories
  Fs.chmodSync(dir, 0o755)
  const root = Path.join(dir, "root")
  Fs.mkdirSync(root, { mode: 0o755 })
  const repository = await createRepository(Path.join(dir, "served.fossil"), Object.values(users))
  // a check-in on trunk for the files and checkout steps
  const checkout = Path.join(dir, "checkout")
  Fs.mkdirSync(checkout)
  await runIn(checkout, ["open", repository])
  Fs.writeFileSync(Path.join(checkout, "Makefile"), "image:\n\tmkdir -p out && echo board > out/board.img\n")
  Fs.writeFileSync(Path.join(checkout, "hello.txt"), "hello from trunk\n")
  await runIn(checkout, ["add", "Makefile", "hello.txt"])
  await runIn(checkout, ["commit", "-m", "the first check-in", "--user-override", "alice"])
  const trunk = /artifact:\s+([0-9a-f]{64})/.exec(await fossil(["whatis", "trunk", "-R", repository]))![1]!
  const serverCode = (await fossil(["sql", "-R", repository, "SELECT value FROM config WHERE name='server-code'"])).trim().replace(/'/g, "")
  const extroot = Path.join(dir, "ext")
  if (options.pages === true) linkPages(extroot, root)
  const server = await startServer(repository, { fastHooks: options.fastHooks ?? false, ...(options.pages === true ? { extroot } : {}) })
  const config: NodeConfig = { root, repository, nodeUser: users.node.login, serverUrl: server.url, passwordsFile: undefined }
  const post = async (run: object, options: { readonly as?: string; readonly to?: string; readonly title?: string } = {}) =>
    Effect.runPromise(
      Effect.flatMap(Repository, (r) =>
        r.post({
          user: options.as ?? users.admin.login,
          title: options.title ?? "a run",
          text: writeMessage({ ocx: 2, to: options.to ?? users.node.login, run }, "A run for the tests.")
        })).pipe(Effect.map((w) => w.hash), Effect.provide(FossilRepository.layer({ path: repository })))
    )
  const thread = async (run: string) =>
    Effect.runPromise(
      Effect.flatMap(Repository, (r) => r.thread(run)).pipe(
        Effect.map((posts) => posts.map((p) => ({ hash: p.hash, sender: p.sender, text: p.text }))),
        Effect.provide(FossilRepository.layer({ path: repository }))
      )
    )
  const watcherProgram = distProgram("ocx2-watcher")
  const watch = (run: string, env: Readonly<Record<string, string>> = {}) =>
    new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      const child = ChildProcess.spawn(
        process.execPath,
        [watcherProgram, "--root", root, "--repository", repository, "--node", users.node.login, "--run", run, "--server-url", server.url],
        { stdio: "ignore", env: { ...process.env, ...env } }
      )
      child.once("exit", (code, signal) => resolve({ code, signal }))
    })
  return {
    dir, root, repository, server, serverCode, trunk, config, watcherProgram, post, thread, watch,
    record: (run) => readRecord(repository, run),
    close: async () => {
      stopSpare(root)
      await server.stop()
      // a process ending as the world is removed may still write into it: try again while it does
      Fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 })
    }
  }
}

const runIn = async (cwd: string, args: ReadonlyArray<string>) => {
  const { runFossil } = await import("../../src/fossil/Command.js")
  const r = await runFossil(args, { user: "alice", cwd })
  if (r.code !== 0) throw new Error(`fossil ${args.join(" ")}: ${r.stderr}${r.stdout}`)
}

/** A sandbox that sees the system read-only and its workspace read-write, as uid/gid 1000. */
export const sandbox = (overrides: object = {}) => ({
  uid: 1000, gid: 1000, linux_capabilities: [], network: false, isolate_terminal: true, ends_with_parent: true,
  proc: "/proc", dev: "/dev", tmp: "/tmp",
  read_only: ["/usr", "/bin", "/lib", "/lib64", "/etc"], read_write: ["$$workspace$$"],
  homes: [], created_files: [],
  ...overrides
})

/** A run of `script` (sh -c) in a workspace of its own holding trunk's files. */
export const shellRun = (world: Pick<NodeWorld, "serverCode">, script: string, process: object = {}, run: object = {}) => ({
  clone: world.serverCode,
  objective: "a test run",
  workspace: [
    { step: "directory", at: "$$root$$/work/$$run$$" },
    { step: "files", of: "trunk", into: "$$workspace$$/tree" }
  ],
  sandbox: sandbox(),
  limits: { wall: "2m" },
  process: { user: users.builder.login, command: ["sh", "-c", script], env: { PATH: "/usr/bin:/bin" }, ...process },
  ...run
})
