/**
 * A served repository with the users a node needs, a check-in on trunk, a running fossil
 * server, and a release root: the world in which the watcher, the hook and the tools are tested.
 * The world itself is the demo's (src/demo/LocalNode.ts); here it gains what tests ask of it.
 */
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import * as FossilReceipts from "../../layers/FossilReceipts.js"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { Repository } from "../../services/Repository.js"
import { makeLocalNode, type LocalNode, type LocalNodeOptions, users } from "../../src/demo/LocalNode.js"
import { readRunRecord } from "../../src/node/RunRecord.js"
import { writeMessage } from "../../src/protocol/Envelope.js"
import * as Layer from "effect/Layer"

export { linkPages, users } from "../../src/demo/LocalNode.js"

export interface NodeWorld extends LocalNode {
  readonly watcherProgram: string
  /** a run's content with the given changes, sent as `to` the node user */
  readonly post: (run: object, options?: { readonly as?: string; readonly to?: string; readonly title?: string }) => Promise<string>
  readonly record: (run: string) => Promise<Awaited<ReturnType<typeof readRecord>>>
  /** every post of the run's thread: sender and text, in server order */
  readonly thread: (run: string) => Promise<ReadonlyArray<{ readonly hash: string; readonly sender: string | undefined; readonly text: string }>>
  readonly watch: (run: string, env?: Readonly<Record<string, string>>) => Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
}

const served = (repository: string) =>
  Layer.mergeAll(FossilRepository.layer({ path: repository }), FossilReceipts.layer({ path: repository }))

const readRecord = (repository: string, run: string) =>
  Effect.runPromise(readRunRecord(run).pipe(Effect.provide(served(repository))))

export const distProgram = (name: string) => Path.join(import.meta.dirname, "../../dist", `${name}.mjs`)

export const makeNodeWorld = async (options: LocalNodeOptions = {}): Promise<NodeWorld> => {
  const local = await makeLocalNode(options)
  const { root, repository, server } = local
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
  return { ...local, watcherProgram, post, thread, watch, record: (run) => readRecord(repository, run) }
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
