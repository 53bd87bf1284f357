/**
 * A fleet on one server, for the listener's tests and the fleet bench: the clone world's server
 * (test/node/cloneWorld.ts) with its OCX pages served from a release root of the server's host
 * (so the receipt page finds the listener that runs beside it, as on a real host), the fleet's
 * listener started from that release (ocx2-listen), and simulated clone nodes: node users of their
 * own, signed in, each holding the question with the node's own client (layers/RemoteReceipts.ts).
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import * as RemoteReceipts from "../../layers/RemoteReceipts.js"
import { listenStateFile, type ListenState, runningListener } from "../../src/listen/ListenFiles.js"
import { writeMessage } from "../../src/protocol/Envelope.js"
import { supervisorFilesOf } from "../../src/root/SupervisorFiles.js"
import { addUsers, cloneAs, fossil, freePort, type WebSession, webNewThread } from "../support/fossilServer.js"
import { sandbox } from "../support/nodeWorld.js"
import { project, waitFor } from "../support/world.js"
import type { CloneWorld } from "./cloneWorld.js"

/** The server's host's release root: the OCX pages and the listener, as a release holds them. */
export interface ServerHost {
  readonly root: string
  /** the listener's fixed port (ROOT/settings/listen) */
  readonly port: number
}

/**
 * The server's pages served from a release root of the server's host (ROOT/staged/NAME/ocx2-cgi,
 * this checkout's build in `dist`), the extension root's program running it; the listener's
 * settings name a fixed free port on loopback.
 */
export const serveFromReleaseRoot = async (world: Pick<CloneWorld, "dir" | "extroot">, dist: string): Promise<ServerHost> => {
  const root = Path.join(world.dir, "server-root")
  const release = Path.join(root, "staged", "fee1deadbeef")
  Fs.mkdirSync(release, { recursive: true })
  for (const program of ["ocx2-cgi", "ocx2-cgi-receipt", "ocx2-cgi-pages", "ocx2-listen"]) {
    Fs.copyFileSync(Path.join(dist, `${program}.mjs`), Path.join(release, program))
    Fs.chmodSync(Path.join(release, program), 0o755)
    if (Fs.existsSync(Path.join(dist, `${program}.cjs`))) Fs.copyFileSync(Path.join(dist, `${program}.cjs`), Path.join(release, `${program}.cjs`))
  }
  Fs.writeFileSync(Path.join(release, "package.json"), JSON.stringify({ type: "module" }))
  Fs.symlinkSync(Path.join(project, "node_modules"), Path.join(release, "node_modules"))
  Fs.symlinkSync("staged/fee1deadbeef", Path.join(root, "current"))
  const port = await freePort()
  Fs.mkdirSync(Path.join(root, "settings"), { recursive: true })
  Fs.writeFileSync(Path.join(root, "settings", "listen"), JSON.stringify({ host: "127.0.0.1", port }))
  // Fossil clears the environment: the extension root's program names node by its full path
  const page = Path.join(world.extroot, "ocx2-cgi")
  Fs.writeFileSync(`${page}.new`, `#!/bin/sh\nexec ${process.execPath} ${Path.join(root, "current", "ocx2-cgi")}\n`, { mode: 0o755 })
  Fs.renameSync(`${page}.new`, page)
  return { root, port }
}

export interface RunningListener {
  readonly child: ChildProcess.ChildProcess
  readonly state: ListenState
  /** SIGTERM (or `signal`), and its exit awaited */
  readonly stop: (signal?: NodeJS.Signals) => Promise<void>
}

