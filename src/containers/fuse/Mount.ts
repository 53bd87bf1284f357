import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { Scope } from "../FrameConnection.js"
import { askPrefix, decodeAnswer, encodeAsk, Errno } from "./Ask.js"
import { Requests } from "./Requests.js"
import { Session } from "./FuseSession.js"

/**
 * A FUSE mount made by JavaScript on /dev/fuse (docs/containers.md, "FUSE mounts"): the container
 * proxy calls `mountFuse` for each mount scope the server opens, with `ask` sending one FUSE ask
 * as a channel on that scope and resolving with the client's answer. Every operation the kernel
 * asks of the mount that the client decides becomes one ask, and the answer is the reply as the
 * client gave it.
 *
 * What JavaScript cannot do itself is the static helper `fusemountfd` (built from fusemountfd.c
 * into dist/fusemountfd; a proxy kit carries it beside the proxy's bundle): it gets the open
 * /dev/fuse as fd 3, calls mount(2), and then copies each request the kernel queues to a pipe
 * the event loop reads, so no thread of this process ever waits in a read of /dev/fuse (why:
 * fusemountfd.c). The replies are written to /dev/fuse from here, as each answer comes, so
 * any number of requests are in flight at once. The helper also unmounts.
 */
export interface FuseMountOptions {
  /** the mount's id: every ask's channel request starts with it */
  readonly id: string
  /** where the mount appears: an absolute path, made (an empty file or directory) when missing */
  readonly target: string
  readonly kind: "file" | "directory"
  /**
   * one ask: REQUEST is the whole channel request (tag 16, the id, the op); resolves with the
   * client's first answer on that channel, or undefined for a finish with none (EIO to the kernel)
   */
  readonly ask: (request: Buffer) => Promise<Buffer | undefined>
  /** the helper; by default `fuseHelperPath()` */
  readonly helper?: string
}

export interface FuseMount {
  readonly target: string
  /** resolves once the kernel ended the connection: unmounted, by us or by anyone */
  readonly ended: Promise<void>
  /** requests being answered now */
  readonly inFlight: () => number
  /**
   * unmounts, lazily: gone from the tree at once; resolves once the kernel ended the connection,
   * which is at once, or, while a program still holds a file of the mount open, once it closes it
   */
  readonly unmount: () => Promise<void>
}

/** the mount's ask over a mount scope of the container-proxy layer: one channel per ask */
export const askOnScope =
  (scope: Scope) =>
  (request: Buffer): Promise<Buffer | undefined> =>
    scope.openChannel(request).responses.take()

/**
 * Where the helper is: beside the running bundle (a proxy kit, dist/), or dist/fusemountfd of the
 * checkout when run from source.
 */
export const fuseHelperPath = (): string => {
  if (typeof OCX2_BUNDLED !== "undefined") {
    const program = process.argv[1]
    if (program !== undefined) return Path.join(Path.dirname(Fs.realpathSync(program)), "fusemountfd")
  }
  return fileURLToPath(new URL("../../../dist/fusemountfd", import.meta.url))
}

export class FuseMountError extends Error {}

const run = (helper: string, args: ReadonlyArray<string>, fd?: number): Promise<string | undefined> =>
  new Promise((resolve) => {
    const child = spawn(helper, args, { stdio: ["ignore", "ignore", "pipe", ...(fd === undefined ? [] : [fd])] })
    let stderr = ""
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString("utf8")))
    child.on("error", (e) => resolve(`${helper}: ${e.message}`))
    child.on("close", (code) => resolve(code === 0 ? undefined : stderr.trim() || `${helper} ended with status ${code}`))
  })

