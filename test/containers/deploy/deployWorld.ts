import * as ChildProcess from "node:child_process"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, afterEach, beforeAll, expect } from "vitest"
import * as BwrapDeployer from "../../../layers/BwrapDeployer.js"
import { ImageSource, type ObtainedImage } from "../../../services/ImageSource.js"
import { connect, type ContainersClient } from "../../../src/containers/Client.js"
import { sha256 } from "../../../src/containers/OciImage.js"
import { makeServerParts } from "../../../src/containers/Parts.js"
import { mintToken, startContainersServer, type ContainersServer } from "../../../src/containers/Server.js"
import type { UnpackedImage } from "../../../src/containers/deploy/ImageLaunch.js"
import { cgroupPrefix } from "../../../src/containers/deploy/Leftovers.js"
import { mountsUnder } from "../../../src/containers/deploy/Mounts.js"
import { ownCgroupDir } from "../../../src/sandbox/Cgroups.js"
import { bundleProgram } from "../../support/bundleProgram.js"

/**
 * The real thing for the deploy tests: the server with the bubblewrap deployer (as root), each
 * test its own ROOT, images the server holds whose rootfs is Debian's busybox-static (built here
 * until the image store unpacks images itself), and a look at what a ROOT left on the host.
 */
export const dist = Path.resolve(import.meta.dirname, "../../../dist")

/** a rootfs of busybox and its applets, nothing else: no libc, no Node */
export const busyboxRootfs = (dir: string): string => {
  const rootfs = Path.join(dir, "rootfs")
  for (const d of ["bin", "tmp", "etc", "proc", "dev", "root"]) Fs.mkdirSync(Path.join(rootfs, d), { recursive: true })
  Fs.chmodSync(Path.join(rootfs, "tmp"), 0o1777)
  Fs.copyFileSync("/bin/busybox", Path.join(rootfs, "bin", "busybox"))
  Fs.chmodSync(Path.join(rootfs, "bin", "busybox"), 0o755)
  const list = ChildProcess.spawnSync("/bin/busybox", ["--list"], { encoding: "utf8" }).stdout.split("\n").filter((a) => a !== "" && a !== "busybox")
  for (const applet of list) Fs.symlinkSync("busybox", Path.join(rootfs, "bin", applet))
  Fs.writeFileSync(Path.join(rootfs, "etc", "passwd"), "root:x:0:0:root:/root:/bin/sh\napp:x:1234:2345:an image's user:/tmp:/bin/sh\n")
  Fs.writeFileSync(Path.join(rootfs, "etc", "group"), "root:x:0:\nstaff:x:3456:app\n")
  Fs.writeFileSync(Path.join(rootfs, "etc", "motd"), "from the image\n")
  return rootfs
}

export interface TestImage extends UnpackedImage {
  /** the Labels of its config */
  readonly labels?: Record<string, string>
}

/** an image the server holds: a config of its own (so its own digest), the rootfs given */
export const obtained = (image: TestImage): ObtainedImage & UnpackedImage => {
  const config = Buffer.from(JSON.stringify({ architecture: "amd64", os: "linux", config: { Labels: image.labels ?? {}, Env: image.env, Entrypoint: image.entrypoint, Cmd: image.cmd, ...(image.user !== undefined ? { User: image.user } : {}) }, rootfs: { type: "layers", diff_ids: [] } }))
  const manifest = Buffer.from(JSON.stringify({ schemaVersion: 2, config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: sha256(config), size: config.length }, layers: [] }))
  return {
    digest: sha256(manifest),
    manifest,
    config,
    layers: [],
    blob: () => Effect.succeed(config),
    rootfs: image.rootfs,
    entrypoint: image.entrypoint,
    cmd: image.cmd,
    env: image.env,
    workingDir: image.workingDir,
    ...(image.user !== undefined ? { user: image.user } : {})
  }
}

export const heldImages = (images: ReadonlyArray<ObtainedImage>) =>
  Layer.succeed(ImageSource, ImageSource.of({
    willSupply: () => Effect.succeed(true),
    obtain: (_identity, digest) => {
      const image = images.find((i) => i.digest === digest)
      return image === undefined ? Effect.die(new Error(`the test holds no image ${digest}`)) : Effect.succeed(image)
    }
  }))

