// doctor (issue 40): checks a node's deployment end to end, as a person meets it, each finding
// with what to do. A tool of its own rather than `status --check`: status is anyone's and only
// reads what is there, while doctor acts (a sandboxed probe through the node's own launcher, HTTP
// requests to the server), shows server paths (setup only) and has an exit status of its own (0
// only when every check holds).

import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Hosts } from "../../services/Hosts.js"
import { Receipts } from "../../services/Receipts.js"
import { type LaunchSpec, SandboxLauncher } from "../../services/SandboxLauncher.js"
import { finish, recording, refuse } from "../operations/Operations.js"
import { releasePaths } from "../release/ReleasePaths.js"
import { nodeMismatch, stagedNodeProblem } from "../release/StagedNode.js"
import { cloneEntryOf } from "../root/CloneFiles.js"
import { readPasswordsFile } from "../root/ClonePasswords.js"
import { canonicalRepository, hookLogOf, lastHookLogEntry, nodeOf } from "../root/HookFiles.js"
import { runningSupervisor } from "../root/SupervisorFiles.js"
import { backofficeOf, hookCommandOf, readHooks, readUser, runsOcx2Hook } from "../node/HookInstall.js"
import { diskOf } from "./support/DiskStatus.js"
import { hostLimits } from "./support/HookSetup.js"
import { needsSetup } from "./support/Permissions.js"
import { rootOfCall } from "./support/ReleaseCall.js"
import { defineTool, type ToolContext } from "./Tool.js"

const optionalText = (description: string) => Schema.optionalWith(Schema.String.annotations({ description }), { exact: true })

export const DoctorInput = Schema.Struct({
  root: optionalText("the release root (by default the root this program was released into; the web page takes none: it acts on its own)"),
  url: optionalText("the server's URL to check (by default the node's: ROOT/node/node.json, or the clone's in ROOT/node/clones.json)")
})
export type DoctorInput = typeof DoctorInput.Type

export const Finding = Schema.Struct({
  check: Schema.String.annotations({ description: "what was checked" }),
  ok: Schema.Boolean,
  words: Schema.String.annotations({ description: "what was found" }),
  fix: Schema.optionalWith(Schema.String.annotations({ description: "what to do, when it does not hold" }), { exact: true })
})
export type Finding = typeof Finding.Type

export const DoctorOutput = Schema.Struct({
  root: Schema.String,
  repository: Schema.String,
  role: Schema.Literal("server", "clone").annotations({ description: "the node of the served repository, or a node on a clone's host" }),
  node: Schema.optionalWith(Schema.String, { exact: true }),
  server: Schema.optionalWith(Schema.String.annotations({ description: "the server's URL checked" }), { exact: true }),
  ok: Schema.Boolean.annotations({ description: "every check holds" }),
  findings: Schema.Array(Finding)
})
export type DoctorOutput = typeof DoctorOutput.Type

const firstLine = (e: unknown): string => (e instanceof Error ? e.message : String((e as { message?: unknown })?.message ?? e)).split("\n")[0]!

/** A GET of `url`: its status and content type, or why nothing answered. */
const get = (url: string): Effect.Effect<{ readonly status: number; readonly type: string } | { readonly error: string }> =>
  Effect.promise(async () => {
    try {
      const response = await fetch(url, { redirect: "follow", signal: AbortSignal.timeout(20_000) })
      await response.arrayBuffer()
      return { status: response.status, type: response.headers.get("content-type") ?? "" }
    } catch (e) {
      const cause = (e as { cause?: unknown }).cause
      return { error: `${firstLine(e)}${cause !== undefined ? ` (${firstLine(cause)})` : ""}` }
    }
  })

/** The release a running process's program belongs to (its real path's directory holding release.json). */
const releaseOfProcess = (pid: number): string | undefined => {
  try {
    const argv = Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter((a) => a !== "")
    const cwd = Fs.readlinkSync(`/proc/${pid}/cwd`)
    // node PROGRAM ...: the first argument after Node's own options
    const program = argv.slice(1).find((a) => !a.startsWith("-"))
    if (program === undefined) return undefined
    return Path.dirname(Fs.realpathSync(Path.resolve(cwd, program)))
  } catch {
    return undefined
  }
}

/** uid and gid of the probe's sandbox: nobody's as root (the watcher's setpriv), else this account's. */
const probeIds = () => {
  const uid = process.getuid?.() ?? 0
  return uid === 0 ? { uid: 65534, gid: 65534 } : { uid, gid: process.getgid?.() ?? uid }
}

