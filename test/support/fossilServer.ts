/**
 * A real Fossil server for tests, and real clients of it: a person at the web forms
 * and a person pushing from a clone with the `fossil` command.
 *
 * Plain helpers (Promise based, usable from any test) and a scoped Effect API
 * (`fossilServer`) that creates a repository, serves it, and removes both when the
 * scope closes.
 */
import BetterSqlite3 from "better-sqlite3"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Artifact } from "../../src/fossil/Artifact.js"
import { writeBundle } from "../../src/fossil/Bundle.js"
import { errorLines, runFossil } from "../../src/fossil/Command.js"

export interface TestUser {
  readonly login: string
  readonly capabilities: string
  readonly password: string
}

/**
 * Runs fossil as `user` (root by default) and fails on a non-zero exit. A command refused because
 * another fossil held a database (every command reads the user's global configuration, which all
 * the suite's fossil processes share) is run again, up to five times.
 */
export const fossil = async (args: ReadonlyArray<string>, user = "root"): Promise<string> => {
  for (let attempt = 1; ; attempt++) {
    const r = await runFossil(args, { user })
    if (r.code === 0) return r.stdout
    if (attempt === 5 || !/database is locked/i.test(`${r.stderr}${r.stdout}`)) {
      throw new Error(`fossil ${args.join(" ")} exited ${String(r.code)}: ${r.stderr}${r.stdout}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 200 * attempt))
  }
}

export const makeTempDir = (prefix = "ocx2-test-"): string => Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))

/** A fresh repository at `path` (absolute) whose users hold the given capabilities and passwords. */
export const createRepository = async (
  path: string,
  users: ReadonlyArray<TestUser>,
  options: { readonly wal?: boolean; readonly nobody?: string } = {}
): Promise<string> => {
  const abs = Path.resolve(path)
  await fossil(["init", abs])
  await addUsers(abs, users)
  if (options.nobody !== undefined) await fossil(["user", "capabilities", "nobody", options.nobody, "-R", abs])
  if (options.wal === true) await fossil(["rebuild", "--wal", abs])
  return abs
}

/** More users in an existing repository (served or not: each is one write of its own). */
export const addUsers = async (repository: string, users: ReadonlyArray<TestUser>): Promise<void> => {
  for (const u of users) {
    await fossil(["user", "new", u.login, `${u.login}@example.com`, u.password, "-R", repository])
    await fossil(["user", "capabilities", u.login, u.capabilities, "-R", repository])
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
 * The environment a service manager gives a service (systemd: a fixed PATH, and HOME and LANG
 * where the unit names them), nothing of the test's own: a program that works only with the
 * test's variables, or only from the checkout as its directory, fails here as it would installed.
 */
export const serviceEnvironment = (): NodeJS.ProcessEnv => ({
  PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  HOME: Os.homedir(),
  LANG: "C.UTF-8"
})

/** Starts `fossil ARGS` as a service manager would: from `/`, in its own process group, with a bare environment. */
export const spawnAsService = (args: ReadonlyArray<string>): ChildProcess.ChildProcess =>
  ChildProcess.spawn("fossil", [...args], { cwd: "/", detached: true, stdio: "ignore", env: serviceEnvironment() })

export interface ServerOptions {
  /** turns Fossil's automatic backoffice off and runs `fossil backoffice --poll 1` beside it (hooks within about a second) */
  readonly fastHooks?: boolean
  /** serves this directory as Fossil's extension root (`--extroot`), where the OCX pages are linked */
  readonly extroot?: string
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
  const stop = async () => {
    await Promise.all(children.map(killGroup))
    await killStragglers(abs)
  }
  const extroot = options.extroot === undefined ? [] : ["--extroot", Path.resolve(options.extroot)]
  try {
    if (options.fastHooks === true) {
      await fossil(["settings", "backoffice-disable", "on", "-R", abs])
      spawn(["backoffice", "--poll", "1", abs])
    }
    for (let attempt = 0; ; attempt++) {
      const port = await freePort()
      const server = spawn(["server", "--nojail", "--localhost", "--port", String(port), ...extroot, abs])
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

// ---------- a person at the web forms ----------

export interface WebSession {
  readonly url: string
  readonly user: string
  readonly cookie: string
}

export const webLogin = async (url: string, user: string, password: string): Promise<WebSession> => {
  const res = await fetch(url + "login", {
    method: "POST",
    redirect: "manual",
    headers: { "Content-Type": "application/x-www-form-urlencoded", Referer: url + "login" },
    body: new URLSearchParams({ u: user, p: password, in: "Login" }).toString()
  })
  await res.arrayBuffer()
  const cookie = (res.headers.getSetCookie?.() ?? []).map((c) => c.split(";")[0]!).find((c) => c.startsWith("fossil-"))
  if (cookie === undefined) throw new Error(`login of ${user} at ${url} failed (HTTP ${res.status})`)
  return { url, user, cookie }
}

const csrfOf = async (s: WebSession, page: string): Promise<string | undefined> => {
  const res = await fetch(s.url + page, { headers: { Cookie: s.cookie } })
  const html = await res.text()
  return /name="csrf" value="([^"]*)"/.exec(html)?.[1]
}

/** A form posted as a person; a write the server refused because others held the database is posted again. */
const formPost = async (s: WebSession, page: string, fields: Record<string, string>, formPage = page) => {
  for (let attempt = 1; ; attempt++) {
    const r = await formPostOnce(s, page, fields, formPage)
    if (!(r.status >= 400 && /database is locked/i.test(r.body)) || attempt === 5) return r
    await new Promise((resolve) => setTimeout(resolve, 200 * attempt))
  }
}

const formPostOnce = async (s: WebSession, page: string, fields: Record<string, string>, formPage: string) => {
  const csrf = await csrfOf(s, formPage)
  const res = await fetch(s.url + page, {
    method: "POST",
    redirect: "manual",
    headers: { "Content-Type": "application/x-www-form-urlencoded", Cookie: s.cookie, Referer: s.url + page },
    body: new URLSearchParams({ ...fields, ...(csrf === undefined ? {} : { csrf }) }).toString()
  })
  const body = await res.text()
  return { status: res.status, location: res.headers.get("location") ?? "", body }
}

/** The full hash of the one artifact whose hash starts with `prefix`. */
export const fullHash = (repository: string, prefix: string): string => {
  const db = new BetterSqlite3(repository, { readonly: true, fileMustExist: true })
  try {
    const rows = db.prepare<[string], { uuid: string }>("SELECT uuid FROM blob WHERE uuid GLOB ? || '*'").all(prefix)
    if (rows.length !== 1) throw new Error(`${rows.length} artifacts start with ${prefix}`)
    return rows[0]!.uuid
  } finally {
    db.close()
  }
}

const postedHash = (server: { repository: string }, r: { status: number; location: string; body: string }, what: string) => {
  const m = /\/forumpost\/([0-9a-f]+)/.exec(r.location)
  if (r.status !== 302 || m === null) throw new Error(`${what}: HTTP ${r.status}, Location "${r.location}": ${r.body.replace(/<[^>]*>/g, " ").replace(/\s+/g, " ").slice(0, 300)}`)
  return fullHash(server.repository, m[1]!)
}

/** A new thread through /forume1, as the person signed in. Returns the post's full hash. */
export const webNewThread = async (
  server: { repository: string },
  s: WebSession,
  post: { readonly title: string; readonly text: string; readonly mimetype?: string }
): Promise<string> =>
  postedHash(server, await formPost(s, "forume1", {
    title: post.title, mimetype: post.mimetype ?? "text/x-markdown", content: post.text, submit: "1"
  }), `new thread by ${s.user}`)

/**
 * A person's post through a form, tried once: a refusal (such as "database is locked") is returned
 * as it came, for tests that must see whether a person's post fails.
 */
export const webPostOnce = (s: WebSession, page: string, fields: Record<string, string>, formPage = page) =>
  formPostOnce(s, page, fields, formPage)

/** A reply through /forume2 tried once, not again on "database is locked": its HTTP answer, and its full hash when it was stored. */
export const webReplyOnce = async (
  server: { repository: string },
  s: WebSession,
  reply: { readonly to: string; readonly text: string; readonly mimetype?: string }
): Promise<{ readonly status: number; readonly body: string; readonly hash: string | undefined }> => {
  const r = await formPostOnce(s, "forume2", {
    fpid: reply.to, reply: "1", mimetype: reply.mimetype ?? "text/x-markdown", content: reply.text, submit: "1"
  }, "forume2")
  const m = /\/forumpost\/([0-9a-f]+)/.exec(r.location)
  return { status: r.status, body: r.body, hash: r.status === 302 && m !== null ? fullHash(server.repository, m[1]!) : undefined }
}

/** A reply through /forume2 to the post `to` (full hash). */
export const webReply = async (
  server: { repository: string },
  s: WebSession,
  reply: { readonly to: string; readonly text: string; readonly mimetype?: string }
): Promise<string> =>
  postedHash(server, await formPost(s, "forume2", {
    fpid: reply.to, reply: "1", mimetype: reply.mimetype ?? "text/x-markdown", content: reply.text, submit: "1"
  }), `reply by ${s.user}`)

/** An edit through /forume2 of the post `of`. */
export const webEdit = async (
  server: { repository: string },
  s: WebSession,
  edit: { readonly of: string; readonly text: string; readonly title?: string }
): Promise<string> =>
  postedHash(server, await formPost(s, "forume2", {
    fpid: edit.of, edit: "1", mimetype: "text/x-markdown", content: edit.text, submit: "1",
    ...(edit.title === undefined ? {} : { title: edit.title })
  }), `edit by ${s.user}`)

/** A new ticket through /tktnew. Returns the ticket id. */
export const webNewTicket = async (
  s: WebSession,
  t: { readonly title: string; readonly icomment: string }
): Promise<string> => {
  const r = await formPost(s, "tktnew", {
    title: t.title, type: "Code_Defect", severity: "Critical", mutype: "Plain Text", icomment: t.icomment, submit: "Submit"
  })
  const m = /\/tktview\/([0-9a-f]+)/.exec(r.location)
  if (r.status !== 302 || m === null) throw new Error(`new ticket by ${s.user}: HTTP ${r.status} ${r.body.slice(0, 200)}`)
  return m[1]!
}

/** A change to a ticket through /tktedit, appending icomment. */
export const webEditTicket = async (s: WebSession, t: { readonly ticket: string; readonly icomment: string }): Promise<void> => {
  const r = await formPost(s, "tktedit", { name: t.ticket, mutype: "Plain Text", icomment: t.icomment, submit: "Submit" },
    `tktedit?name=${t.ticket}`)
  if (r.status !== 302) throw new Error(`ticket edit by ${s.user}: HTTP ${r.status} ${r.body.slice(0, 200)}`)
}

export const webPage = async (url: string, session?: WebSession): Promise<{ status: number; text: string }> => {
  const res = await fetch(url, { headers: session === undefined ? {} : { Cookie: session.cookie } })
  return { status: res.status, text: await res.text() }
}

// ---------- a person pushing from a clone ----------

/** `fossil clone --save-http-password` as `user`; returns the clone's path. */
export const cloneAs = async (url: string, user: string, password: string, path: string): Promise<string> => {
  const u = new URL(url)
  u.username = encodeURIComponent(user)
  u.password = encodeURIComponent(password)
  await fossil(["clone", "--save-http-password", "--no-open", u.toString(), Path.resolve(path)], user)
  return Path.resolve(path)
}

/**
 * Puts a composed artifact into the clone (bundle import, then `unsent` so one round
 * trip carries it) and pushes. Fails on `Error:` lines, since `fossil push` exits 0.
 */
export const pushArtifacts = async (clone: string, user: string, artifacts: ReadonlyArray<Artifact>): Promise<string> => {
  const dir = makeTempDir("ocx2-push-")
  try {
    const db = new BetterSqlite3(clone, { fileMustExist: true })
    let projectCode: string
    try {
      projectCode = db.prepare<[], { value: string }>("SELECT value FROM config WHERE name = 'project-code'").get()!.value
    } finally {
      db.close()
    }
    const bundle = Path.join(dir, "b.bundle")
    writeBundle(bundle, projectCode, artifacts)
    await fossil(["bundle", "import", bundle, "--publish", "-R", clone], user)
    const w = new BetterSqlite3(clone, { fileMustExist: true })
    try {
      const add = w.prepare("INSERT OR IGNORE INTO unsent SELECT rid FROM blob WHERE uuid = ?")
      for (const a of artifacts) add.run(a.hash)
    } finally {
      w.close()
    }
    return await pushClone(clone, user)
  } finally {
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}

export const pushClone = async (clone: string, user: string): Promise<string> => {
  const r = await runFossil(["push", "-R", clone], { user })
  const out = `${r.stdout}\n${r.stderr}`
  const errors = errorLines(out)
  if (r.code !== 0 || errors.length > 0) throw new Error(`fossil push of ${clone} failed: ${errors.join("; ") || out}`)
  return out
}

// ---------- the scoped Effect API ----------

export interface FossilServerOptions extends ServerOptions {
  readonly users: ReadonlyArray<TestUser>
  readonly wal?: boolean
  readonly nobody?: string
}

export interface FossilServer extends RunningServer {
  /** the temporary directory holding the repository (and room for clones) */
  readonly dir: string
}

/** A fresh repository served on a free port; server, poller and files go when the scope closes. */
export const fossilServer = (options: FossilServerOptions): Effect.Effect<FossilServer, Error, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const dir = makeTempDir("ocx2-fossil-")
        try {
          const repository = await createRepository(Path.join(dir, "served.fossil"), options.users, {
            ...(options.wal === undefined ? {} : { wal: options.wal }),
            ...(options.nobody === undefined ? {} : { nobody: options.nobody })
          })
          const running = await startServer(repository, {
            fastHooks: options.fastHooks ?? false,
            ...(options.extroot === undefined ? {} : { extroot: options.extroot })
          })
          return { ...running, dir }
        } catch (e) {
          Fs.rmSync(dir, { recursive: true, force: true })
          throw e
        }
      },
      catch: (e) => (e instanceof Error ? e : new Error(String(e)))
    }),
    (server) =>
      Effect.promise(async () => {
        await server.stop()
        Fs.rmSync(server.dir, { recursive: true, force: true })
      })
  )
