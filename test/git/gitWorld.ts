/**
 * The world the git export is tested in: the hook's world (a served repository with a check-in,
 * served in fast mode, a release root of this checkout's bundles) whose extension root serves the
 * release's git program as `git`, as docs/operations.md says to link it; nobody may read code, so
 * a viewer reads only with their own Read capability.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { runFossil } from "../../src/fossil/Command.js"
import { addUsers, fossil, type TestUser } from "../support/fossilServer.js"
import { makeHookWorld, type HookWorld } from "../node/hookWorld.js"

/** a person who may read and write the forum, but not read code (no o) */
export const talker = { login: "talker", capabilities: "234", password: "talker-pw" } satisfies TestUser

export interface GitWorld extends HookWorld {
  /** the git export's URL: BASE/ext/git/served.git */
  readonly gitUrl: string
  readonly mirror: string
  /** a check-in committed in a checkout of `clone` and pushed; its comment */
  readonly commitAndPush: (checkout: string, file: string, text: string, comment: string) => Promise<void>
}

export const linkGit = (extroot: string, root: string): void => {
  Fs.mkdirSync(extroot, { recursive: true })
  Fs.symlinkSync(Path.join(root, "current", "ocx2-git"), Path.join(extroot, "git"))
  Fs.symlinkSync(Path.join(root, "next", "ocx2-git"), Path.join(extroot, "git-next"))
}

export const makeGitWorld = async (): Promise<GitWorld> => {
  const world = await makeHookWorld({
    extroot: (root) => {
      const extroot = Path.join(Path.dirname(root), "ext")
      linkGit(extroot, root)
      return extroot
    }
  })
  await fossil(["user", "capabilities", "nobody", "", "-R", world.repository])
  await fossil(["user", "capabilities", "anonymous", "", "-R", world.repository])
  await addUsers(world.repository, [talker])
  const commitAndPush: GitWorld["commitAndPush"] = async (checkout, file, text, comment) => {
    Fs.writeFileSync(Path.join(checkout, file), text)
    const run = async (args: ReadonlyArray<string>) => {
      const r = await runFossil(args, { user: "alice", cwd: checkout })
      if (r.code !== 0) throw new Error(`fossil ${args.join(" ")}: ${r.stderr}${r.stdout}`)
      return r.stdout + r.stderr
    }
    await run(["addremove"])
    await run(["commit", "--no-warnings", "-m", comment])
    const pushed = await run(["push"])
    if (/Error:/i.test(pushed)) throw new Error(`fossil push: ${pushed}`)
  }
  return { ...world, gitUrl: `${world.server.url}ext/git/served.git`, mirror: Path.join(world.dir, "mirror"), commitAndPush }
}

/** git, with no configuration of the account's, failing on a non-zero exit unless `allowFail`. */
export const git = (
  args: ReadonlyArray<string>,
  options: { readonly cwd?: string; readonly allowFail?: boolean; readonly input?: string; readonly env?: Readonly<Record<string, string>> } = {}
): { readonly code: number; readonly stdout: string; readonly stderr: string } => {
  const r = ChildProcess.spawnSync("git", [...args], {
    cwd: options.cwd,
    input: options.input ?? "",
    encoding: "utf8",
    timeout: 120_000,
    env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: "/nonexistent", GIT_CONFIG_NOSYSTEM: "1", GIT_TERMINAL_PROMPT: "0", GIT_ASKPASS: "/bin/false", ...options.env }
  })
  const out = { code: r.status ?? -1, stdout: r.stdout ?? "", stderr: r.stderr ?? "" }
  if (out.code !== 0 && options.allowFail !== true) throw new Error(`git ${args.join(" ")} exited ${out.code}: ${out.stderr}`)
  return out
}
