/**
 * A served repository with the users a node needs, a check-in on trunk, a running fossil server,
 * and a node's ROOT beside it: the world the demo runs in, and the one the tests of the watcher,
 * the hook and the tools build theirs on (test/support/nodeWorld.ts).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { runFossil } from "../fossil/Command.js"
import type { NodeConfig } from "../root/NodeConfig.js"
import { stopSpare } from "../node/SpareClient.js"
import { createRepository, fossil, makeTempDir, startServer, type FossilUser, type RunningServer } from "./LocalServer.js"

export const users = {
  admin: { login: "alice", capabilities: "s", password: "alice-pw" },
  node: { login: "lab", capabilities: "", password: "lab-pw" },
  builder: { login: "builder", capabilities: "oi", password: "builder-pw" },
  stranger: { login: "mallory", capabilities: "oi234", password: "mallory-pw" },
  runner: { login: "rita", capabilities: "R234oi", password: "rita-pw" }
} satisfies Record<string, FossilUser>

export interface LocalNode {
  readonly dir: string
  readonly root: string
  readonly repository: string
  readonly server: RunningServer
  readonly serverCode: string
  readonly trunk: string
  readonly config: NodeConfig
  /** stops the spare watcher and the server, and removes the whole world */
  readonly close: () => Promise<void>
}

export interface LocalNodeOptions {
  /** hooks within about a second (the server's backoffice polled; src/demo/LocalServer.ts) */
  readonly fastHooks?: boolean
  /** the OCX pages linked into the server's extension root */
  readonly pages?: boolean
}

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

const runIn = async (cwd: string, args: ReadonlyArray<string>) => {
  const r = await runFossil(args, { user: "alice", cwd })
  if (r.code !== 0) throw new Error(`fossil ${args.join(" ")}: ${r.stderr}${r.stdout}`)
}

export const makeLocalNode = async (options: LocalNodeOptions = {}): Promise<LocalNode> => {
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
  return {
    dir, root, repository, server, serverCode, trunk, config,
    close: async () => {
      stopSpare(root)
      await server.stop()
      // a process ending as the world is removed may still write into it: try again while it does
      Fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 })
    }
  }
}
