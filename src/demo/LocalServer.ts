/**
 * A local Fossil server, as the demo runs one and the tests do: a repository made with its users,
 * served by `fossil server --nojail` on a free loopback port, started as a service manager starts
 * a service (from /, a bare environment), and stopped with every process it left behind.
 */
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { runFossil } from "../fossil/Command.js"
import { openDatabase } from "../fossil/Sqlite.js"

export interface FossilUser {
  readonly login: string
  readonly capabilities: string
  readonly password: string
}

/**
 * Runs fossil as `user` (root by default) and fails on a non-zero exit. Every command reads the
 * user's global configuration (~/.config/fossil.db), which all the suite's fossil processes share,
 * so two kinds of refusal are passing and the command runs again, up to five times: a database
 * another fossil held ("database is locked"), and, on a host where fossil never ran, a
 * configuration another fossil created while this one did ("table global_config already exists").
 * `again` runs before each new attempt (an init removes what its failed attempt left).
 */
export const fossil = async (args: ReadonlyArray<string>, user = "root", again: () => void = () => {}): Promise<string> => {
  for (let attempt = 1; ; attempt++) {
    const r = await runFossil(args, { user })
    if (r.code === 0) return r.stdout
    if (attempt === 5 || !/database is locked|table global_config already exists/i.test(`${r.stderr}${r.stdout}`)) {
      throw new Error(`fossil ${args.join(" ")} exited ${String(r.code)}: ${r.stderr}${r.stdout}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 200 * attempt))
    again()
  }
}

export const makeTempDir = (prefix = "ocx2-test-"): string => Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))

/** A fresh repository at `path` (absolute) whose users hold the given capabilities and passwords. */
export const createRepository = async (
  path: string,
  users: ReadonlyArray<FossilUser>,
  options: { readonly wal?: boolean; readonly nobody?: string } = {}
): Promise<string> => {
  const abs = Path.resolve(path)
  if (Fs.existsSync(abs)) throw new Error(`${abs} exists already: a new repository is made where nothing is`)
  await fossil(["init", abs], "root", () => Fs.rmSync(abs, { force: true }))
  await addUsers(abs, users, options.nobody === undefined ? [] : [{ login: "nobody", capabilities: options.nobody }])
  if (options.wal === true) await fossil(["rebuild", "--wal", abs])
  return abs
}

/**
 * More users in an existing repository (served or not), and the capabilities of users it has
 * (`also`, nobody's say), in one `fossil sql`: each user's row as `fossil user new` writes it
 * (the password kept as Fossil keeps it, SHA1 of PROJECT-CODE/LOGIN/PASSWORD; the contact; the
 * row's mtime), with its capabilities. The suite makes thousands of users, and a process per user
 * and per capability was a fifth of the programs it started.
 */
export const addUsers = async (
  repository: string,
  users: ReadonlyArray<FossilUser>,
  also: ReadonlyArray<{ readonly login: string; readonly capabilities: string }> = []
): Promise<void> => {
  const quoted = (text: string) => `'${text.replaceAll("'", "''")}'`
  const projectCode = users.length === 0 ? "" : projectCodeOf(repository)
  const inserts = users.map((u) => {
    const pw = Crypto.createHash("sha1").update(`${projectCode}/${u.login}/${u.password}`).digest("hex")
    return `INSERT INTO user(login, pw, cap, info, mtime) VALUES(${quoted(u.login)}, ${quoted(pw)}, ${quoted(u.capabilities)}, ${quoted(`${u.login}@example.com`)}, now());`
  })
  const updates = also.map((u) => `UPDATE user SET cap=${quoted(u.capabilities)}, mtime=now() WHERE login=${quoted(u.login)};`)
  if (inserts.length + updates.length > 0) await fossil(["sql", "-R", repository, `BEGIN; ${[...inserts, ...updates].join(" ")} COMMIT;`])
}

/** The repository's project code, which Fossil's stored passwords are salted with. */
const projectCodeOf = (repository: string): string => {
  const db = openDatabase(repository, { readonly: true, fileMustExist: true })
  try {
    const row = db.prepare<[], { value: string }>("SELECT value FROM config WHERE name = 'project-code'").get()
    if (row === undefined) throw new Error(`${repository} has no project-code: no password can be stored for it`)
    return row.value
  } finally {
    db.close()
  }
}

export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const srv = Net.createServer()
    srv.on("error", reject)
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      srv.close(() => resolve(port))
    })
  })

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

