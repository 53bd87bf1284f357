/**
 * A served repository with the users a node needs, a check-in on trunk, a running fossil server,
 * and a node's ROOT beside it: the world the demo runs in, and the one the tests of the watcher,
 * the hook and the tools build theirs on (test/support/nodeWorld.ts).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { runFossil } from "../fossil/Command.js"
import { openDatabase } from "../fossil/Sqlite.js"
import type { NodeConfig } from "../root/NodeConfig.js"
import { stopSpare } from "../pickup/SpareClient.js"
import { removeTree } from "./RemoveTree.js"
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
  /** an extension root of the caller's making, given the node's ROOT and the world's directory (in place of `pages`) */
  readonly extroot?: (root: string, dir: string) => string
  /** the repository's users (the node's own, `users`, by default; alice, who checks in, among them) */
  readonly users?: ReadonlyArray<FossilUser>
  /** the files of the check-in on trunk, by name (a Makefile and hello.txt by default); none: trunk is `fossil init`'s empty check-in */
  readonly checkin?: Readonly<Record<string, string>>
  /** false: Fossil's backoffice off and nothing run in its place (no hooks, no lease written after a page) */
  readonly backoffice?: boolean
  /** the repository in WAL mode; the capabilities of `nobody` (createRepository's options) */
  readonly wal?: boolean
  readonly nobody?: string
  /** the temporary directory's prefix */
  readonly prefix?: string
  /**
   * the served repository in a directory of repositories (DIR/repos/served.fossil), the server
   * serving that directory: a repository made beside it is served at SERVER/NAME, and the served
   * one at SERVER/served/
   */
  readonly directory?: boolean
}

const firstCheckin = {
  "Makefile": "image:\n\tmkdir -p out && echo board > out/board.img\n",
  "hello.txt": "hello from trunk\n"
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
  const dir = makeTempDir(options.prefix ?? "ocx2-node-")
  // the sandbox runs as an unprivileged uid that must reach the workspace's directories
  Fs.chmodSync(dir, 0o755)
  const root = Path.join(dir, "root")
  Fs.mkdirSync(root, { mode: 0o755 })
  const repos = options.directory === true ? Path.join(dir, "repos") : dir
  if (repos !== dir) Fs.mkdirSync(repos, { mode: 0o755 })
  const repository = await createRepository(Path.join(repos, "served.fossil"), options.users ?? Object.values(users), {
    ...(options.wal === undefined ? {} : { wal: options.wal }),
    ...(options.nobody === undefined ? {} : { nobody: options.nobody })
  })
  // a check-in on trunk for the files and checkout steps
  const files = options.checkin ?? firstCheckin
  if (Object.keys(files).length > 0) {
    const checkout = Path.join(dir, "checkout")
    Fs.mkdirSync(checkout)
    await runIn(checkout, ["open", repository])
    for (const [name, text] of Object.entries(files)) Fs.writeFileSync(Path.join(checkout, name), text)
    await runIn(checkout, ["add", ...Object.keys(files)])
    await runIn(checkout, ["commit", "-m", "the first check-in", "--user-override", "alice"])
  }
  const { trunk, serverCode } = trunkAndServerCode(repository)
  const extroot = options.extroot?.(root, dir) ?? (options.pages === true ? Path.join(dir, "ext") : undefined)
  if (options.pages === true && options.extroot === undefined && extroot !== undefined) linkPages(extroot, root)
  if (options.backoffice === false) await fossil(["settings", "backoffice-disable", "on", "-R", repository])
  const server = await startServer(repository, {
    fastHooks: options.fastHooks ?? false, ...(extroot !== undefined ? { extroot } : {}), ...(repos !== dir ? { directory: repos } : {})
  })
  const serverUrl = repos === dir ? server.url : `${server.url}served/`
  const config: NodeConfig = { root, repository, nodeUser: users.node.login, serverUrl, passwordsFile: undefined }
  return {
    dir, root, repository, server, serverCode, trunk, config,
    close: async () => {
      stopSpare(root)
      await server.stop()
      await removeTree(dir)
    }
  }
}

/**
 * The newest check-in tagged trunk (what `fossil whatis trunk` names) and the server code, read
 * in this process: two fossil processes a world, hundreds in the suite, for two short reads.
 */
const trunkAndServerCode = (repository: string): { readonly trunk: string; readonly serverCode: string } => {
  const db = openDatabase(repository, { readonly: true, fileMustExist: true })
  try {
    const trunk = db.prepare<[], { uuid: string }>(
      `SELECT b.uuid FROM tag t JOIN tagxref x ON x.tagid = t.tagid JOIN event e ON e.objid = x.rid JOIN blob b ON b.rid = x.rid
       WHERE t.tagname = 'sym-trunk' AND x.tagtype > 0 AND e.type = 'ci' ORDER BY e.mtime DESC LIMIT 1`
    ).get()
    const serverCode = db.prepare<[], { value: string }>("SELECT value FROM config WHERE name = 'server-code'").get()
    if (trunk === undefined || serverCode === undefined) throw new Error(`${repository} has no check-in on trunk or no server-code`)
    return { trunk: trunk.uuid, serverCode: serverCode.value }
  } finally {
    db.close()
  }
}
