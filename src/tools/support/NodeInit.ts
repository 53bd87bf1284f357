// init (issue 40): a node on the server's host in one command, as docs/operations.md "Installing"
// describes it step by step. Each step looks first and says "already" where it holds, acts
// otherwise, or names what stops it and what to do instead; a later step that needs it is skipped,
// named with the step it needs. The steps are the tools' own (stage, accept, hook) where one exists.

import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { openDatabase } from "../../fossil/Sqlite.js"
import { runFossil } from "../../fossil/Command.js"
import { backofficeOf, hookCommandOf, readHooks, readUser, runsOcx2Hook } from "../../node/HookInstall.js"
import { finish, recording, refuse, type Handled } from "../../operations/Operations.js"
import { releasePaths } from "../../release/ReleasePaths.js"
import { canonicalRepository, nodeOf } from "../../root/HookFiles.js"
import { runningSupervisor } from "../../root/SupervisorFiles.js"
import { cloneEntryOf } from "../../root/CloneFiles.js"
import { readPasswordsFile } from "../../root/ClonePasswords.js"
import { runCloneNode } from "../../node/CloneNode.js"
import type { ToolContext } from "../Tool.js"
import { acceptRelease } from "../accept.js"
import { stageRelease } from "../stage.js"
import { installHook } from "./HookSetup.js"
import { rootOfCall } from "./ReleaseCall.js"

const optionalText = (description: string) => Schema.optionalWith(Schema.String.annotations({ description }), { exact: true })

export const InitInput = Schema.Struct({
  node: Schema.String.annotations({ description: "the node user: made where the repository has none, holding no capability of its own" }),
  root: optionalText("the release root: programs, care, workspaces (by default the root this program was released into)"),
  from: optionalText("a checkout to stage and accept into ROOT when ROOT serves no release yet (its gate takes a minute or two)"),
  processUser: optionalText("a process user for runs (process.user): made where the repository has none, holding o and i"),
  serverUrl: optionalText("the server's URL (by default the repository's email-url or base-url, else that of a fossil server serving the repository, found in /proc)"),
  extroot: optionalText("the server's extension root, where the pages are linked (by default the --extroot of the fossil server found serving the repository)"),
  streamPort: Schema.optionalWith(Schema.Number.annotations({ description: "the stream server's fixed port, named in default-csp (by default one free now)" }), { exact: true }),
  supervisor: Schema.optionalWith(Schema.Literal("systemd", "detached").annotations({
    description: "how the supervisor runs: systemd (a unit written and enabled) or detached (a process started now, gone at a reboot); by default systemd where it runs as PID 1"
  }), { exact: true }),
  clone: optionalText("a clone's host: the server's URL (https://SERVER/REPO); the clone is made as ROOT/clones/NODE.fossil, and the node registered and started on it"),
  passwords: optionalText("with --clone: the node user's passwords file {\"user\": NODE, \"password\": ...}, mode 600 (docs/operations.md, \"A node on another host\")")
})
export type InitInput = typeof InitInput.Type

export const InitStep = Schema.Struct({
  step: Schema.String,
  state: Schema.Literal("done", "already", "would", "failed", "skipped").annotations({
    description: "done now; already so (nothing changed); would be done (a dry run); failed (fix says what to do instead); skipped (it needs a step that failed)"
  }),
  words: Schema.String,
  fix: Schema.optionalWith(Schema.String, { exact: true })
})
export type InitStep = typeof InitStep.Type

export const InitOutput = Schema.Struct({
  repository: Schema.String,
  root: Schema.String,
  node: Schema.String,
  serverUrl: Schema.optionalWith(Schema.String, { exact: true }),
  supervisor: Schema.optionalWith(Schema.Literal("systemd", "detached"), { exact: true }),
  ok: Schema.Boolean.annotations({ description: "every step done or already so" }),
  steps: Schema.Array(InitStep)
})
export type InitOutput = typeof InitOutput.Type

// ---------------------------------------------------------------------------------------------
// what the steps read

const firstLine = (e: unknown): string => (e instanceof Error ? e.message : String((e as { message?: unknown })?.message ?? e)).split("\n")[0]!

/** A config value of the repository (a setting Fossil keeps there), or undefined. */
const configOf = (repository: string, name: string): string | undefined => {
  try {
    const db = openDatabase(repository, { readonly: true, fileMustExist: true })
    try {
      const row = db.prepare<[string], { value: unknown }>("SELECT value FROM config WHERE name = ?").get(name)
      return row === undefined || row.value === null || String(row.value) === "" ? undefined : String(row.value)
    } finally {
      db.close()
    }
  } catch {
    return undefined
  }
}

export interface FoundServer {
  readonly pid: number
  readonly url: string
  readonly extroot: string | undefined
  readonly localhost: boolean
}