export interface RunningServer {
  readonly repository: string
  readonly port: number
  /** base URL with a trailing slash, e.g. http://127.0.0.1:PORT/ */
  readonly url: string
  /** stops the server and the backoffice poller (whole process groups) */
  readonly stop: () => Promise<void>
}

const killGroup = async (child: ChildProcess.ChildProcess): Promise<void> => {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise<void>((r) => child.once("exit", () => r()))
  try {
    process.kill(-child.pid, "SIGTERM")
  } catch {
    return
  }
  const done = await Promise.race([exited.then(() => true), sleep(3000).then(() => false)])
  if (!done) {
    try {
      process.kill(-child.pid, "SIGKILL")
    } catch { /* already gone */ }
    await exited
  }
}

/**
 * Fossil forks its backoffice after a 200 reply; it leaves the server's process group
 * (setsid) and may sleep up to a minute for its lease. Those processes are found by
 * their exact argv naming this repository file (a unique temporary path) and ended by id.
 */
const killStragglers = async (repository: string): Promise<void> => {
  const pids: Array<number> = []
  for (const entry of Fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    let argv: Array<string>
    try {
      argv = Fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0")
    } catch {
      continue
    }
    // and the node's poller of it (ocx2 hook --fast starts one in place of Fossil's: src/node/BackofficePoller.ts)
    const nodePoller = argv.includes("--poll") && argv.some((a) => Path.basename(a) === "ocx2-hook")
    if ((Path.basename(argv[0] ?? "") === "fossil" || nodePoller) && argv.includes(repository)) pids.push(Number(entry))
  }
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL")
    } catch { /* already gone */ }
  }
  if (pids.length > 0) await sleep(20)
}

/**
 * A process ended above in the middle of a commit (a backoffice writing its lease) leaves its
 * journal hot. The next open that may write rolls it back; a read-only open (a test's, a program's
 * plain SQLite) fails until then. So the stopped server's file is left as Fossil's next open would
 * leave it. Best effort: openDatabase's readers roll it back themselves too.
 */
const rollBackWhatWasCut = (repository: string): void => {
  try {
    if (Fs.existsSync(`${repository}-journal`) && Fs.statSync(repository).isFile()) {
      openDatabase(repository, { readonly: true, fileMustExist: true }).close()
    }
  } catch { /* the next reader says what is wrong */ }
}

/**
 * The environment a service manager gives a service (systemd: a fixed PATH, and HOME and LANG
 * where the unit names them), nothing of the test's own: a program that works only with the
 * test's variables, or only from the checkout as its directory, fails here as it would installed.
 */
export const serviceEnvironment = (): NodeJS.ProcessEnv => ({
  PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  HOME: Os.homedir(),
  LANG: "C.UTF-8",
  // bench/suite names each Node program the suite starts by a preload in NODE_OPTIONS: a server's hooks and CGI programs too
  ...(process.env.OCX2_SUITE_WHO !== undefined && process.env.NODE_OPTIONS !== undefined ? { NODE_OPTIONS: process.env.NODE_OPTIONS } : {})
})

/** Starts `fossil ARGS` as a service manager would: from `/`, in its own process group, with a bare environment. */
export const spawnAsService = (args: ReadonlyArray<string>): ChildProcess.ChildProcess =>
  ChildProcess.spawn("fossil", [...args], { cwd: "/", detached: true, stdio: "ignore", env: serviceEnvironment() })