/** The stream server's settings as ROOT/settings/stream gives them: each value that would be passed over named. */
const streamSettingsProblems = (file: string): { readonly problems: ReadonlyArray<string>; readonly words: string; readonly url?: string } => {
  let text: string
  try {
    text = Fs.readFileSync(file, "utf8")
  } catch {
    return { problems: [], words: `no ${file}: it listens on loopback, on a port the system chooses` }
  }
  let given: Record<string, unknown>
  try {
    const parsed = JSON.parse(text) as unknown
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return { problems: [`${file} is not a JSON object`], words: "" }
    given = parsed as Record<string, unknown>
  } catch (e) {
    return { problems: [`${file} is not JSON: ${firstLine(e)}`], words: "" }
  }
  const problems: Array<string> = []
  const url = (v: unknown) => {
    try {
      return typeof v === "string" && /^https?:$/.test(new URL(v).protocol)
    } catch {
      return false
    }
  }
  if (given.host !== undefined && (typeof given.host !== "string" || given.host === "")) problems.push(`host ${JSON.stringify(given.host)} is not an address`)
  if (given.port !== undefined && !(typeof given.port === "number" && Number.isInteger(given.port) && given.port >= 0 && given.port < 65536)) {
    problems.push(`port ${JSON.stringify(given.port)} is not a port number`)
  }
  if (given.url !== undefined && !url(given.url)) problems.push(`url ${JSON.stringify(given.url)} is not an http or https URL`)
  if (given.origin !== undefined && !url(given.origin)) problems.push(`origin ${JSON.stringify(given.origin)} is not an http or https URL`)
  if (given.recheck !== undefined && !(typeof given.recheck === "number" && given.recheck > 0)) problems.push(`recheck ${JSON.stringify(given.recheck)} is not a number of seconds above 0`)
  const unknown = Object.keys(given).filter((k) => !["host", "port", "url", "origin", "recheck"].includes(k))
  if (unknown.length > 0) problems.push(`${unknown.join(", ")}: not a setting of the stream server`)
  const host = typeof given.host === "string" ? given.host : "127.0.0.1"
  const port = typeof given.port === "number" && given.port !== 0 ? String(given.port) : "a port the system chooses"
  return {
    problems,
    words: `${file}: listens on ${host}, ${port}${typeof given.url === "string" ? `; pages give browsers ${given.url}` : ""}`,
    ...(typeof given.url === "string" && url(given.url) ? { url: given.url.replace(/\/+$/, "") } : {})
  }
}

/** The checks, in the order they are made; each one's words for a dry run. */
const checksOf = (role: "server" | "clone") => [
  ["server", "an HTTP GET of the server's home page answers"],
  ["pages", "an HTTP GET of BASE/ext/ocx2-cgi answers 200 as HTML"],
  ...(role === "server"
    ? [
      ["hook", "the after-receive hook is installed as this root installs it"],
      ["hook's last run", "the last entry of ROOT/node/hook.log did not fail"]
    ]
    : [["clone password", "the passwords file of ROOT/node/clones.json signs in to the server as the clone's node user"]]),
  ["supervisor", role === "server"
    ? "the node's supervisor runs, of the release ROOT/current serves, or fast mode's poller (ROOT/ocx2-hook --poll) runs"
    : "the node's supervisor runs, of the release ROOT/current serves (without one, only ocx2 node's timer picks runs up)"],
  ["release's Node", "the Node ROOT/current was staged with is on this host, with the ABI of this call's Node"],
  ["limits", "/bin/true in a sandbox through the node's own launcher, with a processes and a memory limit where the host has them"],
  ["stream", "ROOT/settings/stream is sane, and the stream server answers where one runs"],
  ["node user", role === "server"
    ? "the node user holds no capability of its own in the repository's user table"
    : "the node user holds neither admin nor setup on the server"],
  ["room", "ROOT's filesystem has the room ROOT/settings/min-free-space asks for"]
] as const

