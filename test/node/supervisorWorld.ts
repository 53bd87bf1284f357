/**
 * The node's supervisor as installed: `ROOT/current/ocx2-supervise --node lab --root ROOT`, the
 * program of the staged release root, started as a service manager would start it (its own
 * session, its output to a file), and found by its info file once it has started the node.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { spareWaits, stopSpare } from "../../src/pickup/SpareClient.js"
import { runningSupervisor, supervisorFilesOf, type SupervisorInfo } from "../../src/root/SupervisorFiles.js"
import { users } from "../support/nodeWorld.js"
import { answerWithin, explain } from "../support/world.js"
import { waitFor, type HookWorld } from "./hookWorld.js"

export interface RunningSupervisor {
  readonly pid: number
  readonly child: ChildProcess.ChildProcess
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
  /** its output so far */
  readonly output: () => string
}

/** The supervisor's log lines (ROOT/node/supervisor.log), parsed. */
export const supervisorLog = (world: Pick<HookWorld, "root" | "repository">): ReadonlyArray<{ readonly pid: number; readonly did: ReadonlyArray<string>; readonly run?: string; readonly watcher?: number }> => {
  try {
    return Fs.readFileSync(supervisorFilesOf(world.root, world.repository, users.node.login).log, "utf8")
      .split("\n").filter((l) => l !== "").map((l) => JSON.parse(l))
  } catch {
    return []
  }
}

/** Starts the installed supervisor and waits until it has started the node (every open run decided). */
export const startSupervisor = async (
  world: Pick<HookWorld, "root" | "repository" | "dir">,
  env: Readonly<Record<string, string>> = {},
  options: { readonly nodeOptions?: ReadonlyArray<string> } = {}
): Promise<RunningSupervisor> => {
  const out = Path.join(world.dir, `supervisor-${Date.now()}.out`)
  const fd = Fs.openSync(out, "a")
  // the program the service runs (docs/systemd/ocx2-supervise@.service); `ocx2 supervise` is the same.
  // nodeOptions: run as `node OPTIONS PROGRAM`, not by its #! line and the options that gives (a bench's baseline)
  const program = Path.join(world.root, "current", "ocx2-supervise")
  const [command, args] = options.nodeOptions === undefined ? [program, []] : [process.execPath, [...options.nodeOptions, program]]
  const child = ChildProcess.spawn(command, [...args, "--node", users.node.login, "--root", world.root], {
    detached: true,
    stdio: ["ignore", fd, fd],
    env: { ...process.env, ...env }
  })
  Fs.closeSync(fd)
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })))
  const output = () => Fs.readFileSync(out, "utf8")
  const pid = child.pid!
  const ready = await waitFor(() =>
    supervisorLog(world).some((l) => l.pid === pid && l.did.some((d) => / live watchers? taken back$/.test(d))) ? true : undefined, answerWithin, 50)
  if (ready === undefined) throw new Error(`the supervisor ${pid} did not start the node within ${answerWithin / 1000} s; its output:\n${output()}\n${explain(world)}`)
  return { pid, child, exited, output }
}

export const supervisorInfo = (world: Pick<HookWorld, "root" | "repository">): SupervisorInfo | undefined =>
  runningSupervisor(world.root, world.repository, users.node.login)

/** Ends a supervisor (SIGTERM, as a service manager stops it) and waits for it. */
export const stopSupervisor = async (s: RunningSupervisor | undefined): Promise<void> => {
  if (s === undefined || s.child.exitCode !== null || s.child.signalCode !== null) return
  s.child.kill("SIGTERM")
  await s.exited
}

/** Whether the supervisor `pid` logged that it answered the run lost (on seeing its watcher end, or reading what arrived again). */
export const answeredLostBy = (world: Pick<HookWorld, "root" | "repository">, pid: number, run: string): boolean =>
  supervisorLog(world).some((l) => l.pid === pid &&
    ((l.run === run && l.did[0]?.startsWith("answered lost") === true) || l.did.some((d) => d.startsWith(`${run}: answered lost`))))

/**
 * No spare for the node at ROOT (ROOT/settings/spare-watcher off, the waiting one ended): every watcher is
 * started for its run, with its starter's environment (a spare's is its own). Returns what undoes it.
 */
export const withoutSpare = async (root: string): Promise<() => void> => {
  const setting = Path.join(root, "settings", "spare-watcher")
  Fs.mkdirSync(Path.dirname(setting), { recursive: true })
  Fs.writeFileSync(setting, "off")
  stopSpare(root)
  if (await waitFor(() => (spareWaits(root) ? undefined : true), answerWithin, 50) === undefined) {
    throw new Error(`the spare of ${root} did not end within ${answerWithin / 1000} s\n${explain({ dir: Path.dirname(root), root })}`)
  }
  return () => Fs.rmSync(setting, { force: true })
}
