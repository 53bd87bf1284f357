// The main job on an embedded default: a local Fossil server with a demo repository and its
// users, a build run and a refused run posted through the web forms as a person would, the
// node acting on both, and each thread printed as Fossil holds it.

import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Readline from "node:readline"
import * as Effect from "effect/Effect"
import { CareDirectory } from "../../services/CareDirectory.js"
import type { HostsService, RecordServices } from "../../services/Hosts.js"
import { Repository } from "../../services/Repository.js"
import { capabilitiesOf } from "../adapters/cli/RepositoryCapabilities.js"
import { defaultWatcherProgram, handOff } from "../pickup/HandOff.js"
import { readRunRecord } from "../pickup/RunRecord.js"
import { readMessage, writeMessage } from "../protocol/Envelope.js"
import { seedBuildRun } from "./SeedExamples.js"
import { accept } from "../tools/accept.js"
import { hook } from "../tools/hook.js"
import { runTool } from "../tools/RunTool.js"
import { stage } from "../tools/stage.js"
import type { Answer, Tool } from "../tools/Tool.js"
import { makeLocalNode, users, type LocalNode } from "./LocalNode.js"
import { fossil } from "./LocalServer.js"
import { webLogin, webNewThread } from "./WebForms.js"

const say = (line = "") => process.stdout.write(`${line}\n`)

/** Seed 000 2.19's build, made concrete: builds trunk's image, sets a ci verdict, publishes the image. */
export const buildRun = (world: Pick<LocalNode, "serverCode">) => seedBuildRun({ serverCode: world.serverCode, buildUser: users.builder.login })

/** The demo's world, and its record and care directory as this host's node reads them. */
interface DemoWorld extends LocalNode {
  readonly read: <A, E>(effect: Effect.Effect<A, E, RecordServices>) => Promise<A>
  /** whether a watcher still holds the run's lock */
  readonly watched: (run: string) => Promise<boolean>
}

const demoWorld = (local: LocalNode, hosts: HostsService): DemoWorld => ({
  ...local,
  read: (effect) => Effect.runPromise(effect.pipe(Effect.provide(hosts.record(local.repository)))),
  watched: (run) =>
    Effect.runPromise(CareDirectory.pipe(
      Effect.flatMap((care) => care.probe(run)),
      Effect.map((state) => state === "alive"),
      Effect.provide(hosts.care(local.root))
    ))
})

/** Until the run has ended and its watcher is done (its lock is free: kept logs, files and verdict written). */
const waitForEnded = async (world: DemoWorld, run: string, seconds: number) => {
  for (let i = 0; i < seconds * 10; i++) {
    if ((await world.read(readRunRecord(run))).ended !== undefined && !(await world.watched(run))) return true
    await new Promise((r) => setTimeout(r, 100))
  }
  return false
}

const printThread = async (world: DemoWorld, run: string) => {
  for (const post of await world.read(Effect.flatMap(Repository, (r) => r.thread(run)))) {
    const reading = readMessage(post.text)
    const kind = reading._tag === "Message" ? reading.kind : "plain post"
    say(`  --- ${post.hash.slice(0, 12)} from ${post.sender ?? "?"} (${kind})`)
    for (const line of post.text.trimEnd().split("\n")) say(`  | ${line}`)
  }
}

/** The checkout this demo runs from: the directory above dist/. */
const thisCheckout = (): string => Path.resolve(Path.dirname(Fs.realpathSync(process.argv[1]!)), "..")

/** A tool called as alice on the served repository, as `ocx2 --repository REPO --user alice TOOL` does. */
const asAdmin = async <O>(world: LocalNode, tool: Tool<any, any, O>, input: object): Promise<Answer<O>> => {
  const capabilities = await Effect.runPromise(capabilitiesOf(world.repository, users.admin.login))
  return Effect.runPromise(runTool(tool, input, {
    caller: { user: users.admin.login, capabilities, sandboxed: false },
    dryRun: false,
    repository: world.repository
  }))
}