/** The release's ocx2-listen for `served`, once its state file names it. */
export const startListener = async (host: ServerHost, served: string): Promise<RunningListener> => {
  const log = Fs.openSync(Path.join(host.root, "listen.out"), "a")
  const child = ChildProcess.spawn(process.execPath, [Path.join(host.root, "current", "ocx2-listen"), "--repository", served], {
    stdio: ["ignore", log, log], env: { ...process.env, USER: "root" }
  })
  Fs.closeSync(log)
  const state = await waitFor(() => {
    const running = runningListener(host.root)
    return running?.pid === child.pid ? running : undefined
  }, 30_000, 50)
  if (state === undefined) {
    child.kill("SIGKILL")
    throw new Error(`the listener did not start: ${Fs.readFileSync(Path.join(host.root, "listen.out"), "utf8")}`)
  }
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  return {
    child, state,
    stop: async (signal = "SIGTERM") => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      await exited
    }
  }
}

/** How many questions the listener holds (its status, asked from this host); undefined when it does not answer. */
export const listenerWaiting = async (host: ServerHost): Promise<number | undefined> => {
  try {
    const status = await (await fetch(`http://127.0.0.1:${host.port}/status`, { signal: AbortSignal.timeout(5000) })).json() as {
      repositories: Record<string, { waiting: number }>
    }
    return Object.values(status.repositories).reduce((n, r) => n + r.waiting, 0)
  } catch {
    return undefined
  }
}

export const listenState = (host: ServerHost): string => (Fs.existsSync(listenStateFile(host.root)) ? Fs.readFileSync(listenStateFile(host.root), "utf8") : "none")

/** `count` node users (LOGIN-1 ...), each holding `capabilities` and a password of its own, in one write. */
export const addNodeUsers = async (served: string, prefix: string, count: number, capabilities = "oi") => {
  const users = Array.from({ length: count }, (_, i) => ({ login: `${prefix}${i + 1}`, capabilities, password: `${prefix}${i + 1}-pw` }))
  await addUsers(served, users)
  return users
}

/**
 * A simulated clone node: the node's own client of the server (RemoteReceipts, as a clone's
 * supervisor makes it) asking its held question again and again, as the supervisor does, and
 * noting each newest receipt number it is told and when. It asks the page first (the node's
 * start), which names the listener; every held question after goes there.
 */
export interface SimulatedNode {
  readonly user: string
  /** [receipt number, when it was told (epoch ms)] for each change it was told of */
  readonly told: Array<readonly [number, number]>
  /** the number it was told last */
  seen: number | undefined
  failures: number
  readonly stop: () => void
  readonly done: Promise<void>
}

export const simulatedNode = (url: string, user: { login: string; password: string }, waitMs = 20_000): SimulatedNode => {
  const receipts = RemoteReceipts.make({ url, user: user.login, password: user.password })
  const stopped = new AbortController()
  const node: SimulatedNode = {
    user: user.login, told: [], seen: undefined, failures: 0,
    stop: () => stopped.abort(),
    done: Promise.resolve()
  }
  const loop = async () => {
    while (!stopped.signal.aborted) {
      try {
        const newest = await Effect.runPromise(receipts.newest(node.seen ?? 0, node.seen === undefined ? 0 : waitMs), { signal: stopped.signal })
        if (newest !== undefined && newest !== node.seen) {
          if (node.seen !== undefined) node.told.push([newest, Date.now()])
          node.seen = newest
        }
      } catch {
        if (stopped.signal.aborted) return
        node.failures++
        await new Promise((r) => setTimeout(r, 500))
      }
    }
  }
  ;(node as { done: Promise<void> }).done = loop()
  return node
}

/** A real clone node on a host of its own, beside the clone world's lab2: its node user, run user, release root, clone and passwords. */
export interface CloneHost extends Pick<CloneWorld, "dir" | "root" | "clone" | "cloneCode" | "passwords" | "served" | "url"> {
  readonly node: string
  readonly runUser: string
}

/** The clone world's own lab2 as a CloneHost (its run user builder). */
export const lab2Host = (world: CloneWorld): CloneHost => ({
  dir: world.dir, root: world.root, clone: world.clone, cloneCode: world.cloneCode, passwords: world.passwords, served: world.served, url: world.url,
  node: "lab2", runUser: "builder"
})

