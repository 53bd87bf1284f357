/**
 * A node on another host, simulated on this machine: the server (a real `fossil server` whose
 * extension root runs the OCX CGI, so the node can ask its receipt tool) on one side; on the other
 * a host of its own: a clone made as the node user lab2 (holding o and i only), its own release
 * root and care directory, a passwords file. The clone tests and the outage tests share it.
 */
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { builtProgram } from "../adapters/extServer.js"
import * as FossilRepository from "../../layers/FossilRepository.js"
import type { Repository } from "../../services/Repository.js"
import { readMessage, writeMessage } from "../../src/protocol/Envelope.js"
import { cloneAs, fossil, webLogin, webNewThread, type RunningServer, type TestUser } from "../support/fossilServer.js"
import { sandbox } from "../support/nodeWorld.js"
import { answerWithin, cgiExtroot, eventually, explain, makeWorld, pidsNaming, project, type World } from "../support/world.js"

export const cloneUsers = {
  alice: { login: "alice", capabilities: "s", password: "alice-pw" },
  lab2: { login: "lab2", capabilities: "oi", password: "lab2-pw" },
  builder: { login: "builder", capabilities: "oi", password: "builder-pw" }
} satisfies Record<string, TestUser>

export interface CloneWorld {
  readonly dir: string
  readonly served: string
  /** the server's extension root, holding the OCX CGI */
  readonly extroot: string
  readonly url: string
  readonly port: number
  readonly trunk: string
  /** the clone's host's release root */
  readonly root: string
  readonly clone: string
  readonly cloneCode: string
  readonly passwords: string
  /** the server as started; a test that restarts it keeps its own handle */
  readonly server: RunningServer
  /** the server's host, as made */
  readonly world: World
}