/** the target as the kind needs it: made when missing, refused when it is the other kind */
const prepareTarget = (target: string, kind: "file" | "directory"): void => {
  if (!Path.isAbsolute(target)) throw new FuseMountError(`the mount target ${JSON.stringify(target)} is not an absolute path`)
  let stat: Fs.Stats | undefined
  try {
    stat = Fs.statSync(target)
  } catch {
    Fs.mkdirSync(kind === "directory" ? target : Path.dirname(target), { recursive: true })
    if (kind === "file") Fs.closeSync(Fs.openSync(target, "a"))
    return
  }
  if (kind === "directory" && !stat.isDirectory()) throw new FuseMountError(`the directory mount's target ${target} is not a directory`)
  if (kind === "file" && stat.isDirectory()) throw new FuseMountError(`the file mount's target ${target} is a directory`)
}

export const mountFuse = async (options: FuseMountOptions): Promise<FuseMount> => {
  const helper = options.helper ?? fuseHelperPath()
  const target = options.target
  prepareTarget(target, options.kind)
  let fd: number
  try {
    fd = Fs.openSync("/dev/fuse", "r+")
  } catch (e) {
    throw new FuseMountError(`the ${options.kind} mount at ${target} was not made: /dev/fuse: ${e instanceof Error ? e.message : String(e)}`)
  }
  const prefix = askPrefix(options.id)
  const session = new Session({
    ask: async (ask) => {
      try {
        return decodeAnswer(await options.ask(encodeAsk(prefix, ask)))
      } catch {
        return { ok: false, errno: Errno.EIO }
      }
    },
    write: (reply) => {
      try {
        Fs.writeSync(fd, reply)
      } catch {
        // ENOENT: the kernel took the request back (interrupted); ENODEV: the mount is gone
      }
    },
    destroyed: () => {}
  })
  // the helper mounts, then copies each request to its stdout until the mount ends (fusemountfd.c)
  const relay = spawn(helper, ["mount", target, options.kind === "file" ? "100000" : "40000"], {
    stdio: ["ignore", "pipe", "pipe", fd]
  })
  let stderr = ""
  relay.stderr!.on("data", (d: Buffer) => (stderr += d.toString("utf8")))
  let mounted!: (problem: string | undefined) => void
  const made = new Promise<string | undefined>((resolve) => (mounted = resolve))
  const requests = new Requests((request) => {
    // the first request is INIT, sent by the kernel once mount(2) succeeded
    mounted(undefined)
    session.receive(request)
  })
  relay.stdout!.on("data", (chunk: Buffer) => requests.push(chunk))
  let isEnded = false
  const ended = new Promise<void>((resolve) => {
    const end = (problem: string) => {
      mounted(problem)
      if (isEnded) return
      isEnded = true
      Fs.closeSync(fd)
      resolve()
    }
    relay.on("error", (e) => end(`${helper}: ${e.message}`))
    relay.on("close", (code) => end(stderr.trim() || `${helper} ended with status ${code}`))
  })
  // a mount does not keep its process alive: what the process serves it by does
  relay.unref()
  ;(relay.stdout as unknown as { unref?: () => void }).unref?.()
  ;(relay.stderr as unknown as { unref?: () => void }).unref?.()
  const problem = await made
  if (problem !== undefined) throw new FuseMountError(`the ${options.kind} mount at ${target} was not made: ${problem}`)
  return {
    target,
    ended,
    inFlight: () => session.inFlight,
    unmount: async () => {
      if (isEnded) return
      const failed = await run(helper, ["unmount", target])
      if (failed !== undefined && !isEnded) throw new FuseMountError(`the mount at ${target} was not unmounted: ${failed}`)
      await ended
    }
  }
}

/**
 * Lazily unmounts TARGET: a mount whose serving process is gone stays in the tree, answering
 * "transport endpoint is not connected", until it is unmounted (a host's sweep, a teardown).
 */
export const unmountStale = async (target: string, helper: string = fuseHelperPath()): Promise<void> => {
  const failed = await run(helper, ["unmount", target])
  if (failed !== undefined) throw new FuseMountError(`the mount at ${target} was not unmounted: ${failed}`)
}
