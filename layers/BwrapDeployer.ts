/**
 * The live Deployer (`ocx2-containers serve --deployer bwrap`): each container is bubblewrap over
 * an overlay of the image's unpacked rootfs, its writable layer a loop-mounted ext4 file of `disk`
 * bytes, its memory and processes bounded by cgroups nested under the server's own, the proxy kit
 * bound read-only at /.proxy and the proxy started as the sandbox's command, and port 14979 of its
 * network namespace reached through a Unix-socket relay (docs/containers.md section 12). Every
 * process, mount, loop device and cgroup a container holds is freed by its stop, and, should the
 * server be killed, by the sweep of its next start (src/containers/deploy/Leftovers.ts).
 */
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { DeployError, Deployer, type DeploySpec, type Deployment, type ResolvedMount } from "../services/Deployer.js"
import { exec, exited } from "../src/containers/deploy/Exec.js"
import { imageLaunch } from "../src/containers/deploy/ImageLaunch.js"
import {
  cgroupPrefix, containersDir, diskFile, freeContainer, socketFile, sweepContainers, writeRecord
} from "../src/containers/deploy/Leftovers.js"
import { DiskPool } from "../src/containers/deploy/DiskPool.js"
import { mountDiskAndOverlay, mountStaging } from "../src/containers/deploy/Mounts.js"
import { proxyKit, volumesMount, type ProxyKit } from "../src/containers/deploy/ProxyKit.js"
import { sandboxArgs } from "../src/containers/deploy/SandboxArgs.js"
import { readShapes, shapesFile, SparePool, type SpareShape } from "../src/containers/deploy/SparePool.js"
import { holdUserNamespace, type HeldNamespace } from "../src/containers/deploy/UserNamespace.js"
import type { WithProgramOutput } from "../src/containers/ProgramOutput.js"
import { encodeLaunch, proxyPort, type Launch } from "../src/containers/proxy/Launch.js"
import { ByteTail } from "../src/sandbox/ByteTail.js"
import { LaunchCgroups } from "../src/sandbox/Cgroups.js"

export interface BwrapDeployerOptions {
  /** the server's ROOT: containers live in ROOT/containers, the proxy kit in ROOT/proxy-kit */
  readonly root: string
  /** the bundled proxy (dist/ocx2-container-proxy.mjs) */
  readonly proxyBundle: string
  /** the static relay (dist/ocx2-container-relay, src/containers/deploy/relay.c) */
  readonly relayProgram: string
  /** the static binder of a taken spare's volumes (src/containers/deploy/volumes.c); default: beside the relay */
  readonly volumesProgram?: string
  /** the static maker of a container's disk and overlay mounts (src/containers/deploy/mounts.c); default: beside the relay */
  readonly mountsProgram?: string
  /** the most processes a container may have at once (its pids cgroup) */
  readonly pidsMax?: number
  readonly bwrap?: string
  /** where what a container's proxy and program print goes, its last part, when it ends before its proxy was reached */
  readonly log?: (line: string) => void
  /** told each step of a deploy as it completes (bench/containers-deploy prints where the time goes) */
  readonly trace?: (step: string) => void
  /**
   * how many shapes (identity, image, disk) of the most recent deploys keep a spare container
   * stood up ahead (src/containers/deploy/SparePool.ts); 0: none (bench/containers-deploy measures
   * both). Default: `defaultSpares`.
   */
  readonly spares?: number
  /** for how many of the disk sizes most recently asked for an empty disk is made ahead (DiskPool.ts); default 3, 0: none */
  readonly disksAhead?: number
}

/** each spare is a proxy (the C proxy, its program not started) and a relay waiting: a few, for a small machine */
export const defaultSpares = 3

const wrapperEnv = { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" }
// joins each cgroup named before "--", then becomes bwrap: the container is counted from its first instruction
const wrapper = 'while [ "$1" != "--" ]; do echo "$$" > "$1" || exit 125; shift; done; shift; exec "$@"'

const readInfo = (stream: NodeJS.ReadableStream): Promise<number | undefined> =>
  new Promise((resolve) => {
    let text = ""
    const done = () => {
      const m = /"child-pid"\s*:\s*(\d+)/.exec(text)
      resolve(m === null ? undefined : Number(m[1]))
    }
    stream.on("data", (d: Buffer) => {
      text += d.toString()
      if (/"child-pid"\s*:\s*\d+\s*[,}]/.test(text)) done()
    })
    stream.once("end", done)
    stream.once("close", done)
  })