export const doctorCheck = (input: DoctorInput, context: ToolContext, programPath: string | undefined) => {
  const act = recording(context.dryRun)
  return finish(act, Effect.gen(function*() {
    if (context.repository === undefined) {
      return yield* refuse("doctor checks the node of a repository: name the served repository (or a node's clone) with --repository REPO before the tool's name")
    }
    const repository = canonicalRepository(context.repository)
    if (!Fs.existsSync(repository)) return yield* refuse(`no repository file ${repository}`)
    const root = yield* rootOfCall("doctor", input.root, programPath, context.entryPoint)
    const paths = releasePaths(root)
    const clone = cloneEntryOf(root, repository)
    const role = clone !== undefined ? "clone" as const : "server" as const
    const served = role === "server" ? nodeOf(root, repository) : undefined
    const user = clone?.user ?? served?.user
    const server = (input.url ?? clone?.serverUrl ?? served?.serverUrl)?.replace(/\/+$/, "")
    const output = (findings: ReadonlyArray<Finding>): DoctorOutput => ({
      root, repository, role,
      ...(user !== undefined ? { node: user } : {}),
      ...(server !== undefined ? { server } : {}),
      ok: findings.every((f) => f.ok),
      findings
    })
    if (context.dryRun) {
      for (const [check, what] of checksOf(role)) yield* act("check", `${check}: ${what}`, Effect.void)
      return output([])
    }

    const findings: Array<Finding> = []
    const found = (check: string, ok: boolean, words: string, fix?: string) =>
      findings.push({ check, ok, words, ...(!ok && fix !== undefined ? { fix } : {}) })
    const cli = `ocx2 --repository ${repository} --user ADMIN`
    const startHook = user !== undefined ? `${cli} hook --node ${user} --root ${root}` : `${cli} hook --node USER --root ${root}`

    if (role === "server" && served === undefined) {
      found("node", false, `${repository} has no node in ${Path.join(paths.node, "node.json")}: no run is answered on this host`,
        `${cli} hook --node USER --root ${root} (USER a Fossil user holding no capability of its own)`)
    }

    // the server, its home page and the OCX pages
    if (server === undefined) {
      const none = `no server URL: the node has none (ROOT/node/node.json), and none was given with --url`
      found("server", false, none, `${startHook} --server-url URL, or doctor --url URL`)
      found("pages", false, none, `${startHook} --server-url URL, or doctor --url URL`)
    } else {
      const home = yield* get(`${server}/`)
      if ("error" in home) {
        found("server", false, `${server}/ does not answer: ${home.error}`,
          "start the server (fossil server --nojail --extroot EXTROOT ..., or systemctl start fossil-server@REPO), or give the right URL")
      } else if (home.status >= 500) {
        found("server", false, `${server}/ answers HTTP ${home.status}`, "see the server's log (journalctl -u fossil-server@REPO): it fails its requests")
      } else {
        found("server", true, `${server}/ answers HTTP ${home.status}`)
      }
      const pages = yield* get(`${server}/ext/ocx2-cgi`)
      if ("error" in pages) {
        found("pages", false, `${server}/ext/ocx2-cgi does not answer: ${pages.error}`, "start the server, or give the right URL")
      } else if (pages.status !== 200 || !/^text\/html/i.test(pages.type)) {
        found("pages", false, `${server}/ext/ocx2-cgi answers HTTP ${pages.status}${pages.type !== "" ? ` (${pages.type})` : ""}, not the OCX pages`,
          `serve them from Fossil's extension root: ln -s ${paths.current}/ocx2-cgi EXTROOT/ocx2-cgi, and run the server with --extroot EXTROOT --nojail (docs/operations.md, "Serving the OCX pages")`)
      } else {
        found("pages", true, `${server}/ext/ocx2-cgi answers 200 as HTML`)
      }
    }

    if (role === "server") {
      // the hook as this root installs it, and its last run
      const command = hookCommandOf(root)
      const hooks = yield* readHooks(repository).pipe(Effect.orElseSucceed(() => undefined))
      if (hooks === undefined) {
        found("hook", false, `the hooks of ${repository} cannot be read`, `fossil hook list -R ${repository} says why`)
      } else {
        const ours = hooks.filter((h) => runsOcx2Hook(h.command))
        if (ours.some((h) => h.type === "after-receive" && h.command === command)) {
          found("hook", true, `installed as this root installs it: ${command}`)
        } else {
          found("hook", false, ours.length === 0
            ? `no after-receive hook runs ocx2-hook on ${repository}: no run is picked up`
            : `ocx2-hook runs otherwise: ${ours.map((h) => `${h.type}: ${h.command}`).join("; ")} (this root installs ${command})`,
            startHook)
        }
      }
      const log = hookLogOf(root)
      const last = lastHookLogEntry(log)
      if (last === undefined) {
        found("hook's last run", true, `${log} holds no run of the hook yet`)
      } else {
        const failed = last.did.filter((d) => /^failed\b/.test(d) || / was staged with Node /.test(d) || /^no cursor /.test(d) || /^no release root/.test(d))
        if (failed.length > 0) {
          found("hook's last run", false, `the hook's run at ${last.at} (${log}): ${failed.join("; ")}`,
            `mend what it names, then start the node again: ${startHook} --check`)
        } else {
          found("hook's last run", true, `at ${last.at}: ${last.did.join("; ") || "nothing to do"}`)
        }
      }
    }

    // the supervisor (or fast mode's poller), of the current release
    let current: string | undefined
    try {
      current = Fs.realpathSync(paths.current)
    } catch {
      current = undefined
    }
    if (user !== undefined) {
      const supervisor = runningSupervisor(root, repository, user)
      const superviseCommand = `systemctl enable --now ocx2-supervise@${user}.service (docs/systemd), or ${paths.current}/ocx2 supervise --node ${user} --root ${root}`
      if (supervisor !== undefined) {
        const release = releaseOfProcess(supervisor.pid)
        if (current !== undefined && release !== undefined && release !== current) {
          found("supervisor", false, `the supervisor (pid ${supervisor.pid}) runs ${release}, not the current release ${current}`,
            `start it again: systemctl restart ocx2-supervise@${user}.service, or ${paths.current}/ocx2 supervise --node ${user} --root ${root} --stop and start it`)
        } else {
          found("supervisor", true, `the supervisor runs (pid ${supervisor.pid}, since ${supervisor.since}), of the current release ${release ?? "(not read)"}`)
        }
      } else if (role === "server") {
        const backoffice = yield* backofficeOf(repository).pipe(Effect.orElseSucceed(() => undefined))
        const nodePollers = backoffice === undefined ? [] : backoffice.pollers.filter((p) => !backoffice.fossilPollers.includes(p))
        if (backoffice?.mode === "fast" && nodePollers.length > 0) {
          found("supervisor", true, `no supervisor runs; fast mode's poller does (pid ${nodePollers.join(", ")}): ${backoffice.words}`)
        } else {
          found("supervisor", false, `no supervisor runs, and fast mode is off (${backoffice?.words ?? "the backoffice cannot be read"}): ` +
            "runs wait for Fossil's backoffice, up to a minute", `${superviseCommand}; or fast mode: ${startHook} --fast`)
        }
      } else {
        found("supervisor", true, `no supervisor runs: runs are picked up only by ocx2 node's calls (its timer, docs/systemd/ocx2-node@.timer)`)
      }
    }

    // the release's Node
    if (current === undefined) {
      found("release's Node", false, `${paths.current} is missing: ${root} serves no release`, `stage and accept a release: ${cli} stage CHECKOUT --root ${root}; ${cli} accept --root ${root}`)
    } else {
      const problem = stagedNodeProblem(current) ?? nodeMismatch(current)
      if (problem !== undefined) {
        found("release's Node", false, problem,
          `from the release's checkout: npm ci && npm run build; ${cli} stage . --root ${root}; ${cli} accept --root ${root}`)
      } else {
        found("release's Node", true, `the release ${Path.basename(current)} runs on this host's Node ${process.version} (ABI ${process.versions.modules})`)
      }
    }

    // limits: a short sandboxed probe through the node's own launcher
    const hosts = yield* Hosts
    const { limits } = hostLimits(root)
    const probe = yield* Effect.gen(function*() {
      const launcher = yield* SandboxLauncher
      const caps = yield* launcher.capabilities
      if (!caps.sandbox) return { ok: false, words: `this host gives no sandbox: ${caps.notes.join("; ") || "bubblewrap cannot run"}` }
      const system = ["/usr", "/bin", "/lib", "/lib64", "/etc"].filter((p) => Fs.existsSync(p))
      const spec: LaunchSpec = {
        name: `doctor-${process.pid}`,
        command: ["/bin/true"],
        env: { PATH: "/usr/bin:/bin" },
        cwd: "/",
        sandbox: {
          ...probeIds(), linuxCapabilities: [], network: false, isolateTerminal: true, endsWithParent: true,
          proc: "/proc", dev: "/dev", tmp: "/tmp", readOnly: system, readWrite: [], homes: [], createdFiles: [], ownPaths: [root, repository]
        },
        limits: {
          wallSeconds: 60,
          ...(caps.processes ? { processes: 64 } : {}),
          ...(caps.memory ? { memoryBytes: 64 * 1024 * 1024 } : {})
        },
        stdin: { lines: [], keepOpen: false },
        keep: { stdout: 4096, stderr: 4096 }
      }
      const given = [caps.processes ? `processes: ${limits.processes}` : undefined, caps.memory ? `memory: ${limits.memory}` : undefined].filter((w) => w !== undefined)
      const missing = [caps.processes ? undefined : `processes (${limits.processes})`, caps.memory ? undefined : `memory (${limits.memory})`].filter((w) => w !== undefined)
      const result = yield* launcher.run(spec).pipe(Effect.either)
      if (result._tag === "Left") return { ok: false, words: `the probe was not launched: ${result.left.message}` }
      const ending = result.right.ending
      const said = new TextDecoder().decode(result.right.stderr.tail).trim().split("\n").slice(-3).join("; ")
      if (ending.outcome !== "exited" || ending.exit !== 0) {
        return { ok: false, words: `/bin/true in a sandbox ${ending.outcome === "budget" ? `ran out of ${ending.limit}` : ending.outcome === "exited" ? `exited ${ending.exit}` : "was stopped"}${said !== "" ? `: ${said}` : ""}` }
      }
      return {
        ok: true,
        words: `/bin/true exited 0 in a sandbox${given.length > 0 ? ` under ${given.join(", ")}` : ""}` +
          (missing.length > 0 ? `; runs asking for ${missing.join(", and ")} are refused (refusal 6)` : "")
      }
    }).pipe(Effect.provide(hosts.sandbox(root)), Effect.catchAllDefect((d) => Effect.succeed({ ok: false, words: `the probe failed: ${firstLine(d)}` })))
    found("limits", probe.ok, probe.words,
      'run the node as root with bubblewrap and util-linux installed, in a unit with Delegate=yes (docs/operations.md, "Limits and cgroups"; "Checking a host")')

    // the stream server
    const stream = streamSettingsProblems(Path.join(paths.settings, "stream"))
    if (stream.problems.length > 0) {
      found("stream", false, `${stream.problems.join("; ")}: the stream server passes it over`,
        `mend ${Path.join(paths.settings, "stream")} (docs/operations.md, "Following runs": host, port, url, origin, recheck)`)
    } else {
      let running: { pid: number; port: number; host?: string } | undefined
      try {
        const state = JSON.parse(Fs.readFileSync(Path.join(paths.node, "stream.json"), "utf8")) as { pid?: unknown; port?: unknown; host?: unknown }
        if (typeof state.pid === "number" && typeof state.port === "number") {
          process.kill(state.pid, 0)
          running = { pid: state.pid, port: state.port, ...(typeof state.host === "string" ? { host: state.host } : {}) }
        }
      } catch {
        running = undefined
      }
      if (running === undefined) {
        found("stream", true, `${stream.words}; none runs now (a run page starts it)`)
      } else {
        const host = running.host === undefined || running.host === "0.0.0.0" || running.host === "::" ? "127.0.0.1" : running.host
        const answer = yield* get(`http://${host.includes(":") ? `[${host}]` : host}:${running.port}/`)
        if ("error" in answer) {
          found("stream", false, `the stream server (pid ${running.pid}) does not answer on ${host}:${running.port}: ${answer.error}`,
            `end it (kill ${running.pid}): the next run page starts another`)
        } else if (stream.url !== undefined) {
          // where browsers reach it through a proxy: asked there too
          const proxied = yield* get(`${stream.url}/`)
          if ("error" in proxied || proxied.status >= 500) {
            found("stream", false, `the stream server answers on ${host}:${running.port}, but not at ${stream.url}, where the pages send browsers: ` +
              ("error" in proxied ? proxied.error : `HTTP ${proxied.status}`),
              `forward ${stream.url} to ${host}:${running.port} (a fixed port in ${Path.join(paths.settings, "stream")}), unbuffered, or remove its url`)
          } else {
            found("stream", true, `${stream.words}; it runs (pid ${running.pid}) and answers on ${host}:${running.port} and at ${stream.url}`)
          }
        } else {
          found("stream", true, `${stream.words}; it runs (pid ${running.pid}) and answers on ${host}:${running.port}`)
        }
      }
    }

    // the node user's capabilities, and on a clone's host its password
    if (role === "server" && user !== undefined) {
      const row = yield* readUser(repository, user).pipe(Effect.orElseSucceed(() => undefined))
      if (row === undefined) {
        found("node user", false, `${repository} has no user ${user}`, `fossil user new ${user} "" PASSWORD -R ${repository}; fossil user capabilities ${user} "" -R ${repository}`)
      } else if (row.capabilities !== "") {
        found("node user", false, `${user} holds ${row.capabilities} of its own${/[as]/.test(row.capabilities) ? " (admin or setup: the node refuses to start as it)" : ""}; a node user holds no capability of its own`,
          `fossil user capabilities ${user} "" -R ${repository}`)
      } else {
        found("node user", true, `${user} holds no capability of its own`)
      }
    }
    if (role === "clone" && clone !== undefined) {
      const at = clone.serverUrl.replace(/\/+$/, "")
      const read = readPasswordsFile(clone.passwordsFile)
      if (read._tag === "Refused") {
        found("clone password", false, read.why, `write {"user": "${clone.user}", "password": "..."} to ${clone.passwordsFile}, chmod 600 (docs/operations.md, "A node on another host")`)
      } else {
        const signedIn = yield* Receipts.pipe(
          Effect.flatMap((r) => r.capabilitiesOf(read.passwords.user)),
          Effect.provide(hosts.serverReceipts({ url: clone.serverUrl, user: read.passwords.user, password: read.passwords.password })),
          Effect.either
        )
        if (signedIn._tag === "Left") {
          found("clone password", false, `signing in to ${at} as ${read.passwords.user} with ${read.passwords.file}: ${firstLine(signedIn.left)}`,
            `set the password on the server (fossil user password ${read.passwords.user} ... -R REPO) and write it to ${read.passwords.file}`)
        } else if (signedIn.right === undefined) {
          found("clone password", false, `${at} has no user ${read.passwords.user}`, `make the user on the server, holding o and i`)
        } else {
          found("clone password", true, `${read.passwords.file} signs in to ${at} as ${read.passwords.user}`)
          const caps = signedIn.right
          if (/[as]/.test(caps)) {
            found("node user", false, `${read.passwords.user} holds admin or setup on the server (${caps}): the node refuses to start as it`,
              `on the server: fossil user capabilities ${read.passwords.user} oi -R REPO (y too, to publish files)`)
          } else {
            found("node user", true, `${read.passwords.user} holds ${caps} on the server, neither admin nor setup`)
          }
        }
      }
    }

    // ROOT's room
    const disk = diskOf(root, role === "server" && user !== undefined ? { repository, user } : undefined)
    found("room", disk.state === "room", disk.words,
      `free space on ${root}'s filesystem, or lower ${Path.join(paths.settings, "min-free-space")} (docs/operations.md, "When ROOT runs short of space")`)

    return output(findings)
  }))
}