export interface DeployWorld {
  readonly root: string
  readonly server: ContainersServer
  readonly url: string
  readonly client: () => Promise<ContainersClient>
  readonly close: () => Promise<void>
}

/** the URL a server program prints once it listens; its end before that is an error */
export const listeningUrl = (server: ChildProcess.ChildProcess): Promise<string> =>
  new Promise((resolve, reject) => {
    let out = ""
    server.stdout!.on("data", (d: Buffer) => {
      out += d.toString()
      const m = /listening on (\S+)\n/.exec(out)
      if (m !== null) resolve(m[1]!)
    })
    server.once("exit", (code) => reject(new Error(`the server ended (${code}) before it listened`)))
  })

export const tempDir = (what: string) => Fs.mkdtempSync(Path.join(Os.tmpdir(), `ocx2-${what}-`))

/** `programs`: where the bundled proxy and relay are (dist/) */
export const makeDeployWorld = async (
  root: string,
  images: ReadonlyArray<ObtainedImage>,
  programs = dist,
  more: Partial<BwrapDeployer.BwrapDeployerOptions> = {}
): Promise<DeployWorld> => {
  const bundles = { proxyBundle: Path.join(programs, "ocx2-container-proxy.mjs"), relayProgram: Path.join(programs, "ocx2-container-relay") }
  const parts = await Effect.runPromise(
    makeServerParts(root).pipe(Effect.provide(Layer.merge(BwrapDeployer.layer({ root, ...bundles, ...more }), heldImages(images))))
  )
  const server = await startContainersServer({ root, parts })
  const url = `ws://127.0.0.1:${server.port}`
  const token = mintToken(root, "alice")
  const clients: Array<ContainersClient> = []
  return {
    root,
    server,
    url,
    client: async () => {
      const c = await connect(url, token)
      clients.push(c)
      return c
    },
    close: async () => {
      for (const c of clients) c.close()
      await server.close()
    }
  }
}

/** the containers under ROOT, each with whether it is a spare the deployer stood up ahead (record.json) */
export const containersUnder = (root: string): ReadonlyArray<{ readonly name: string; readonly spare: boolean; readonly relayPid: number | undefined }> => {
  const top = Path.join(root, "containers")
  if (!Fs.existsSync(top)) return []
  return Fs.readdirSync(top).map((name) => {
    let record: { spare?: boolean; relayPid?: number } = {}
    try {
      record = JSON.parse(Fs.readFileSync(Path.join(top, name, "record.json"), "utf8")) as typeof record
    } catch {
      // being written
    }
    return { name, spare: record.spare === true, relayPid: record.relayPid }
  })
}

/**
 * The mounts of ROOT's volumes in every mount namespace on the host (a container's binds them
 * where the host's table does not show them): by the root of each mount, which names the volume's
 * directory.
 */
export const volumeMounts = (root: string): ReadonlyArray<string> => {
  // a mount's root is a path inside its file system: ROOT/volumes/ as its file system names it
  const volumes = Fs.realpathSync(root) + "/volumes"
  const dev = Fs.statSync(root).dev
  let mark = volumes + "/"
  let longest = -1
  for (const line of Fs.readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const [, , numbers, within, point] = line.split(" ")
    if (numbers === undefined || within === undefined || point === undefined) continue
    const [major, minor] = numbers.split(":").map(Number)
    // the device number as stat(2) gives it (glibc's makedev)
    if ((((major! & 0xfff) << 8) | (minor! & 0xff) | ((minor! & ~0xff) << 12)) !== dev) continue
    if ((volumes === point || volumes.startsWith(point === "/" ? "/" : point + "/")) && point.length > longest) {
      longest = point.length
      mark = Path.join(within, Path.relative(point, volumes)) + "/"
    }
  }
  const found: Array<string> = []
  const namespaces = new Set<string>()
  for (const pid of Fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      const namespace = Fs.readlinkSync(`/proc/${pid}/ns/mnt`)
      if (namespaces.has(namespace)) continue
      namespaces.add(namespace)
      for (const line of Fs.readFileSync(`/proc/${pid}/mountinfo`, "utf8").split("\n")) {
        const [, , , mounted, point] = line.split(" ")
        if (mounted?.includes(mark)) found.push(`volume mount ${mounted} at ${point} in ${namespace} (process ${pid})`)
      }
    } catch {
      // gone meanwhile
    }
  }
  return found
}

