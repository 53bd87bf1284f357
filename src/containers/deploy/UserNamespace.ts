import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { maxMappedId } from "../proxy/Launch.js"
import { exited, pause } from "./Exec.js"

/**
 * The user namespace of a container whose image names a User other than root. bubblewrap maps
 * one id only (the container's root to the server's), where the program must become another: the
 * deployer makes the namespace itself, mapping the container's 0 to the host's 0 (as bubblewrap
 * would) and its 1 to 65535 to ids no host user has (`hostIdBase` + 1 on), and bubblewrap joins it
 * (`--userns`). The proxy is root in it, with its capabilities there (FUSE mounts); the program is
 * the image's user, and nobody on the host. The namespace is held by a process (`unshare --user
 * cat`, whose standard input is the server's: it ends with the server) only until bubblewrap's
 * sandbox is in it; the sandbox keeps it alive from then on.
 */
export const hostIdBase = 1_000_000

export interface HeldNamespace {
  /** an open descriptor of the namespace, for bubblewrap's --userns */
  readonly fd: number
  /** ends the holder and closes the descriptor (once the sandbox joined, or when it will not) */
  readonly release: () => Promise<void>
}

export const mapping = `0 0 1\n1 ${hostIdBase + 1} ${maxMappedId}\n`

export const holdUserNamespace = async (): Promise<HeldNamespace> => {
  const holder = ChildProcess.spawn("unshare", ["--user", "cat"], { stdio: ["pipe", "ignore", "pipe"], env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" }, cwd: "/" })
  holder.stdin!.on("error", () => {})
  let err = ""
  holder.stderr!.on("data", (d: Buffer) => (err += d.toString()))
  let fd: number | undefined
  const release = async () => {
    holder.kill("SIGKILL")
    await exited(holder)
    if (fd !== undefined) Fs.closeSync(fd)
    fd = undefined
  }
  try {
    const own = Fs.readlinkSync("/proc/self/ns/user")
    // the holder is in its namespace once unshare made it (before it runs cat)
    for (;;) {
      if (holder.exitCode !== null || holder.signalCode !== null) throw new Error(`unshare --user failed: ${err.trim() || `exit status ${holder.exitCode}`}`)
      try {
        if (Fs.readlinkSync(`/proc/${holder.pid}/ns/user`) !== own) break
      } catch {
        // not started yet
      }
      await pause(1)
    }
    // both maps in one write each: a map is written once
    Fs.writeFileSync(`/proc/${holder.pid}/uid_map`, mapping)
    Fs.writeFileSync(`/proc/${holder.pid}/gid_map`, mapping)
    fd = Fs.openSync(`/proc/${holder.pid}/ns/user`, "r")
    return { fd, release }
  } catch (e) {
    await release()
    throw new Error(`the container's user namespace could not be made: ${(e as Error).message}`)
  }
}
