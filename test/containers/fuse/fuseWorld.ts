import { execFileSync, spawn, type ChildProcess } from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { answerFuseAsk, type FuseHandler } from "../../../src/containers/fuse/Handler.js"
import { fuseHelperPath, unmountStale } from "../../../src/containers/fuse/Mount.js"
import { bundleProgram } from "../../support/bundleProgram.js"
import { Message, onMessages, sendMessage } from "./socketMessages.js"

/**
 * The FUSE tests' world: each test its own directory under the system's temporary one, the
 * serving program (serveProgram.ts, bundled) run on the host or in a bwrap sandbox whose root is
 * a busybox-static rootfs, and the test answering its asks with handlers. Nothing here sleeps:
 * every wait is on an event the program sends.
 */
const project = Path.resolve(import.meta.dirname, "../../..")

export const ensureHelper = (): string => {
  // what the build does (bin/build.mjs), for a test run without it
  execFileSync(process.execPath, [Path.join(project, "bin", "fusemountfd.mjs")], { stdio: "inherit" })
  return fuseHelperPath()
}

export const testDir = (name: string): string => Fs.mkdtempSync(Path.join(Os.tmpdir(), `ocx2-fuse-${name}-`))

/** the kernel's mounts of the host (this process's mount namespace) at or under DIR */
export const mountsUnder = (dir: string): Array<string> =>
  Fs.readFileSync("/proc/self/mounts", "utf8")
    .split("\n")
    .map((l) => l.split(" ")[1] ?? "")
    .filter((p) => p === dir || p.startsWith(dir + "/"))

/** every process on the machine whose mount namespace holds a mount at PATH */
export const processesSeeing = (path: string): Array<number> => {
  const out: Array<number> = []
  for (const pid of Fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      if (Fs.readFileSync(`/proc/${pid}/mounts`, "utf8").split("\n").some((l) => l.split(" ")[1] === path)) out.push(Number(pid))
    } catch {
      // the process ended meanwhile
    }
  }
  return out
}