/** what ROOT left on the host: mounts under it, mounts of its volumes anywhere, loop devices of its files, container cgroups, processes naming it */
export const leftovers = (root: string, except: ReadonlyArray<number | undefined> = []): ReadonlyArray<string> => {
  const found: Array<string> = []
  for (const m of mountsUnder(root)) found.push(`mount ${m}`)
  found.push(...volumeMounts(root))
  const loops = ChildProcess.spawnSync("losetup", ["-a"], { encoding: "utf8" }).stdout
  for (const l of loops.split("\n")) if (l.includes(root + "/")) found.push(`loop ${l}`)
  for (const controller of ["memory", "pids"] as const) {
    const own = ownCgroupDir(controller)
    if (own === undefined) continue
    for (const d of Fs.readdirSync(own)) if (d.startsWith(cgroupPrefix(root))) found.push(`cgroup ${Path.join(own, d)}`)
  }
  for (const pid of Fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p) && !except.includes(Number(p)))) {
    try {
      const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue
      const cmd = Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8")
      if (cmd.includes(root + "/")) found.push(`process ${pid} ${cmd.replace(/\0/g, " ")}`)
    } catch {
      // gone meanwhile
    }
  }
  return found
}

/** closes each world, checks that its ROOT left nothing on the host, and removes it (a test file's afterEach) */
export const closeLeavingNothing = async (worlds: Array<DeployWorld>, expectNothing: (found: ReadonlyArray<string>) => void): Promise<void> => {
  for (const w of worlds.splice(0)) {
    await w.close()
    expectNothing([...leftovers(w.root), ...Fs.readdirSync(Path.join(w.root, "containers")).map((name) => `container ${name}`)])
    Fs.rmSync(w.root, { recursive: true, force: true })
  }
}

/** What a shell image runs with, beyond its script. */
export interface ShellImage {
  readonly labels?: Record<string, string>
  readonly env?: Array<string>
  readonly workingDir?: string
  readonly user?: string
}

/**
 * A test file's real containers (its top level calls this once): a busybox rootfs made before its
 * cases under a directory of its own (`base`); each case's worlds closed after it, its ROOT checked to
 * have left nothing on the host; the directory removed at the end.
 */
export const deployCases = (what: string) => {
  const base = tempDir(what)
  let rootfs = ""
  const worlds: Array<DeployWorld> = []
  beforeAll(() => {
    rootfs = busyboxRootfs(base)
  })
  afterEach(() => closeLeavingNothing(worlds, (found) => expect(found).toEqual([])))
  afterAll(() => Fs.rmSync(base, { recursive: true, force: true }))
  return {
    base,
    /** the worlds made in the case, closed after it */
    worlds,
    rootfs: () => rootfs,
    /** an image whose program is `sh -c script` in the busybox rootfs */
    sh: (script: string, more: ShellImage = {}) =>
      obtained({
        rootfs, entrypoint: ["/bin/sh", "-c"], cmd: [script], env: more.env ?? ["PATH=/bin"], workingDir: more.workingDir ?? "/",
        ...(more.labels !== undefined ? { labels: more.labels } : {}), ...(more.user !== undefined ? { user: more.user } : {})
      }),
    /** a server holding `images` on a ROOT of its own (or `root`), closed after the case */
    world: async (images: ReadonlyArray<ObtainedImage>, root = tempDir(`${what}-root`), more: Partial<BwrapDeployer.BwrapDeployerOptions> = {}) => {
      const w = await makeDeployWorld(root, images, undefined, more)
      worlds.push(w)
      return w
    }
  }
}

/** serverMain.ts bundled into DIR: the containers server as a program of its own, to be killed and started again */
export const bundleServerMain = async (dir: string): Promise<string> => {
  const bundle = Path.join(dir, "server.mjs")
  await bundleProgram(Path.join(import.meta.dirname, "serverMain.ts"), bundle)
  return bundle
}

/** the bundled server (bundleServerMain) started on ROOT, holding the images IMAGES.json lists, once it listens */
export const startServerProgram = async (bundle: string, root: string, images: string) => {
  const server = ChildProcess.spawn(process.execPath, [bundle, root, images, dist], { stdio: ["ignore", "pipe", "inherit"] })
  const url = await listeningUrl(server)
  return { server, url }
}