export const makeCloneWorld = async (prefix: string): Promise<CloneWorld> => {
  // the server's host: the test world with these users and hello.txt on trunk, the CGI (built below) in its extension root
  const world = await makeWorld({
    prefix,
    users: Object.values(cloneUsers),
    checkin: { "hello.txt": "hello from trunk\n" },
    extroot: (_root, dir) => cgiExtroot(dir, Path.join(dir, "build", "ocx2-cgi.mjs"))
  })
  try {
    const { dir, server, trunk } = world
    const served = world.repository
    const extroot = Path.join(dir, "ext")
    const build = Path.join(dir, "build")
    Fs.mkdirSync(build)
    const [cli, watcher, cgi] = await Promise.all([
      builtProgram("ocx2", build),
      builtProgram("ocx2-watcher", build),
      builtProgram("ocx2-cgi", build)
    ])
    if (cgi !== Path.join(build, "ocx2-cgi.mjs")) throw new Error(`the CGI was built as ${cgi}`)

    // the other host: a release root of its own, a clone made as lab2, the passwords file
    const host = Path.join(dir, "lab2-host")
    const root = Path.join(host, "root")
    const release = Path.join(root, "staged", "0123456789ab")
    Fs.mkdirSync(release, { recursive: true })
    Fs.chmodSync(host, 0o755)
    Fs.chmodSync(root, 0o755)
    // each program with what runs beside it (its bundle and code cache, bin/build.mjs), as a release holds them
    for (const [program, file] of [["ocx2", cli], ["ocx2-watcher", watcher]] as const) {
      Fs.copyFileSync(file, Path.join(release, program))
      for (const beside of [".cjs", ".cjs.cache"]) {
        const from = file.replace(/\.mjs$/, beside)
        if (Fs.existsSync(from)) Fs.copyFileSync(from, Path.join(release, `${program}${beside}`))
      }
    }
    // and the flock addon beside them, as staging puts it
    const addon = Path.join(build, "ocx2-flock.node")
    if (Fs.existsSync(addon)) Fs.copyFileSync(addon, Path.join(release, "ocx2-flock.node"))
    Fs.writeFileSync(Path.join(release, "package.json"), JSON.stringify({ type: "module" }))
    Fs.symlinkSync(Path.join(project, "node_modules"), Path.join(release, "node_modules"))
    Fs.symlinkSync("staged/0123456789ab", Path.join(root, "current"))
    const clone = await cloneAs(server.url, cloneUsers.lab2.login, cloneUsers.lab2.password, Path.join(host, "lab2.fossil"))
    const cloneCode = (await fossil(["sql", "-R", clone, "SELECT value FROM config WHERE name='server-code'"])).trim().replace(/'/g, "")
    const passwords = Path.join(host, "passwords.json")
    Fs.writeFileSync(passwords, JSON.stringify({ user: cloneUsers.lab2.login, password: cloneUsers.lab2.password }), { mode: 0o600 })
    return { dir, served, extroot, url: server.url, port: server.port, trunk, root, clone, cloneCode, passwords, server, world }
  } catch (e) {
    await world.close()
    throw e
  }
}

/** Ends every process under the world's root, the server (`server`: the one running now) and the files. */
export const closeCloneWorld = async (world: CloneWorld | undefined, server: RunningServer | undefined = world?.server): Promise<void> => {
  if (world === undefined) return
  for (const pid of pidsNaming(world.root)) {
    try {
      process.kill(pid, "SIGKILL")
    } catch { /* gone */ }
  }
  // the server running now, if a test restarted it; then the world with the server it was made with
  if (server !== world.server) await server?.stop()
  await world.world.close()
}

/** What `ocx2 --json ... node` answers. */
export interface NodeAnswer {
  readonly operations: ReadonlyArray<{ readonly op: string; readonly detail: string; readonly done: boolean }>
  readonly output?: { readonly check: boolean; readonly why: string; readonly runs: ReadonlyArray<{ readonly run: string; readonly action: string }> }
  readonly stopped: { readonly reason: string; readonly message?: string }
}

/** `ocx2 --json --repository CLONE node URL FILE ...` as the timer runs it: the release's own program, its root by default. */
export const runNode = (world: CloneWorld, args: ReadonlyArray<string> = [], passwords = world.passwords) =>
  new Promise<NodeAnswer & { readonly code: number | null }>((resolve, reject) => {
    const program = Path.join(world.root, "current", "ocx2")
    const child = ChildProcess.spawn(process.execPath, [program, "--json", "--repository", world.clone, "node", world.url, passwords, ...args], {
      env: { ...process.env, USER: "root" }, stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    child.stdout.on("data", (c: Buffer) => (out += c.toString()))
    child.stderr.on("data", (c: Buffer) => (err += c.toString()))
    child.once("error", reject)
    child.once("close", (code) => {
      try {
        resolve({ ...(JSON.parse(out) as NodeAnswer), code })
      } catch {
        reject(new Error(`ocx2 node printed no answer (exit ${code}): ${out}${err}`))
      }
    })
  })

/** The clone's host runs this checkout's build (npm run build): ocx2, its round's bundle (the supervisor) and the watcher. */
export const useThisBuild = (world: CloneWorld, dist: string): void => {
  const release = Fs.realpathSync(Path.join(world.root, "current"))
  for (const program of ["ocx2", "ocx2-hook-round", "ocx2-watcher"]) {
    Fs.copyFileSync(Path.join(dist, `${program}.mjs`), Path.join(release, program))
    Fs.chmodSync(Path.join(release, program), 0o755)
    Fs.copyFileSync(Path.join(dist, `${program}.cjs`), Path.join(release, `${program}.cjs`))
  }
}

/** The served repository, read from its file (the server may be down). */
export const servedRepository = <A, E>(world: Pick<CloneWorld, "served">, f: (r: typeof Repository.Service) => Effect.Effect<A, E>) =>
  Effect.scoped(Effect.flatMap(FossilRepository.make({ path: world.served }), f))

/** The run's replies that are messages naming it, with each sender as the server received it. */
export const repliesOf = (world: Pick<CloneWorld, "served">, run: string) =>
  servedRepository(world, (r) => r.thread(run)).pipe(Effect.map((posts) => posts.flatMap((p) => {
    const reading = readMessage(p.text)
    return reading._tag === "Message" && reading.re === run
      ? [{ kind: reading.kind, sender: p.sender, content: reading.content as Record<string, unknown> }]
      : []
  })))

/**
 * The run's replies once one of them is a `kind`. When `ms` (answerWithin by default) run out
 * first, it dies (the test fails) with what the clone's node saw (explain), given a whole clone
 * world; given only `served`, it gives the replies as they are.
 */
export const waitForKind = (world: Pick<CloneWorld, "served"> & Partial<Pick<CloneWorld, "dir" | "root">>, run: string, kind: string, ms = answerWithin, every = 150) =>
  eventually(repliesOf(world, run), (messages) => messages.some((m) => m.kind === kind), ms, every).pipe(
    Effect.flatMap((messages) =>
      messages.some((m) => m.kind === kind) || world.dir === undefined || world.root === undefined
        ? Effect.succeed(messages)
        : Effect.die(new Error(`the run ${run} had no ${kind} within ${ms / 1000} s (its replies: ${messages.map((m) => m.kind).join(", ") || "none"})\n${explain({ dir: world.dir, root: world.root }, run)}`)))
  )

/** What the clone's node saw (test/support/explain.ts), of `run` when named. */
export const explainClone = (world: Pick<CloneWorld, "dir" | "root">, run?: string): string => explain({ dir: world.dir, root: world.root }, run)

/** A run for lab2 posted on the server through the forum's web form by alice, as a person would; its workspace a directory and trunk's files in it unless `about` says otherwise. */
export const postRun = async (
  world: CloneWorld,
  script: string,
  process: object = {},
  about: { readonly objective?: string; readonly wall?: string; readonly workspace?: ReadonlyArray<object> } = {}
): Promise<string> => {
  const session = await webLogin(world.url, cloneUsers.alice.login, cloneUsers.alice.password)
  const run = {
    clone: world.cloneCode,
    objective: about.objective ?? "a run for lab2",
    workspace: about.workspace ?? [{ step: "directory", at: "$$root$$/work/$$run$$" }, { step: "files", of: "trunk", into: "$$workspace$$/tree" }],
    sandbox: sandbox(),
    limits: { wall: about.wall ?? "2m" },
    process: { user: cloneUsers.builder.login, command: ["sh", "-c", script], env: { PATH: "/usr/bin:/bin" }, ...process }
  }
  return webNewThread({ repository: world.served }, session, {
    title: "a run for lab2",
    text: writeMessage({ ocx: 2, to: cloneUsers.lab2.login, run }, "A run for the lab's board.")
  })
}
