import type { ResolvedMount } from "../../../services/Deployer.js"
import { launchPath, memoryEventsPath } from "../proxy/Launch.js"
import { kitMount, volumesMount } from "./ProxyKit.js"

/**
 * The bubblewrap command line of one container. Its own user namespace always (bwrap's, or one
 * the deployer made with more ids mapped for an image's User: deploy/UserNamespace.ts), and its own PID, IPC, UTS, network and cgroup namespaces; no variable of the
 * server's (the proxy reads none, and gives the program the image's only); it dies with the
 * server. The root is the overlay the deployer mounted; the proxy kit, the launch file and the
 * memory events (and a spare's staging mount) are bound read-only over the kit's mount points;
 * then the volumes, read-only where their mode is. Pure: every host path is resolved already.
 */
export interface SandboxPlan {
  /** the overlay over the image's rootfs */
  readonly merged: string
  readonly kit: string
  readonly launchFile: string
  /** the cgroup file with the container's oom_kill count, when there is one */
  readonly memoryEvents: string | undefined
  readonly mounts: ReadonlyArray<ResolvedMount>
  /** a spare's staging mount (shared on the host): its volumes are bound through it as it is taken */
  readonly staging?: string
  /** /dev/fuse, for the proxy's FUSE mounts, when the host has it */
  readonly fuse: boolean
  readonly command: ReadonlyArray<string>
  /** the descriptor bwrap writes its JSON (the sandbox's pid) to */
  readonly infoFd: number
  /** the descriptor of a user namespace made ahead to join (an image's User), else bwrap makes one */
  readonly userns?: number
}

export const sandboxArgs = (plan: SandboxPlan): ReadonlyArray<string> => {
  const args: Array<string> = [
    ...(plan.userns === undefined ? ["--unshare-user", "--uid", "0", "--gid", "0"] : ["--userns", String(plan.userns)]),
    "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
    "--hostname", "container",
    "--die-with-parent", "--new-session", "--clearenv",
    "--bind", plan.merged, "/",
    "--proc", "/proc", "--dev", "/dev"
  ]
  if (plan.fuse) args.push("--dev-bind", "/dev/fuse", "/dev/fuse")
  args.push("--ro-bind", plan.kit, kitMount, "--ro-bind", plan.launchFile, launchPath)
  if (plan.memoryEvents !== undefined) args.push("--ro-bind", plan.memoryEvents, memoryEventsPath)
  if (plan.staging !== undefined) args.push("--ro-bind", plan.staging, volumesMount)
  for (const m of plan.mounts) args.push(m.readOnly ? "--ro-bind" : "--bind", m.hostPath, m.containerPath)
  args.push("--info-fd", String(plan.infoFd), "--chdir", "/", "--", ...plan.command)
  return args
}