/**
 * A `fossil server` (or `fossil http`'s listener, `fossil ui`) serving `repository`, from /proc: the
 * file itself (URL http://127.0.0.1:PORT/) or a directory holding it (.../NAME); its --extroot.
 */
export const findServer = (repository: string): FoundServer | undefined => {
  const wanted = canonicalRepository(repository)
  let entries: Array<string>
  try {
    entries = Fs.readdirSync("/proc").filter((e) => /^\d+$/.test(e))
  } catch {
    return undefined
  }
  for (const entry of entries.sort((a, b) => Number(a) - Number(b))) {
    let argv: Array<string>
    let cwd: string
    try {
      argv = Fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").filter((a) => a !== "")
      cwd = Fs.readlinkSync(`/proc/${entry}/cwd`)
    } catch {
      continue
    }
    if (Path.basename(argv[0] ?? "") !== "fossil" || !(argv[1] === "server" || argv[1] === "ui")) continue
    const option = (name: string) => {
      const at = argv.findIndex((a) => a === name || a === `-${name}`)
      if (at >= 0) return argv[at + 1]
      const joined = argv.find((a) => a.startsWith(`${name}=`) || a.startsWith(`-${name}=`))
      return joined?.slice(joined.indexOf("=") + 1)
    }
    let base: string | undefined
    for (const arg of argv.slice(2)) {
      if (arg.startsWith("-")) continue
      let real: string
      try {
        real = Fs.realpathSync(Path.resolve(cwd, arg))
      } catch {
        continue
      }
      if (real === wanted) base = ""
      else if (Path.dirname(wanted) === real && Fs.statSync(real).isDirectory()) base = Path.basename(wanted).replace(/\.fossil$/, "")
      if (base !== undefined) break
    }
    if (base === undefined) continue
    const port = option("--port") ?? (argv[1] === "ui" ? undefined : "8080")
    if (port === undefined) continue
    const baseurl = option("--baseurl")
    const url = baseurl !== undefined ? baseurl.replace(/\/+$/, "") : `http://127.0.0.1:${port}${base === "" ? "" : `/${base}`}`
    const extroot = option("--extroot")
    return {
      pid: Number(entry), url,
      extroot: extroot === undefined ? undefined : Path.resolve(cwd, extroot),
      localhost: argv.includes("--localhost") || argv[1] === "ui"
    }
  }
  return undefined
}

/** Whether systemd runs this host (sd_booted: /run/systemd/system), and what PID 1 is. */
export const serviceManager = (): { readonly systemd: boolean; readonly pid1: string } => {
  let pid1 = "unknown"
  try {
    pid1 = Fs.readFileSync("/proc/1/comm", "utf8").trim()
  } catch {
    // unreadable: said as unknown
  }
  return { systemd: Fs.existsSync("/run/systemd/system") && pid1 === "systemd", pid1 }
}

/**
 * The supervisor's unit as docs/systemd/ocx2-supervise@.service gives it, for `account` (the
 * account that owns the repository and ROOT, and runs init): its User and USER.
 */
export const supervisorUnitText = (template: string, account: string): string =>
  template.replace(/^User=.*$/m, `User=${account}`).replace(/^Environment=USER=.*$/m, `Environment=USER=${account}`)

/** docs/systemd/ocx2-supervise@.service as this release carries it (test/tools/init.test.ts holds it to the file). */
export const supervisorUnitTemplate = `# The node's resident supervisor on the server's host (docs/architecture.md, "The supervisor";
# docs/operations.md). Templated by node user: ocx2-supervise@lab.service supervises the node lab,
# which \`ocx2 --repository REPO hook --node lab\` started on the served repository. /etc/ocx2/supervise.env sets
#   OCX2_ROOT=/srv/ocx2        the release root (ROOT/current/ocx2)
# It hears every receipt through inotify and runs the node's round at once; the after-receive hook
# then only wakes it, and with it stopped the hook does the rounds itself, as before. It starts as
# \`hook --node\` does (what dead watchers left sent, every open run decided, live watchers taken
# back), so a restart at any moment loses nothing. It ends by itself when the served release is
# switched (accept, rollback), and Restart=always starts the new release's.

[Unit]
Description=OCX node %i: its supervisor (hears receipts at once, answers a dead watcher's run lost)
After=network.target

[Service]
# the account that owns the repository and ROOT, as the server's (the hook and the watchers run as it)
User=fossil
Environment=USER=fossil
EnvironmentFile=/etc/ocx2/supervise.env
# ocx2-supervise is \`ocx2 supervise\` without the command line's code (less resident memory)
ExecStart=/bin/sh -c 'exec "$OCX2_ROOT/current/ocx2-supervise" --node %i --root "$OCX2_ROOT"'
Restart=always
RestartSec=1
# the watchers it starts hold the runs: they outlive it (a supervisor started again takes them back)
KillMode=process
# cgroup v2 (docs/operations.md, "Limits and cgroups"): the watchers it starts get memory and
# processes limits from the unit's group, as the server's hook's watchers do
Delegate=yes
DelegateSubgroup=ocx2-node

[Install]
WantedBy=multi-user.target
`