export const doctor = defineTool({
  name: "doctor",
  summary: "Check a node end to end, each finding with what to do",
  description:
    "Checks the node of the repository named with --repository (the served repository, or a node's clone on its host) as " +
    "a person meets it, and says for each check ok or FAIL with what to do: the server answers (the node's server URL, or " +
    "--url), and serves the OCX pages (BASE/ext/ocx2-cgi answers 200 as HTML); on the server's host the hook is installed " +
    "as this root installs it and its last run (ROOT/node/hook.log) did not fail; the node's supervisor runs, of the " +
    "release ROOT/current serves, or fast mode's poller does; the release's Node is this host's; limits work (/bin/true in " +
    "a sandbox through the node's own launcher, with a processes and a memory limit where the host has them, naming the " +
    "cgroup version of each); the stream server's settings are sane and a running one answers; the node user holds no " +
    "capability of its own (on a clone's host: the passwords file signs in to the server, as a user holding neither admin " +
    "nor setup); and ROOT has room. Exit status 0 only when every check holds, 1 otherwise. --dry-run lists the checks. " +
    "Needs Fossil's setup capability (s): its findings show the server's paths.",
  input: DoctorInput,
  positional: [],
  output: DoctorOutput,
  allow: needsSetup("doctor"),
  readOnly: true,
  exitStatus: (output) => (output.ok ? 0 : 1),
  handle: (input, context) => doctorCheck(input, context, process.argv[1])
})
