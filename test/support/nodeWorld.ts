/**
 * The world in which the watcher, the hook and the tools are tested, as the demo makes it: the
 * test world (test/support/world.ts) with its defaults (a Makefile and hello.txt on trunk), and
 * the shapes of a run the tests post in it.
 */
import type { LocalNodeOptions } from "../../src/demo/LocalNode.js"
import { makeWorld, users, type World } from "./world.js"

export { users } from "./world.js"

export type NodeWorld = World

export const makeNodeWorld = (options: LocalNodeOptions = {}): Promise<NodeWorld> => makeWorld(options)

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