export const unitFile = "/etc/systemd/system/ocx2-supervise@.service"
export const unitEnvFile = "/etc/ocx2/supervise.env"

/** Fossil's default content-security policy (its default-csp when unset). */
export const fossilDefaultCsp = "default-src 'self' data:; script-src 'self' 'nonce-$nonce'; style-src 'self' 'unsafe-inline'; img-src * data:"

/** `csp` with `origin` allowed to connect (added to its connect-src, or a connect-src added); unchanged when it already is. */
export const cspWith = (csp: string, origin: string): string => {
  const directives = csp.split(";").map((d) => d.trim()).filter((d) => d !== "")
  const at = directives.findIndex((d) => /^connect-src\s/.test(d) || d === "connect-src")
  if (at < 0) return [...directives, `connect-src 'self' ${origin}`].join("; ")
  const sources = directives[at]!.split(/\s+/).slice(1)
  if (sources.includes(origin)) return csp
  directives[at] = ["connect-src", ...sources, origin].join(" ")
  return directives.join("; ")
}

const freePort = (host: string): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = Net.createServer()
    server.once("error", reject)
    server.listen(0, host, () => {
      const port = (server.address() as Net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

class StepFailed extends Schema.TaggedError<StepFailed>()("StepFailed", { message: Schema.String }) {}

const fossilCall = (args: ReadonlyArray<string>) =>
  Effect.tryPromise({
    try: () => runFossil(args, { user: process.env.USER ?? Os.userInfo().username }),
    catch: (e) => new StepFailed({ message: `fossil ${args.join(" ")}: ${firstLine(e)}` })
  }).pipe(Effect.flatMap((r) =>
    r.code === 0 ? Effect.succeed(r.stdout) : Effect.fail(new StepFailed({ message: `fossil ${args.join(" ")} exited ${String(r.code)}: ${(r.stderr + r.stdout).trim()}` }))))

const run = (program: string, args: ReadonlyArray<string>) =>
  Effect.try({
    try: () => ChildProcess.execFileSync(program, [...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }),
    catch: (e) => new StepFailed({ message: `${program} ${args.join(" ")}: ${firstLine((e as { stderr?: unknown }).stderr || e)}` })
  })

const quoted = (s: string) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", "'\\''")}'`)

// ---------------------------------------------------------------------------------------------

/** init: every step, each said; the answer's ok only when each is done or already so. */
export const initNode = (input: InitInput, context: ToolContext, programPath: string | undefined) => {
  const act = recording(context.dryRun)
  return finish(act, Effect.gen(function*() {
    // on the server's host, setup (as hook); on a clone's host there is no repository to ask yet:
    // the node user's password on the server is what the node step signs in with
    const clone = input.clone !== undefined
    if (!clone && !context.caller.capabilities.includes("s")) return yield* refuse("init needs Fossil's setup capability (s)")
    if (!clone && context.repository === undefined) return yield* refuse("init sets up the node of the served repository: name it with --repository REPO before the tool's name")
    // by default the root this program was released into; a checkout's program is told --root ROOT
    const root = input.root !== undefined ? Path.resolve(input.root) : yield* rootOfCall("init", undefined, programPath, context.entryPoint)
    const paths = releasePaths(root)
    const repository = clone ? Path.join(root, "clones", `${input.node}.fossil`) : canonicalRepository(context.repository!)
    if (!clone && !Fs.existsSync(repository)) return yield* refuse(`no repository file ${repository}`)
    const cli = clone ? `ocx2 --repository ${repository}` : `ocx2 --repository ${repository} --user ADMIN`
    const steps: Array<InitStep> = []
    const failed = new Set<string>()
    const say = (step: string, state: InitStep["state"], words: string, fix?: string) => {
      steps.push({ step, state, words, ...(fix !== undefined ? { fix } : {}) })
      if (state === "failed") failed.add(step)
      // the operations log holds what was done (or would be); each step's state is in the answer's steps, and said as it is decided
      context.steps?.(`init: ${step}: ${state === "done" ? "" : `${state}: `}${words}${fix !== undefined ? ` — instead: ${fix}` : ""}\n`)
    }
    const needs = (step: string, ...on: ReadonlyArray<string>): boolean => {
      const missing = on.filter((s) => failed.has(s))
      if (missing.length === 0) return true
      say(step, "skipped", `it needs the step${missing.length === 1 ? "" : "s"} ${missing.join(", ")}, which failed: mend that and run init again`)
      failed.add(step)
      return false
    }
    /** an action of a step: done (or, in a dry run, would be); a failure fails the step */
    const step = (name: string, detail: string, effect: Effect.Effect<unknown, StepFailed>, fix: string) =>
      act(name, detail, effect).pipe(
        Effect.as(true),
        Effect.catchAll((e) => Effect.sync(() => {
          say(name, "failed", e.message, fix)
          return false
        }))
      )
    const doneOrWould = (name: string, words: string) => {
      steps.push({ step: name, state: context.dryRun ? "would" : "done", words })
      context.steps?.(`init: ${name}: ${context.dryRun ? "would: " : ""}${words}\n`)
    }
    /** a tool's answer as a step's: its operations merged into init's, its refusal the step's failure */
    const merged = <O>(name: string, handled: Handled<O>, fix: string): O | undefined => {
      for (const o of handled.operations) {
        if (o.done) act.note(`${name}: ${o.op}`, o.detail)
      }
      if (handled.stopped !== undefined && handled.stopped.reason !== "completed") {
        say(name, "failed", handled.stopped.message ?? handled.stopped.reason, fix)
        return undefined
      }
      return handled.output
    }

    // 1. the node user, holding no capability of its own (on a clone's host: the passwords file and the clone)
    if (clone) {
      const url = input.clone!.replace(/\/+$/, "")
      const read = input.passwords === undefined ? undefined : readPasswordsFile(input.passwords)
      if (read === undefined || read._tag === "Refused") {
        say("passwords", "failed", read === undefined ? "no passwords file: give --passwords FILE" : read.why,
          `install -m 600 /dev/null FILE; echo '{"user": "${input.node}", "password": "..."}' > FILE; init again with --passwords FILE`)
      } else if (read.passwords.user !== input.node) {
        say("passwords", "failed", `${read.passwords.file} is for ${read.passwords.user}, not the node ${input.node}`, `--node ${read.passwords.user}, or the node's own passwords file`)
      } else {
        say("passwords", "already", `${read.passwords.file} holds ${input.node}'s password, readable by this account alone`)
      }
      if (needs("clone", "passwords")) {
        if (Fs.existsSync(repository)) {
          say("clone", "already", `${repository} is there (ocx2 node checks that it is a clone of ${url}, as ${input.node})`)
        } else {
          const read2 = readPasswordsFile(input.passwords!)
          const withUser = new URL(url)
          if (read2._tag === "Passwords") {
            withUser.username = encodeURIComponent(read2.passwords.user)
            withUser.password = encodeURIComponent(read2.passwords.password)
          }
          const made = yield* step("clone", `fossil clone --save-http-password --no-open ${url} (as ${input.node}, the password from the passwords file) ${repository}`,
            Effect.andThen(Effect.sync(() => Fs.mkdirSync(Path.dirname(repository), { recursive: true })),
              fossilCall(["clone", "--save-http-password", "--no-open", withUser.toString(), repository]).pipe(
                Effect.mapError((e) => new StepFailed({ message: e.message.replaceAll(withUser.toString(), `${url} (as ${input.node})`) })))),
            `fossil clone --save-http-password https://${input.node}@SERVER/REPO ${repository}`)
          if (made) doneOrWould("clone", `${repository}, a clone of ${url} made as ${input.node}, its password saved`)
        }
      }
    }
    const nodeRow = clone ? { capabilities: "" } : yield* readUser(repository, input.node).pipe(Effect.mapError((e) => new StepFailed({ message: e.message })))
    if (clone) {
      // the clone's users are the server's business
    } else if (nodeRow === undefined) {
      const password = Crypto.randomBytes(18).toString("base64url")
      const made = yield* step("node user",
        `fossil user new ${input.node} "" PASSWORD -R ${repository}; fossil user capabilities ${input.node} "" -R ${repository} (a random password, never shown: the node never signs in)`,
        Effect.andThen(fossilCall(["user", "new", input.node, "", password, "-R", repository]), fossilCall(["user", "capabilities", input.node, "", "-R", repository])),
        `fossil user new ${input.node} "" PASSWORD -R ${repository}, then init again`)
      if (made) doneOrWould("node user", `${input.node} made, holding no capability of its own`)
    } else if (nodeRow.capabilities === "") {
      say("node user", "already", `${input.node} holds no capability of its own`)
    } else {
      say("node user", "failed", `${input.node} holds ${nodeRow.capabilities} of its own; a node user holds none (init changes no existing user's capabilities)`,
        `fossil user capabilities ${input.node} "" -R ${repository} (if ${input.node} is nobody else's login), or name another node user`)
    }

    // 2. a process user, where asked
    if (input.processUser !== undefined && clone) {
      say("process user", "failed", `a clone's host makes no users: process users are the server's (${input.processUser} is asked of it by each run)`,
        `on the server: fossil user new ${input.processUser} "" PASSWORD -R REPO; fossil user capabilities ${input.processUser} oi -R REPO (or init --process-user there)`)
    } else if (input.processUser !== undefined) {
      const row = yield* readUser(repository, input.processUser).pipe(Effect.mapError((e) => new StepFailed({ message: e.message })))
      if (row === undefined) {
        const password = Crypto.randomBytes(18).toString("base64url")
        const made = yield* step("process user",
          `fossil user new ${input.processUser} "" PASSWORD -R ${repository}; fossil user capabilities ${input.processUser} oi -R ${repository} (a random password, never shown)`,
          Effect.andThen(fossilCall(["user", "new", input.processUser, "", password, "-R", repository]), fossilCall(["user", "capabilities", input.processUser, "oi", "-R", repository])),
          `fossil user new ${input.processUser} "" PASSWORD -R ${repository}; fossil user capabilities ${input.processUser} oi -R ${repository}`)
        if (made) doneOrWould("process user", `${input.processUser} made, holding o and i (read and check in: what a run's clone needs); give it more with fossil user capabilities`)
      } else if (/[as]/.test(row.capabilities)) {
        say("process user", "failed", `${input.processUser} holds admin or setup (${row.capabilities}): runs as it are refused (refusal 4)`,
          `fossil user capabilities ${input.processUser} oi -R ${repository}, or name another process user`)
      } else {
        say("process user", "already", `${input.processUser} exists, holding ${row.capabilities === "" ? "nothing of its own" : row.capabilities}`)
      }
    }

    // 3. the server URL: given, the repository's, or a server found serving the file
    const server = clone ? undefined : findServer(repository)
    const known = clone ? (() => {
      const entry = cloneEntryOf(root, repository)
      return entry === undefined ? undefined : { user: entry.user, serverUrl: entry.serverUrl }
    })() : nodeOf(root, repository)
    const emailUrl = clone ? undefined : configOf(repository, "email-url")
    const baseUrl = clone ? undefined : configOf(repository, "base-url")
    const found = clone ? { url: input.clone!, from: "given with --clone" }
      : input.serverUrl !== undefined ? { url: input.serverUrl, from: "given with --server-url" }
      : emailUrl !== undefined ? { url: emailUrl, from: "the repository's email-url" }
      : baseUrl !== undefined ? { url: baseUrl, from: "the repository's base-url" }
      : server !== undefined ? { url: server.url, from: `the fossil server serving ${repository} (pid ${server.pid})` }
      : known?.serverUrl !== undefined ? { url: known.serverUrl, from: "the node's, as hook gave it before" }
      : undefined
    const serverUrl = found?.url.replace(/\/+$/, "")
    if (found === undefined) {
      say("server URL", "failed",
        `none given, the repository has no email-url or base-url, and no fossil server serving ${repository} runs on this host: runs with a clone step would be refused (refusal 8), and the pages and the stream cannot be set up`,
        `start the server (fossil server --nojail --extroot EXTROOT --port 8080 ${repository}) and run init again, or give --server-url URL`)
    } else if (known?.serverUrl !== undefined && known.serverUrl.replace(/\/+$/, "") === serverUrl) {
      say("server URL", "already", `${serverUrl} (${found.from}), the node's`)
    } else {
      doneOrWould("server URL", `${serverUrl} (${found.from}): the ${clone ? "node" : "hook"} step gives it to the node`)
    }

    // 4. the release root: a release served, or one staged and accepted from a checkout
    if (Fs.existsSync(paths.current) && Fs.existsSync(paths.hook)) {
      say("release", "already", `${root} serves ${Path.basename(Fs.realpathSync(paths.current))}` +
        (input.from !== undefined ? ` (--from ${input.from} not staged: to upgrade, ${cli} stage ${input.from} --root ${root}, then accept)` : ""))
    } else if (input.from === undefined) {
      say("release", "failed", `${root} serves no release (${paths.current} is missing)`,
        `give --from CHECKOUT (a checkout of ocx2, built: npm ci && npm run build) to stage and accept it, or ${cli} stage CHECKOUT --root ${root}; ${cli} accept --root ${root}`)
    } else if (context.dryRun) {
      yield* act("release", `mkdir -p ${root}; ${cli} stage ${input.from} --root ${root}; ${cli} accept --root ${root}`, Effect.void)
      doneOrWould("release", `stage ${input.from} into ${root} (its gate, build and smoke test: a minute or two), then accept it`)
    } else {
      Fs.mkdirSync(root, { recursive: true })
      const staged = merged("release", yield* stageRelease({ checkout: input.from, root }, context, programPath),
        `mend what stage said, then init again (or ${cli} stage ${input.from} --root ${root})`)
      const accepted = staged === undefined ? undefined
        : merged("release", yield* acceptRelease({ root }, context, programPath), `${cli} accept --root ${root}`)
      if (accepted !== undefined) doneOrWould("release", `${input.from} staged and accepted: ${root} serves ${Path.basename(Fs.realpathSync(paths.current))}`)
    }

    // 5. the hook, the node starting, fast mode (on a clone's host: ocx2 node --check, the node registered and starting)
    if (clone) {
      if (needs("node", "clone", "release")) {
        const url = serverUrl!
        const nodeCommand = `${cli} node ${url} ${input.passwords} --check --root ${root}`
        if (known?.user === input.node && known.serverUrl?.replace(/\/+$/, "") === url) {
          say("node", "already", `${repository} is registered in ${Path.join(paths.node, "clones.json")} as the node ${input.node} of ${url}`)
        } else if (context.dryRun) {
          yield* act("node", nodeCommand, Effect.void)
          doneOrWould("node", `${nodeCommand}: the clone registered, the node starting`)
        } else {
          const sub = recording(false)
          const started = merged("node", yield* runCloneNode({ server_url: url, passwords_file: input.passwords!, check: true, root }, { repository }, sub, programPath), nodeCommand)
          if (started !== undefined) doneOrWould("node", `registered and started: ${started.why}`)
        }
      }
    } else if (needs("hook", "node user", "release")) {
      const hooks = yield* readHooks(repository).pipe(Effect.mapError((e) => new StepFailed({ message: e.message })))
      const command = hookCommandOf(root)
      const ours = hooks.filter((h) => runsOcx2Hook(h.command))
      const backoffice = yield* backofficeOf(repository).pipe(Effect.mapError((e) => new StepFailed({ message: e.message })))
      const nodePoller = backoffice.pollers.some((p) => !backoffice.fossilPollers.includes(p))
      const sameUrl = (known?.serverUrl?.replace(/\/+$/, "")) === serverUrl
      const hookCommand = `${cli} hook --node ${input.node} --root ${root} --fast${serverUrl !== undefined ? ` --server-url ${serverUrl}` : ""}`
      if (ours.length === 1 && ours[0]!.command === command && ours[0]!.type === "after-receive" && known?.user === input.node && sameUrl &&
        backoffice.disabled && nodePoller && backoffice.fossilPollers.length === 0) {
        say("hook", "already", `installed (${command}), the node ${input.node}${serverUrl !== undefined ? ` at ${serverUrl}` : ""}, fast mode's poller running`)
      } else if (context.dryRun) {
        yield* act("hook", hookCommand, Effect.void)
        doneOrWould("hook", `${hookCommand}: the after-receive hook, the node starting, fast pickup`)
      } else {
        const hooked = merged("hook", yield* installHook({
          node: input.node, root, fast: true, ...(serverUrl !== undefined ? { serverUrl } : {})
        }, context, programPath), hookCommand)
        if (hooked !== undefined) {
          doneOrWould("hook", `${hooked.hook === "installed" ? "installed" : "kept"} ${command}; the node ${input.node} started; ${hooked.backoffice.words}`)
        }
      }
    }

    // 6. the supervisor: a systemd unit where systemd runs, detached otherwise
    const manager = serviceManager()
    const how = input.supervisor ?? (manager.systemd ? "systemd" : "detached")
    const why = input.supervisor !== undefined ? `asked with --supervisor ${input.supervisor}`
      : manager.systemd ? "systemd runs this host (PID 1)" : `systemd does not run this host: PID 1 is ${manager.pid1}`
    if (needs("supervisor", clone ? "node" : "hook")) {
      const running = runningSupervisor(root, repository, input.node)
      if (how === "systemd") {
        const account = Os.userInfo().username
        const unit = supervisorUnitText(supervisorUnitTemplate, account)
        const env = `OCX2_ROOT=${root}\n`
        const service = `ocx2-supervise@${input.node}.service`
        const has = (file: string, text: string) => {
          try {
            return Fs.readFileSync(file, "utf8") === text
          } catch {
            return false
          }
        }
        const state = (what: string) => {
          try {
            return ChildProcess.execFileSync("systemctl", [what, service], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim()
          } catch (e) {
            return String((e as { stdout?: unknown }).stdout ?? "").trim()
          }
        }
        const otherEnv = (() => {
          try {
            const text = Fs.readFileSync(unitEnvFile, "utf8")
            return text === env ? undefined : text.trim()
          } catch {
            return undefined
          }
        })()
        if (has(unitFile, unit) && has(unitEnvFile, env) && state("is-enabled") === "enabled" && state("is-active") === "active") {
          say("supervisor", "already", `${service} enabled and active (${why})`)
        } else if (otherEnv !== undefined) {
          say("supervisor", "failed", `${unitEnvFile} holds ${otherEnv}, not OCX2_ROOT=${root}: another root's supervisors read it (${why})`,
            `give each root's units their own file, or put OCX2_ROOT=${root} in it; then systemctl enable --now ${service}`)
        } else {
          const ok = (yield* step("supervisor", `write ${unitFile} (docs/systemd/ocx2-supervise@.service, User=${account})`,
            Effect.try({ try: () => Fs.writeFileSync(unitFile, unit), catch: (e) => new StepFailed({ message: firstLine(e) }) }),
            `install -m 644 docs/systemd/ocx2-supervise@.service /etc/systemd/system/ (User=${account})`)) &&
            (yield* step("supervisor", `write ${unitEnvFile}: OCX2_ROOT=${root}`,
              Effect.try({ try: () => { Fs.mkdirSync(Path.dirname(unitEnvFile), { recursive: true }); Fs.writeFileSync(unitEnvFile, env) }, catch: (e) => new StepFailed({ message: firstLine(e) }) }),
              `echo OCX2_ROOT=${root} > ${unitEnvFile}`)) &&
            (yield* step("supervisor", "systemctl daemon-reload", run("systemctl", ["daemon-reload"]), "systemctl daemon-reload")) &&
            (yield* step("supervisor", `systemctl enable --now ${service}`, run("systemctl", ["enable", "--now", service]), `systemctl enable --now ${service}; journalctl -u ${service} says why it fails`))
          if (ok) doneOrWould("supervisor", `${service} written, enabled and started (${why})${running !== undefined ? `; the detached supervisor pid ${running.pid} already running: end it (ocx2 supervise --node ${input.node} --root ${root} --stop) so that the unit's takes its place` : ""}`)
        }
      } else if (running !== undefined) {
        say("supervisor", "already", `the supervisor runs (pid ${running.pid}, since ${running.since})`)
      } else {
        const program = Path.join(paths.current, "ocx2-supervise")
        const out = Path.join(paths.node, "supervise.out")
        const started = yield* step("supervisor",
          `start ${program} --node ${input.node} --root ${root} detached, its output in ${out} (${why}; it does not survive a reboot; run init again after one, or use docs/systemd/ocx2-supervise@.service)`,
          Effect.tryPromise({
            try: async () => {
              Fs.mkdirSync(paths.node, { recursive: true })
              const fd = Fs.openSync(out, "a")
              const child = ChildProcess.spawn(program, ["--node", input.node, "--root", root], {
                cwd: "/", detached: true, stdio: ["ignore", fd, fd],
                env: {
                  PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin", HOME: process.env.HOME ?? "/",
                  LANG: process.env.LANG ?? "C.UTF-8", USER: process.env.USER ?? Os.userInfo().username
                }
              })
              Fs.closeSync(fd)
              let exited: string | undefined
              child.once("exit", (code, signal) => {
                exited = signal ?? String(code)
              })
              child.once("error", (e) => {
                exited = e.message
              })
              child.unref()
              for (const deadline = Date.now() + 90_000; runningSupervisor(root, repository, input.node) === undefined;) {
                if (exited !== undefined) throw new Error(`it exited at once (${exited}): ${Fs.readFileSync(out, "utf8").trim().split("\n").slice(-3).join("; ")}`)
                if (Date.now() > deadline) throw new Error(`it did not start the node within 90 s (${out})`)
                await new Promise((resolve) => setTimeout(resolve, 50))
              }
            },
            catch: (e) => new StepFailed({ message: firstLine(e) })
          }),
          `${program} --node ${input.node} --root ${root} (or the unit docs/systemd/ocx2-supervise@.service)`)
        if (started) doneOrWould("supervisor", `started detached (${why}); it does not survive a reboot: run init again after one, or use the unit`)
      }
    }

    // 7. the extension root's links: the pages, the pre-release candidate's pages, git
    const extroot = input.extroot !== undefined ? Path.resolve(input.extroot) : server?.extroot
    if (clone) {
      // a clone's host serves no pages and no stream: the server's host does
    } else if (needs("pages", "release")) {
      if (extroot === undefined) {
        say("pages", "failed",
          `no extension root: none given with --extroot, and ${server === undefined ? "no fossil server serving the repository was found" : `the fossil server (pid ${server.pid}) runs without --extroot`}`,
          `give --extroot DIR, and serve the repository with fossil server --nojail --extroot DIR (docs/operations.md, "Serving the OCX pages")`)
      } else {
        const links = [
          ["ocx2-cgi", Path.join(paths.current, "ocx2-cgi")],
          ["ocx2-cgi-next", Path.join(paths.next, "ocx2-cgi")],
          ["git", Path.join(paths.current, "ocx2-git")]
        ] as const
        const made: Array<string> = []
        const already: Array<string> = []
        let broken = false
        for (const [name, target] of links) {
          const at = Path.join(extroot, name)
          let now: string | undefined
          let there = false
          try {
            Fs.lstatSync(at)
            there = true
            now = Fs.readlinkSync(at)
          } catch {
            now = undefined
          }
          if (now === target) {
            already.push(name)
          } else if (there) {
            say("pages", "failed", `${at} is there already${now !== undefined ? `, a link to ${now}` : ", not a link"}: init replaces nothing it did not make`,
              `rm ${at}; ln -s ${target} ${at} (or init again after removing it)`)
            broken = true
          } else {
            const ok = yield* step("pages", `ln -s ${target} ${at}`,
              Effect.try({ try: () => { Fs.mkdirSync(extroot, { recursive: true }); Fs.symlinkSync(target, at) }, catch: (e) => new StepFailed({ message: firstLine(e) }) }),
              `ln -s ${target} ${at}`)
            if (ok) made.push(name)
            else broken = true
          }
        }
        const served = server === undefined || server.extroot === undefined ? "" : server.extroot === extroot ? "" :
          `; note: the fossil server (pid ${server.pid}) serves ${server.extroot}, not ${extroot}`
        if (!broken) {
          if (made.length === 0) say("pages", "already", `${extroot} links ${already.join(", ")} to the releases${served}`)
          else doneOrWould("pages", `${extroot}: ${made.join(", ")} linked${already.length > 0 ? ` (${already.join(", ")} already)` : ""}${served}${serverUrl !== undefined ? `; open ${serverUrl}/ext/ocx2-cgi` : ""}`)
        }
      }
    }

    // 8. the stream server's fixed port, and Fossil's content-security policy allowing it
    if (clone) {
      // as above
    } else if (needs("stream", "server URL", "release")) {
      const file = Path.join(paths.settings, "stream")
      let settings: Record<string, unknown> = {}
      let readable = true
      try {
        const parsed = JSON.parse(Fs.readFileSync(file, "utf8")) as unknown
        if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) settings = parsed as Record<string, unknown>
        else readable = false
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "ENOENT") readable = false
      }
      const urlHost = new URL(serverUrl!).hostname
      const listen = typeof settings.host === "string" ? settings.host : server?.localhost === false ? "0.0.0.0" : "127.0.0.1"
      let origin: string | undefined
      if (!readable) {
        say("stream", "failed", `${file} is not a JSON object: the stream server passes it over`,
          `mend it (docs/operations.md, "Following runs": {"host": ..., "port": ...}), then init again`)
      } else if (typeof settings.port === "number" && settings.port > 0) {
        origin = typeof settings.url === "string" ? new URL(settings.url).origin : `http://${urlHost}:${settings.port}`
        say("stream", "already", `${file}: the stream server listens on ${listen}, port ${settings.port}`)
      } else {
        const port = input.streamPort ?? (yield* Effect.promise(() => freePort(listen === "0.0.0.0" ? "0.0.0.0" : listen)))
        const next = { ...settings, host: listen, port }
        origin = typeof settings.url === "string" ? new URL(settings.url).origin : `http://${urlHost}:${port}`
        const ok = yield* step("stream", `write ${file}: ${JSON.stringify(next)}`,
          Effect.try({ try: () => { Fs.mkdirSync(paths.settings, { recursive: true }); Fs.writeFileSync(file, `${JSON.stringify(next)}\n`) }, catch: (e) => new StepFailed({ message: firstLine(e) }) }),
          `echo '${JSON.stringify(next)}' > ${file}`)
        if (ok) doneOrWould("stream", `the stream server listens on ${listen}, port ${port} (where Fossil listens; a fixed port, which default-csp names); a running one takes it when it next starts`)
      }
      if (origin !== undefined) {
        const csp = configOf(repository, "default-csp")
        const wanted = cspWith(csp ?? fossilDefaultCsp, origin)
        if (csp !== undefined && wanted === csp) {
          say("content-security policy", "already", `default-csp lets the run pages reach ${origin}`)
        } else {
          const ok = yield* step("content-security policy", `fossil settings default-csp ${quoted(wanted)} -R ${repository}`,
            fossilCall(["settings", "default-csp", wanted, "-R", repository]),
            `fossil settings default-csp ${quoted(wanted)} -R ${repository}`)
          if (ok) doneOrWould("content-security policy", `default-csp: ${csp === undefined ? "Fossil's default" : "the repository's"} with connect-src ${origin}, so the run pages follow runs live`)
        }
      } else {
        needs("content-security policy", "stream")
      }
    } else {
      needs("content-security policy", "stream")
    }

    const output: InitOutput = {
      repository, root, node: input.node,
      ...(serverUrl !== undefined ? { serverUrl } : {}),
      supervisor: how,
      ok: steps.every((s) => s.state === "done" || s.state === "already" || s.state === "would"),
      steps
    }
    return output
  }).pipe(Effect.catchTag("StepFailed", (e) => refuse(e.message))))
}