/** a container stood up: its sandbox made and the relay to its proxy listening */
interface Standing {
  readonly socket: string
  readonly stop: () => Promise<void>
  /** its sandbox and relay still running */
  readonly alive: () => boolean
  /** a spare taken by a deploy: no longer written down as a spare */
  readonly taken: () => void
  /** sets its memory limit (a spare's, as it is taken); why it could not be, or undefined */
  readonly setMemory: (bytes: number) => string | undefined
  /** binds the volumes into a spare's sandbox as it is taken (before its program starts); why it could not, or undefined */
  readonly bindVolumes: (mounts: ReadonlyArray<ResolvedMount>) => Promise<string | undefined>
  /** calls F once the relay reached the proxy (at once when it did) */
  readonly whenReached: (f: () => void) => void
  /** the program's stdout and stderr: the read ends of the pipes the proxy hands it (launch's output) */
  readonly output: { readonly stdout: NodeJS.ReadableStream; readonly stderr: NodeJS.ReadableStream }
}

/**
 * Where the sandbox gets the pipes of its program's stdout and stderr, and so the proxy (the
 * launch file names them): past the info descriptor (3) and the user namespace's (4).
 */
const programOutputFds = { stdout: 5, stderr: 6 } as const

const readQuietly = (file: string | undefined): string => {
  try {
    return file === undefined ? "" : Fs.readFileSync(file, "utf8")
  } catch {
    return ""
  }
}

const outputPipe = (sandbox: ChildProcess.ChildProcess, fd: number): NodeJS.ReadableStream => (sandbox.stdio as ReadonlyArray<unknown>)[fd] as NodeJS.ReadableStream

/** the memory cgroup's file counting the kernel's out-of-memory kills (v1 memory.oom_control, v2 memory.events) */
const memoryEventsOf = (groups: ReadonlyArray<string>): string | undefined => {
  for (const g of groups) {
    for (const f of ["memory.oom_control", "memory.events"]) if (Fs.existsSync(Path.join(g, f))) return Path.join(g, f)
  }
  return undefined
}