export interface ServerOptions {
  /** turns Fossil's automatic backoffice off and runs `fossil backoffice --poll 1` beside it (hooks within about a second) */
  readonly fastHooks?: boolean
  /** serves this directory as Fossil's extension root (`--extroot`), where the OCX pages are linked */
  readonly extroot?: string
  /** serves this directory of repositories (the repository among them) in place of the repository alone: each at SERVER/NAME */
  readonly directory?: string
}

/** Until the server at `url` answers (true), or it has exited or the deadline passed (false). */
const answers = async (server: ChildProcess.ChildProcess, url: string, deadline: number): Promise<boolean> => {
  while (Date.now() < deadline && server.exitCode === null) {
    try {
      const res = await fetch(url + "robots.txt", { signal: AbortSignal.timeout(1000) })
      await res.arrayBuffer()
      return true
    } catch {
      await sleep(25)
    }
  }
  return false
}

/**
 * Serves `repository` with `fossil server --nojail --localhost` on a free loopback port, started
 * as a service manager starts it (spawnAsService), and waits until it answers.
 */
export const startServer = async (repository: string, options: ServerOptions = {}): Promise<RunningServer> => {
  const abs = Path.resolve(repository)
  const children: Array<ChildProcess.ChildProcess> = []
  const spawn = (args: ReadonlyArray<string>) => {
    const child = spawnAsService(args)
    children.push(child)
    return child
  }
  // what a directory's server forks (its backoffices) names the directory, not the repository
  const served = options.directory === undefined ? abs : Path.resolve(options.directory)
  const stop = async () => {
    await Promise.all(children.map(killGroup))
    await killStragglers(abs)
    if (served !== abs) await killStragglers(served)
    rollBackWhatWasCut(abs)
  }
  const extroot = options.extroot === undefined ? [] : ["--extroot", Path.resolve(options.extroot)]
  try {
    if (options.fastHooks === true) {
      await fossil(["settings", "backoffice-disable", "on", "-R", abs])
      spawn(["backoffice", "--poll", "1", abs])
    }
    for (let attempt = 0; ; attempt++) {
      const port = await freePort()
      const server = spawn(["server", "--nojail", "--localhost", "--port", String(port), ...extroot, served])
      const url = `http://127.0.0.1:${port}/`
      if (await answers(server, url, Date.now() + 10_000)) return { repository: abs, port, url, stop }
      await killGroup(server)
      if (attempt >= 2) throw new Error(`fossil server for ${abs} did not answer`)
    }
  } catch (e) {
    await stop()
    throw e
  }
}

/**
 * Serves `repository` again on `port`, the port a server stopped before had (its clients keep
 * its URL), started as startServer starts it: from `/`, with a bare environment. The port may
 * still be closing; it is tried until it answers, for up to 15 seconds.
 */
export const restartServer = async (repository: string, port: number, options: ServerOptions = {}): Promise<RunningServer> => {
  const abs = Path.resolve(repository)
  const children: Array<ChildProcess.ChildProcess> = []
  const stop = async () => {
    await Promise.all(children.map(killGroup))
    await killStragglers(abs)
    rollBackWhatWasCut(abs)
  }
  const extroot = options.extroot === undefined ? [] : ["--extroot", Path.resolve(options.extroot)]
  const url = `http://127.0.0.1:${port}/`
  const deadline = Date.now() + 15_000
  try {
    if (options.fastHooks === true) children.push(spawnAsService(["backoffice", "--poll", "1", abs]))
    while (Date.now() < deadline) {
      const server = spawnAsService(["server", "--nojail", "--localhost", "--port", String(port), ...extroot, abs])
      children.push(server)
      if (await answers(server, url, Math.min(deadline, Date.now() + 5000))) return { repository: abs, port, url, stop }
      await killGroup(server)
      await sleep(200)
    }
    throw new Error(`fossil server for ${abs} did not answer on port ${port} again`)
  } catch (e) {
    await stop()
    throw e
  }
}