/** a busybox shell script, run as its own process (never synchronously: the test's process may serve the mount) */
export const sh = (script: string) =>
  new Promise<{ code: number | null; out: string }>((resolve) => {
    const child = spawn(busybox(), ["sh", "-c", script], { stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    child.stdout.on("data", (d: Buffer) => (out += d.toString()))
    child.stderr.on("data", (d: Buffer) => (out += d.toString()))
    child.on("close", (code) => resolve({ code, out }))
  })

export const busybox = (): string => {
  for (const p of ["/usr/bin/busybox", "/bin/busybox"]) if (Fs.existsSync(p)) return p
  throw new Error("busybox is not installed (Debian's busybox-static)")
}

/** a busybox-static root file system: /bin with busybox and its applets, nothing else */
export const busyboxRootfs = (dir: string): string => {
  const root = Path.join(dir, "rootfs")
  for (const d of ["bin", "etc", "tmp", "proc", "dev", "mnt", ".kit", ".sock"]) Fs.mkdirSync(Path.join(root, d), { recursive: true })
  Fs.copyFileSync(busybox(), Path.join(root, "bin", "busybox"))
  Fs.chmodSync(Path.join(root, "bin", "busybox"), 0o755)
  for (const applet of ["sh", "cat", "echo", "ls", "mkdir", "rm", "mv", "grep", "kill", "rmdir", "wc", "stat", "sleep", "truncate", "od", "cut"]) {
    Fs.symlinkSync("busybox", Path.join(root, "bin", applet))
  }
  return root
}

/** the serving program, bundled, beside the helper: the layout of a proxy kit */
export const buildKit = async (dir: string): Promise<string> => {
  const kit = Path.join(dir, "kit")
  Fs.mkdirSync(kit, { recursive: true })
  await bundleProgram(Path.join(import.meta.dirname, "serveProgram.ts"), Path.join(kit, "serve.mjs"), { bundled: true, logLevel: "error" })
  Fs.copyFileSync(ensureHelper(), Path.join(kit, "fusemountfd"))
  Fs.chmodSync(Path.join(kit, "fusemountfd"), 0o755)
  return kit
}

/** the host's node and the libraries it loads (ldd), to run it in a rootfs that has none */
const nodeLibraries = (): Array<string> => {
  const out = execFileSync("ldd", [process.execPath], { encoding: "utf8" })
  return [...out.matchAll(/(\/\S+)/g)].map((m) => m[1]!).filter((p) => Fs.existsSync(p))
}

export interface Served {
  readonly events: Array<Record<string, unknown>>
  /** the next event with KEY */
  readonly next: (key: string) => Promise<Record<string, unknown>>
  readonly command: (c: object) => void
  readonly run: (script: string) => Promise<{ code: number; out: string }>
  readonly unmount: (target: string) => Promise<void>
  readonly child: ChildProcess
  /** resolves once the program (bwrap, in a sandbox) ended */
  readonly exited: Promise<void>
  readonly close: () => Promise<void>
}

export interface ServeOptions {
  readonly dir: string
  readonly mounts: ReadonlyArray<{ id: string; target: string; kind: "file" | "directory" }>
  readonly handlers: (id: string) => FuseHandler | undefined
  /** in a bwrap sandbox with this rootfs (targets are paths inside it); else on the host */
  readonly rootfs?: string
}

export const serve = async (options: ServeOptions): Promise<Served> => {
  const kit = await buildKit(options.dir)
  const sockDir = Path.join(options.dir, "sock")
  Fs.mkdirSync(sockDir, { recursive: true })
  const socketPath = Path.join(sockDir, "s")
  const events: Array<Record<string, unknown>> = []
  const watchers: Array<() => void> = []
  let connection: Net.Socket | undefined
  const server = Net.createServer((c) => {
    connection = c
    onMessages(c, (type, number, payload) => {
      if (type === Message.ask) void answerFuseAsk(options.handlers, payload).then((answer) => sendMessage(c, Message.answer, number, answer))
      if (type === Message.event) {
        events.push(JSON.parse(payload.toString()) as Record<string, unknown>)
        for (const w of [...watchers]) w()
      }
    })
    c.on("error", () => {})
  })
  await new Promise<void>((resolve) => server.listen(socketPath, resolve))
  const mountsJson = JSON.stringify(options.mounts)
  let child: ChildProcess
  if (options.rootfs === undefined) {
    child = spawn(process.execPath, [Path.join(kit, "serve.mjs"), socketPath, mountsJson], { stdio: ["ignore", "inherit", "inherit"] })
  } else {
    const libs = nodeLibraries()
    const loader = libs.find((l) => Path.basename(l).startsWith("ld-linux"))!
    const args = [
      "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
      "--uid", "0", "--gid", "0",
      "--bind", options.rootfs, "/",
      "--proc", "/proc", "--dev", "/dev", "--dev-bind", "/dev/fuse", "/dev/fuse",
      "--ro-bind", process.execPath, "/.kit/node",
      "--ro-bind", Path.join(kit, "serve.mjs"), "/.kit/serve.mjs",
      "--ro-bind", Path.join(kit, "fusemountfd"), "/.kit/fusemountfd",
      "--bind", sockDir, "/.sock",
      "--clearenv", "--setenv", "PATH", "/bin",
      ...libs.flatMap((l) => ["--ro-bind", l, `/.kit/lib/${Path.basename(l)}`]),
      "--", `/.kit/lib/${Path.basename(loader)}`, "--library-path", "/.kit/lib", "/.kit/node", "/.kit/serve.mjs", "/.sock/s", mountsJson
    ]
    child = spawn("bwrap", args, { stdio: ["ignore", "inherit", "inherit"] })
  }
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  const next = (key: string) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const look = () => {
        const i = events.findIndex((e) => key in e || "error" in e)
        if (i < 0) return false
        const [e] = events.splice(i, 1)
        const w = watchers.indexOf(check)
        if (w >= 0) watchers.splice(w, 1)
        if ("error" in e! && !(key in e)) reject(new Error(String(e.error)))
        else resolve(e!)
        return true
      }
      const check = () => void look()
      if (!look()) {
        watchers.push(check)
        void exited.then(() => {
          if (watchers.includes(check)) reject(new Error(`the serving program ended before ${key}`))
        })
      }
    })
  const command = (c: object) => sendMessage(connection, Message.command, 0, Buffer.from(JSON.stringify(c)))
  await next("mounted")
  return {
    events,
    next,
    command,
    child,
    exited,
    run: async (script) => {
      command({ run: script })
      return (await next("ran")).ran as { code: number; out: string }
    },
    unmount: async (target) => {
      command({ unmount: target })
      await next("unmounted")
    },
    close: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        command({ exit: true })
        await exited
      }
      connection?.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}

/** the teardown: what a killed server left mounted on the host is unmounted lazily; then DIR goes */
export const teardown = async (dir: string): Promise<void> => {
  for (const p of mountsUnder(dir).reverse()) await unmountStale(p)
  Fs.rmSync(dir, { recursive: true, force: true })
}