/**
 * Another clone's host, as seed 001's "Add a node on another host" makes one: the node user NAME
 * (o and i) and its run user NAME-run on the server, the release of lab2's host copied, a clone made
 * as NAME, and the passwords file; started once (`ocx2 node --check`) by the caller.
 */
export const addCloneHost = async (world: CloneWorld, name: string): Promise<CloneHost> => {
  const runUser = `${name}-run`
  await addUsers(world.served, [{ login: name, capabilities: "oi", password: `${name}-pw` }, { login: runUser, capabilities: "oi", password: `${runUser}-pw` }])
  const hostDir = Path.join(world.dir, `${name}-host`)
  const root = Path.join(hostDir, "root")
  const release = Path.join(root, "staged", "0123456789ab")
  Fs.mkdirSync(Path.dirname(release), { recursive: true })
  Fs.chmodSync(hostDir, 0o755)
  Fs.chmodSync(root, 0o755)
  Fs.cpSync(Fs.realpathSync(Path.join(world.root, "current")), release, { recursive: true, verbatimSymlinks: true })
  Fs.symlinkSync("staged/0123456789ab", Path.join(root, "current"))
  const clone = await cloneAs(world.url, name, `${name}-pw`, Path.join(hostDir, `${name}.fossil`))
  const cloneCode = (await fossil(["sql", "-R", clone, "SELECT value FROM config WHERE name='server-code'"])).trim().replace(/'/g, "")
  const passwords = Path.join(hostDir, "passwords.json")
  Fs.writeFileSync(passwords, JSON.stringify({ user: name, password: `${name}-pw` }), { mode: 0o600 })
  return { dir: world.dir, root, clone, cloneCode, passwords, served: world.served, url: world.url, node: name, runUser }
}

/** `ocx2 --json --repository CLONE node URL FILE --check` on the host, as its timer or its first start runs it; its exit status. */
export const startNodeOn = (host: CloneHost) =>
  new Promise<number | null>((resolve, reject) => {
    const child = ChildProcess.spawn(process.execPath, [Path.join(host.root, "current", "ocx2"), "--json", "--repository", host.clone, "node", host.url, host.passwords, "--check"], {
      env: { ...process.env, USER: "root" }, stdio: "ignore"
    })
    child.once("error", reject)
    child.once("close", resolve)
  })

/** The host's `ocx2 supervise`, detached, once its log says the node started. */
export const superviseOn = async (host: CloneHost): Promise<ChildProcess.ChildProcess> => {
  const child = ChildProcess.spawn(process.execPath, [Path.join(host.root, "current", "ocx2"), "supervise", "--node", host.node, "--root", host.root], {
    env: { ...process.env, USER: "root" }, stdio: "ignore", detached: true
  })
  const log = supervisorFilesOf(host.root, host.clone, host.node).log
  const started = await waitFor(() => (Fs.existsSync(log) && Fs.readFileSync(log, "utf8").includes("the node on") ? true : undefined), 90_000, 100)
  if (started === undefined) throw new Error(`the supervisor of ${host.node} did not start: ${Fs.existsSync(log) ? Fs.readFileSync(log, "utf8") : "no log"}`)
  return child
}

/** A run for the host's node, posted on the server through the forum's web form by alice: `true` in a directory of its own. */
export const postRunTo = async (host: CloneHost, alice: WebSession, script = "true"): Promise<string> => {
  const run = {
    clone: host.cloneCode,
    objective: `a run for ${host.node}`,
    workspace: [{ step: "directory", at: "$$root$$/work/$$run$$" }],
    sandbox: sandbox(),
    limits: { wall: "2m" },
    process: { user: host.runUser, command: ["sh", "-c", script], env: { PATH: "/usr/bin:/bin" } }
  }
  return webNewThread({ repository: host.served }, alice, { title: `a run for ${host.node}`, text: writeMessage({ ocx: 2, to: host.node, run }, "A run for a board of the fleet.") })
}
