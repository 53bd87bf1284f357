/**
 * The bubblewrap command line for one launch, built in 2.8's table order so that a
 * later key is seen over an earlier one at the same place. Pure: every host path is
 * already resolved and checked (see MountPlan.ts).
 */

export interface Mount {
  readonly mode: "ro" | "rw"
  /** host path, links already followed */
  readonly source: string
  /** where the sandbox sees it */
  readonly dest: string
}

/** a link made in the sandbox: `at` holds `target`, as written (bwrap --symlink) */
export interface Link {
  readonly target: string
  readonly at: string
}

export interface BwrapPlan {
  readonly uid: number
  readonly gid: number
  readonly linuxCapabilities: ReadonlyArray<string>
  readonly network: boolean
  readonly isolateTerminal: boolean
  readonly endsWithParent: boolean
  readonly proc: string
  readonly dev: string
  readonly tmp: string
  /** the workspace, then read_only, read_write, homes */
  readonly mounts: ReadonlyArray<Mount>
  /** the host's top-level links into /usr, where /usr is bound (MountPlan.ts, usrLinks) */
  readonly links: ReadonlyArray<Link>
  /** each created file's text is readable on `fd` in bwrap */
  readonly createdFiles: ReadonlyArray<{ readonly fd: number; readonly at: string }>
  /** where bwrap reports the process's start and exit (the run's status file), or none */
  readonly statusFd?: number | undefined
  readonly env: Readonly<Record<string, string>>
  readonly cwd: string
  readonly command: ReadonlyArray<string>
  readonly hostname: string
}

/** namespaces every sandbox gets: it never sees host processes, accounts, host name or queues */
export const alwaysUnshared = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup"] as const

export const bwrapArgs = (plan: BwrapPlan): ReadonlyArray<string> => {
  const args: Array<string> = [...alwaysUnshared, "--hostname", plan.hostname]
  // uid, gid
  args.push("--uid", String(plan.uid), "--gid", String(plan.gid))
  // linux_capabilities: none kept unless named
  args.push("--cap-drop", "ALL")
  for (const cap of plan.linuxCapabilities) args.push("--cap-add", cap)
  // network
  if (!plan.network) args.push("--unshare-net")
  // isolate_terminal, ends_with_parent
  if (plan.isolateTerminal) args.push("--new-session")
  if (plan.endsWithParent) args.push("--die-with-parent")
  // bwrap closes it in the sandbox: the process cannot write its own exit
  if (plan.statusFd !== undefined) args.push("--json-status-fd", String(plan.statusFd))
  // proc, dev, tmp
  args.push("--proc", plan.proc, "--dev", plan.dev, "--tmpfs", plan.tmp)
  // the workspace, read_only, read_write, homes
  for (const m of plan.mounts) args.push(m.mode === "ro" ? "--ro-bind" : "--bind", m.source, m.dest)
  // a merged /usr: /bin, /lib, ... as the host's links say, at no place the keys use
  for (const l of plan.links) args.push("--symlink", l.target, l.at)
  // created_files: in memory, read-only, for it alone
  for (const f of plan.createdFiles) args.push("--ro-bind-data", String(f.fd), f.at)
  // the environment is exactly env: OCX adds nothing
  args.push("--clearenv")
  for (const [k, v] of Object.entries(plan.env)) args.push("--setenv", k, v)
  args.push("--chdir", plan.cwd, "--", ...plan.command)
  return args
}

/**
 * An unconfined run sees the whole host as OCX's account does; bwrap gives it only a
 * pid namespace of its own, so that ending it ends and reaps everything it started.
 */
export const unconfinedArgs = (
  plan: {
    readonly env: Readonly<Record<string, string>>
    readonly cwd: string
    readonly command: ReadonlyArray<string>
    readonly statusFd?: number | undefined
  }
): ReadonlyArray<string> => {
  const args: Array<string> = ["--dev-bind", "/", "/", "--unshare-pid", "--clearenv"]
  if (plan.statusFd !== undefined) args.push("--json-status-fd", String(plan.statusFd))
  for (const [k, v] of Object.entries(plan.env)) args.push("--setenv", k, v)
  args.push("--chdir", plan.cwd, "--", ...plan.command)
  return args
}
