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
import { DeployError, Deployer, type DeploySpec, type Deployment } from "../services/Deployer.js"
import { exited } from "../src/containers/deploy/Exec.js"
import { imageLaunch } from "../src/containers/deploy/ImageLaunch.js"
import {
  cgroupPrefix, containersDir, diskFile, freeContainer, socketFile, sweepContainers, writeRecord
} from "../src/containers/deploy/Leftovers.js"
import { mountDisk, mountOverlay } from "../src/containers/deploy/Mounts.js"
import { proxyKit } from "../src/containers/deploy/ProxyKit.js"
import { sandboxArgs } from "../src/containers/deploy/SandboxArgs.js"
import { encodeLaunch, proxyPort } from "../src/containers/proxy/Launch.js"
import { ByteTail } from "../src/sandbox/ByteTail.js"
import { LaunchCgroups } from "../src/sandbox/cgroups.js"

export interface BwrapDeployerOptions {
  /** the server's ROOT: containers live in ROOT/containers, the proxy kit in ROOT/proxy-kit */
  readonly root: string
  /** the bundled proxy (dist/ocx2-container-proxy.mjs) and relay (dist/ocx2-container-relay.mjs) */
  readonly proxyBundle: string
  readonly relayBundle: string
  /** the most processes a container may have at once (its pids cgroup) */
  readonly pidsMax?: number
  readonly bwrap?: string
  /** where what a container's proxy and program print goes, its last part, when it ends before its proxy was reached */
  readonly log?: (line: string) => void
}

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

  const deploy = async (spec: DeploySpec): Promise<Deployment> => {
    const plan = imageLaunch(spec.image)
    if (typeof plan === "string") throw new Error(plan)
    kit ??= proxyKit(options.root, options.proxyBundle)
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
    const tail = new ByteTail(16 * 1024)
    let stopping: Promise<void> | undefined
    const stop = (): Promise<void> =>
      (stopping ??= (async () => {
        if (cgroups !== undefined) cgroups.killAll()
        if (sandbox?.pid !== undefined) {
          try {
            process.kill(sandbox.pid, "SIGKILL")
          } catch {
            // gone
          }
          await exited(sandbox)
        }
        if (relay !== undefined) {
          relay.kill("SIGKILL")
          await exited(relay)
        }
        const problems = await freeContainer(dir)
        for (const p of problems) log(`ocx2-containers: a container's leftovers, for the next start to free: ${p}`)
      })())

    try {
      writeRecord(dir, { cgroups: [] })
      await mountDisk(diskFile(dir), spec.disk, Path.join(dir, "disk"))
      await mountOverlay(plan.rootfs, Path.join(dir, "disk"), Path.join(dir, "merged"))
      cgroups = LaunchCgroups.make(`${cgroupPrefix(options.root)}${name}`, { pids: true, pidsMax: options.pidsMax ?? 1024, memoryBytes: spec.memory })
      writeRecord(dir, { cgroups: cgroups.dirs() })
      const launchFile = Path.join(dir, "launch.json")
      Fs.writeFileSync(launchFile, encodeLaunch(plan.launch), { mode: 0o444 })
      const args = sandboxArgs({
        merged: Path.join(dir, "merged"),
        kit: kit.dir,
        launchFile,
        memoryEvents: memoryEventsOf(cgroups.dirs()),
        mounts: spec.mounts,
        fuse: Fs.existsSync("/dev/fuse"),
        command: kit.command,
        infoFd: 3
      })
      sandbox = ChildProcess.spawn("/bin/sh", ["-c", wrapper, "ocx2-container", ...cgroups.procsFiles(), "--", options.bwrap ?? "bwrap", ...args], {
        env: wrapperEnv,
        cwd: "/",
        stdio: ["ignore", "pipe", "pipe", "pipe"]
      })
      sandbox.stdout!.on("data", (d: Buffer) => tail.push(d))
      sandbox.stderr!.on("data", (d: Buffer) => tail.push(d))
      const childPid = await readInfo(sandbox.stdio[3] as NodeJS.ReadableStream)
      if (childPid === undefined) {
        await exited(sandbox)
        throw new Error(`the sandbox did not start: ${Buffer.from(tail.bytes()).toString("utf8").trim() || `exit status ${sandbox.exitCode}`}`)
      }
      const socket = socketFile(dir)
      relay = ChildProcess.spawn("nsenter", [`--net=/proc/${childPid}/ns/net`, "--", process.execPath, options.relayBundle, socket, String(proxyPort)], {
        env: wrapperEnv,
        cwd: "/",
        // its standard input ends when this server does, and so does the relay
        stdio: ["pipe", "pipe", "pipe"]
      })
      relay.stderr!.on("data", (d: Buffer) => tail.push(d))
      // a relay gone already does not take the word that its container is gone
      relay.stdin!.on("error", () => {})
      writeRecord(dir, { cgroups: cgroups.dirs(), ...(relay.pid !== undefined ? { relayPid: relay.pid } : {}) })
      // the relay listening: the server's one dial is accepted at once, and waits for the proxy
      let reached = false
      const listening = new Promise<boolean>((resolve) => {
        let out = ""
        relay!.stdout!.on("data", (d: Buffer) => {
          out += d.toString()
          if (out.includes("listening\n")) resolve(true)
          if (out.includes("reached\n")) reached = true
        })
        relay!.once("exit", () => resolve(false))
      })
      // a container that ends before its proxy was reached: the relay turns the dial away
      void exited(sandbox).then(() => {
        if (stopping !== undefined) return
        log(`ocx2-containers: a container ended: ${Buffer.from(tail.bytes()).toString("utf8").trim()}`)
        if (!reached) relay?.stdin?.write("gone\n")
      })
      if (!(await listening)) {
        throw new Error(`the relay to the container's proxy did not start: ${Buffer.from(tail.bytes()).toString("utf8").trim()}`)
      }
      return {
        proxyUrl: `ws+unix:${socket}:/`,
        stop: Effect.promise(stop)
      }
    } catch (e) {
      await stop()
      throw e
    }
  }

  return Deployer.of({
    deploy: (spec) =>
      Effect.tryPromise({
        try: () => deploy(spec),
        catch: (e) => new DeployError({ message: e instanceof Error ? e.message : String(e) })
      })
  })
}

/** frees what a server killed earlier left under ROOT; then the deployer */
export const layer = (options: BwrapDeployerOptions) =>
  Layer.effect(
    Deployer,
    Effect.promise(async () => {
      const { swept, problems } = await sweepContainers(options.root)
      const log = options.log ?? ((line: string) => process.stderr.write(line + "\n"))
      if (swept > 0) log(`ocx2-containers: freed what ${swept} container(s) of an earlier server left`)
      for (const p of problems) log(`ocx2-containers: could not free: ${p}`)
      return make(options)
    })
  )