export const make = (options: BwrapDeployerOptions) => {
  const top = containersDir(options.root)
  let kit: ReturnType<typeof proxyKit> | undefined
  const log = options.log ?? ((line: string) => process.stderr.write(line + "\n"))
  const trace = options.trace ?? (() => {})
  const volumesProgram = options.volumesProgram ?? Path.join(Path.dirname(options.relayProgram), "ocx2-container-volumes")
  const mountsProgram = options.mountsProgram ?? Path.join(Path.dirname(options.relayProgram), "ocx2-container-mounts")
  // an empty disk of each size recently asked for, made ahead: a deploy from nothing runs no mkfs
  const disks = new DiskPool(Path.join(options.root, "disks"), options.disksAhead ?? 3, log)

  /** a container stood up to the relay listening; its proxy not dialled yet */
  const standUp = async (
    plan: { readonly rootfs: string; readonly launch: Launch },
    spec: Pick<DeploySpec, "memory" | "disk" | "mounts">,
    kit: ProxyKit,
    trace: (step: string) => void,
    spare: boolean
  ): Promise<Standing> => {
    Fs.mkdirSync(top, { recursive: true })
    const name = Crypto.randomBytes(8).toString("hex")
    const dir = Path.join(top, name)
    Fs.mkdirSync(dir, { mode: 0o700 })
    if (Buffer.byteLength(socketFile(dir)) > 107) {
      Fs.rmSync(dir, { recursive: true })
      throw new Error(`the proxy's socket ${socketFile(dir)} is longer than a Unix socket's path may be: choose a shorter ROOT`)
    }
    let cgroups: LaunchCgroups | undefined
    let sandbox: ChildProcess.ChildProcess | undefined
    let relay: ChildProcess.ChildProcess | undefined
    let userns: HeldNamespace | undefined
    const tail = new ByteTail(16 * 1024)
    let stopping: Promise<void> | undefined
    const stop = (): Promise<void> =>
      (stopping ??= (async () => {
        await userns?.release()
        if (cgroups !== undefined) cgroups.killAll()
        if (sandbox?.pid !== undefined) {
          try {
            process.kill(sandbox.pid, "SIGKILL")
          } catch {
            // gone
          }
          await exited(sandbox)
          // output pipes nobody kept (a spare's, a run that ended first) read to their end, so they close
          for (const fd of [programOutputFds.stdout, programOutputFds.stderr]) {
            const pipe = outputPipe(sandbox, fd) as NodeJS.ReadableStream & { readableFlowing?: boolean | null }
            if (pipe !== undefined && pipe !== null && pipe.readableFlowing !== true) pipe.resume()
          }
        }
        if (relay !== undefined) {
          relay.kill("SIGKILL")
          await exited(relay)
        }
        const problems = await freeContainer(dir)
        for (const p of problems) log(`ocx2-containers: a container's leftovers, for the next start to free: ${p}`)
      })())

    const record = () => ({
      cgroups: cgroups?.dirs() ?? [],
      ...(relay?.pid !== undefined ? { relayPid: relay.pid } : {}),
      ...(spare ? { spare: true } : {})
    })
    try {
      writeRecord(dir, record())
      const paths = { file: diskFile(dir), disk: Path.join(dir, "disk"), lower: plan.rootfs, merged: Path.join(dir, "merged") }
      await mountDiskAndOverlay(mountsProgram, paths, spec.disk, trace, disks.take(spec.disk))
      // a spare's volumes are not known yet: they come through its staging mount as it is taken
      const staging = spare ? Path.join(dir, "volumes") : undefined
      if (staging !== undefined) await mountStaging(staging)
      cgroups = LaunchCgroups.make(`${cgroupPrefix(options.root)}${name}`, { pids: true, pidsMax: options.pidsMax ?? 1024, memoryBytes: spec.memory })
      trace("cgroups made")
      writeRecord(dir, record())
      // an image's User other than root: a namespace that maps it, held until the sandbox joins it
      if (plan.launch.user !== undefined) userns = await holdUserNamespace()
      const launchFile = Path.join(dir, "launch.json")
      Fs.writeFileSync(launchFile, encodeLaunch({ ...plan.launch, output: programOutputFds }), { mode: 0o444 })
      const args = sandboxArgs({
        merged: Path.join(dir, "merged"),
        kit: kit.dir,
        launchFile,
        memoryEvents: memoryEventsOf(cgroups.dirs()),
        mounts: spec.mounts,
        ...(staging !== undefined ? { staging } : {}),
        fuse: Fs.existsSync("/dev/fuse"),
        command: kit.command,
        infoFd: 3,
        ...(userns !== undefined ? { userns: 4 } : {})
      })
      sandbox = ChildProcess.spawn("/bin/sh", ["-c", wrapper, "ocx2-container", ...cgroups.procsFiles(), "--", options.bwrap ?? "bwrap", ...args], {
        env: wrapperEnv,
        cwd: "/",
        // the program's output pipes at 5 and 6 (programOutputFds), kept by the server (docs/containers.md section 11)
        stdio: ["ignore", "pipe", "pipe", "pipe", userns === undefined ? "ignore" : userns.fd, "pipe", "pipe"]
      })
      sandbox.stdout!.on("data", (d: Buffer) => tail.push(d))
      sandbox.stderr!.on("data", (d: Buffer) => tail.push(d))
      const childPid = await readInfo(sandbox.stdio[3] as NodeJS.ReadableStream)
      await userns?.release()
      trace("sandbox made")
      if (childPid === undefined) {
        await exited(sandbox)
        const oom = Number(/oom_kill (\d+)/.exec(readQuietly(memoryEventsOf(cgroups.dirs())))?.[1] ?? 0) > 0 ? ", out of memory" : ""
        const how = sandbox.exitCode !== null ? `exit status ${sandbox.exitCode}` : `killed by ${sandbox.signalCode}${oom}`
        throw new Error(`the sandbox did not start: ${Buffer.from(tail.bytes()).toString("utf8").trim() || how}`)
      }
      const socket = socketFile(dir)
      relay = ChildProcess.spawn(options.relayProgram, [`/proc/${childPid}/ns/net`, socket, String(proxyPort)], {
        env: wrapperEnv,
        cwd: "/",
        // its standard input ends when this server does, and so does the relay
        stdio: ["pipe", "pipe", "pipe"]
      })
      trace("relay started")
      relay.stderr!.on("data", (d: Buffer) => tail.push(d))
      // a relay gone already does not take the word that its container is gone
      relay.stdin!.on("error", () => {})
      writeRecord(dir, record())
      // the relay listening: the server's one dial is accepted at once, and waits for the proxy
      let reached = false
      const onReached: Array<() => void> = []
      let listened = false
      const listening = new Promise<boolean>((resolve) => {
        let out = ""
        relay!.stdout!.on("data", (d: Buffer) => {
          out += d.toString()
          if (out.includes("listening\n") && !listened) (trace("relay listening"), (listened = true), resolve(true))
          if (out.includes("reached\n") && !reached) {
            trace("proxy reached")
            reached = true
            for (const f of onReached.splice(0)) f()
          }
        })
        // "close", not "exit": why it could not start is still in its stderr pipe when it exits
        relay!.once("close", () => resolve(false))
      })
      // a container that ends before its proxy was reached: the relay turns the dial away
      void exited(sandbox).then(() => {
        if (stopping !== undefined) return
        log(`ocx2-containers: a container ended: ${Buffer.from(tail.bytes()).toString("utf8").trim()}`)
        if (!reached) relay?.stdin?.write("gone\n")
      })
      if (!(await listening)) {
        throw new Error(`the relay to the container's proxy did not start: ${Buffer.from(tail.bytes()).toString("utf8").trim() || `exit status ${relay.exitCode ?? relay.signalCode}`}`)
      }
      return {
        socket,
        stop,
        alive: () => sandbox?.exitCode === null && sandbox.signalCode === null && relay?.exitCode === null && relay.signalCode === null,
        taken: () => {
          spare = false
          writeRecord(dir, record())
        },
        setMemory: (bytes) => cgroups!.setMemory(bytes),
        bindVolumes: async (mounts) => {
          if (staging === undefined) return "it has no staging mount"
          const args = mounts.flatMap((m) => [m.readOnly ? "ro" : "rw", m.hostPath, m.containerPath])
          return exec(volumesProgram, [String(childPid), staging, volumesMount, ...args]).then(() => undefined, (e: Error) => e.message)
        },
        whenReached: (f) => (reached ? f() : void onReached.push(f)),
        output: { stdout: outputPipe(sandbox, programOutputFds.stdout), stderr: outputPipe(sandbox, programOutputFds.stderr) }
      }
    } catch (e) {
      await stop()
      throw e
    }
  }

  /**
   * The spares: after a deploy, once its proxy was reached (so
   * that the spare does not compete with its start), the next container of the same identity,
   * image and disk is stood up ahead, for the few shapes most recently deployed (SparePool.ts).
   * The next such deploy takes it, sets its memory limit and binds its volumes through the
   * spare's staging mount (deploy/volumes.c); its proxy is listening already, and
   * starts the image's program only once the server's WebSocket comes, as it always does. A
   * spare is a container like any other under ROOT/containers (record.json says "spare"), so the
   * sweep frees it after a kill; the shapes are kept in ROOT/spares.json, and a server started
   * again stands their spares up before any request.
   */
  const spares = new SparePool<Standing>({
    max: options.spares ?? defaultSpares,
    file: shapesFile(options.root),
    standUp: (shape) => {
      kit ??= proxyKit(options.root, options.proxyBundle, process.execPath, options.bwrap)
      return standUp({ rootfs: shape.rootfs, launch: shape.launch }, { memory: shape.memory, disk: shape.disk, mounts: [] }, kit, () => {}, true)
    },
    onReady: () => trace("spare ready")
  })

  const deploy = async (spec: DeploySpec): Promise<Deployment> => {
    trace("deploy begun")
    const plan = imageLaunch(spec.image)
    if (typeof plan === "string") throw new Error(plan)
    kit ??= proxyKit(options.root, options.proxyBundle, process.execPath, options.bwrap)
    // the volumes are no part of the shape: a spare has them bound as it is taken
    const shape: SpareShape = { identity: spec.identity, digest: spec.image.digest, disk: spec.disk, memory: spec.memory, rootfs: plan.rootfs, launch: plan.launch }
    let taken = await spares.take(shape)
    if (taken !== undefined) {
      const why = taken.setMemory(spec.memory) ?? (spec.mounts.length > 0 ? await taken.bindVolumes(spec.mounts) : undefined)
      if (why === undefined) {
        taken.taken()
        trace("spare taken")
      } else {
        trace(`spare not taken: ${why}`)
        log(`ocx2-containers: a spare was not taken, the container is deployed from nothing: ${why}`)
        await taken.stop()
        taken = undefined
      }
    }
    const standing = taken ?? (await standUp(plan, spec, kit, trace, false))
    standing.whenReached(() => {
      spares.used(shape)
      disks.want(spec.disk)
    })
    // the program's output beside the Deployment's fields: the server keeps it (src/containers/ProgramOutput.ts)
    const deployment: Deployment & WithProgramOutput = { proxyUrl: `ws+unix:${standing.socket}:/`, stop: Effect.promise(standing.stop), output: standing.output }
    return deployment
  }

  return {
    restore: (shapes: ReadonlyArray<SpareShape>) => spares.restore(shapes),
    service: Deployer.of({
      close: Effect.promise(async () => {
        await spares.close()
        await disks.close()
      }),
      deploy: (spec) =>
        Effect.tryPromise({
          try: () => deploy(spec),
          catch: (e) => new DeployError({ message: e instanceof Error ? e.message : String(e) })
        })
    })
  }
}

/** frees what a server killed earlier left under ROOT; then the deployer, which stands the spares of the last shapes up again */
export const layer = (options: BwrapDeployerOptions) =>
  Layer.effect(
    Deployer,
    Effect.promise(async () => {
      const { swept, problems } = await sweepContainers(options.root)
      const log = options.log ?? ((line: string) => process.stderr.write(line + "\n"))
      if (swept > 0) log(`ocx2-containers: freed what ${swept} container(s) of an earlier server left`)
      for (const p of problems) log(`ocx2-containers: could not free: ${p}`)
      const made = make(options)
      made.restore(readShapes(shapesFile(options.root)))
      return made.service
    })
  )