/** The release and the hook, as a maintainer installs them: stage, accept, hook --node. */
const installNode = async (world: LocalNode): Promise<boolean> => {
  say(`staging this checkout (${thisCheckout()}) into the release root: its gate, its build, a smoke test ...`)
  const staged = await asAdmin(world, stage, { checkout: thisCheckout(), root: world.root })
  if (staged.stopped.reason !== "completed") {
    say(`  stage ${staged.stopped.reason}: ${staged.stopped.message ?? ""}`)
    return false
  }
  say(`  staged ${(staged.output as { staged?: string } | undefined)?.staged ?? "?"}; gate log ${Path.join(world.root, "staged", "gate.log")}`)
  const accepted = await asAdmin(world, accept, { root: world.root })
  say(`  accept: ${accepted.stopped.reason}${accepted.stopped.message !== undefined ? `: ${accepted.stopped.message}` : ""}`)
  const installed = await asAdmin(world, hook, { node: users.node.login, root: world.root, serverUrl: world.server.url })
  say(`  hook --node ${users.node.login}: ${installed.stopped.reason}${installed.stopped.message !== undefined ? `: ${installed.stopped.message}` : ""}`)
  const backoffice = (installed.output as { backoffice?: { words?: string } } | undefined)?.backoffice?.words
  if (backoffice !== undefined) say(`  ${backoffice}`)
  return accepted.stopped.reason === "completed" && installed.stopped.reason === "completed"
}

/** The demo, reading its record and care directory through this host's layers (bin/ provides them). */
export const demo = async (options: { readonly wait: boolean }, hosts: HostsService) => {
  say("ocx2 demo: a local Fossil server, a node, and two runs posted as a person would post them")
  // the server serves the OCX pages from its extension root, linked as docs/operations.md says
  const world = demoWorld(await makeLocalNode({ fastHooks: true, pages: true }), hosts)
  try {
    say(`repository: ${world.repository}`)
    // with --no-wait the server is gone when the demo ends: no address of it is printed at all
    say(`server:     ${options.wait ? world.server.url : `port ${world.server.port}`} (fossil server --nojail on loopback, its pages in --extroot)`)
    say(`users:      ${users.admin.login} (setup), ${users.node.login} (the node user), ${users.builder.login} (the process user)`)
    say(`release root of this host's node: ${world.root}`)
    say()

    const hooked = await installNode(world)
    if (!hooked) say("the hook is not installed: this demo hands each run to a watcher itself, as the hook would")
    say()

    const session = await webLogin(world.server.url, users.admin.login, users.admin.password)
    const build = await webNewThread(world.server, session, {
      title: "Build trunk for the lab board",
      text: writeMessage({ ocx: 2, to: users.node.login, run: buildRun(world) }, "Please build trunk and publish the image.")
    })
    say(`posted the build run through the forum's web form: ${build}`)
    const refused = await webNewThread(world.server, session, {
      title: "A run in version 1's words",
      text: writeMessage({ ocx: 2, to: users.node.login, node: users.node.login, run: buildRun(world) }, "This one names a node the old way.")
    })
    say(`posted a run with version 1's node key: ${refused}`)
    say()

    if (hooked) say("the node on this host is the served repository's after-receive hook: it acts within about a second")
    else {
      const watcherProgram = defaultWatcherProgram()
      for (const run of [build, refused]) handOff(world.config, run, { watcherProgram })
    }
    for (const run of [build, refused]) {
      if (!(await waitForEnded(world, run, 60))) say(`run ${run} has not ended yet; see ${Path.join(world.root, "care", `${run}.log`)}`)
    }

    for (const run of [build, refused]) {
      say(`thread of ${run.slice(0, 12)}, as the served repository holds it${options.wait ? ` (open ${world.server.url}forumpost/${run.slice(0, 12)})` : ""}:`)
      await printThread(world, run)
      say()
    }
    say(`the verdict on trunk:   ${(await fossil(["tag", "list", "--raw", world.trunk, "-R", world.repository])).split("\n").find((l) => l.startsWith("ci=")) ?? "(none)"}`)
    say(`unversioned files:      ${(await fossil(["uv", "list", "-R", world.repository])).trim() || "(none)"}`)
    say()
    if (options.wait) {
      say(`open in a browser (sign in as ${users.admin.login} / ${users.admin.password}):`)
      say(`  the forum:     ${world.server.url}forum`)
      say(`  the OCX pages: ${world.server.url}ext/ocx2-cgi`)
      say("press Enter to stop the server and remove the demo's files")
      await new Promise<void>((resolve) => Readline.createInterface({ input: process.stdin }).once("line", () => resolve()))
    } else {
      const pages = await fetch(`${world.server.url}ext/ocx2-cgi`).then((r) => `${r.status}`, (e: unknown) => String(e))
      say(`the OCX pages (ext/ocx2-cgi) answered HTTP ${pages}; the server stops now: bin/demo without --no-wait keeps it open and prints where`)
    }
  } finally {
    await world.close()
  }
}

export const isInteractive = (): boolean => process.stdin.isTTY === true && Fs.existsSync("/dev/tty")
