// hook, unhook and status (seed 001, "Install or remove the hook"): what each does, once, and
// the schemas they share; the tools' files (hook.ts, unhook.ts, status.ts) name them.

import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Hosts } from "../../../services/Hosts.js"
import { rootOfProgram, releasePaths } from "../../release/ReleasePaths.js"
import { nodeMismatch, releaseDirOfProgram, stagedNodeProblem } from "../../release/StagedNode.js"
import { describeController, realHost, versionOf } from "../../sandbox/Cgroups.js"
import { hostTools } from "../../sandbox/HostTools.js"
import type { HostCapabilities } from "../../../services/SandboxLauncher.js"
import { finish, recording, refuse } from "../../operations/Operations.js"
import type { ToolContext } from "../Tool.js"
import { rootOfCall } from "./ReleaseCall.js"
import { canonicalRepository, hookLogOf, lastHookLogEntry, nodeOf, nodesFileOf, writeNode } from "../../root/HookFiles.js"
import {
  addHook, backofficeOf, deleteHook, type FossilHook, hookCommandOf, HookError, readHooks, readUser, repositoryUrl,
  runsOcx2Hook, setBackofficeDisable, startPoller, endPoller
} from "../../node/HookInstall.js"
import type { NodeConfig } from "../../root/NodeConfig.js"
import { waitingRuns } from "../../care/ProcessUserFiles.js"
import { readSessionFiles } from "../../care/SessionFiles.js"
import { runningSupervisor } from "../../root/SupervisorFiles.js"
import { startNode, watcherOf } from "../../node/Round.js"
import { finishLeftOutboxes } from "../../node/Recovery.js"
import { diskOf, DiskOutput } from "./DiskStatus.js"

const optionalText = (description: string) => Schema.optionalWith(Schema.String.annotations({ description }), { exact: true })

export const HookInput = Schema.Struct({
  node: optionalText("the node user: the hook is then that node (a user holding no capability of its own); installing with it is the node starting"),
  root: optionalText("the release root (by default the root this program was released into)"),
  serverUrl: optionalText("the server's URL, for runs' clone steps (by default the repository's email-url)"),
  fast: Schema.optionalWith(
    Schema.Boolean.annotations({ description: "turn on fast pickup: backoffice-disable on, and ROOT/ocx2-hook --poll started detached (in place of Fossil's own poller, which it ends)" }),
    { exact: true }
  ),
  check: Schema.optionalWith(
    Schema.Boolean.annotations({
      description: "the node's start, after the host restarted or a run failed: with --node USER, decide every open run for USER " +
        "(lost when its watcher is gone, a missed stop sent on, one never started handed on); the hook is installed where it " +
        "is not, and left as it is where it is"
    }),
    { exact: true }
  )
})
export type HookInput = typeof HookInput.Type

export const RootOnlyInput = Schema.Struct({ root: optionalText("the release root (by default the root this program was released into)") })
export type RootOnlyInput = typeof RootOnlyInput.Type

const BackofficeOutput = Schema.Struct({
  mode: Schema.Literal("fast", "default", "stalled"),
  disabled: Schema.Boolean,
  pollers: Schema.Array(Schema.Number),
  fossilPollers: Schema.Array(Schema.Number).annotations({ description: "those of the pollers that are Fossil's own (fossil backoffice --poll), which refuse people's posts now and then" }),
  words: Schema.String
})

export const HookOutput = Schema.Struct({
  root: Schema.String,
  repository: Schema.String,
  command: Schema.String.annotations({ description: "the after-receive hook this root installs" }),
  hook: Schema.Literal("installed", "unchanged"),
  otherHooks: Schema.Array(Schema.String),
  node: Schema.optionalWith(Schema.String, { exact: true }),
  check: Schema.optionalWith(
    Schema.Boolean.annotations({ description: "whether every open run for the node was decided (the node starting): always with node" }),
    { exact: true }
  ),
  why: Schema.optionalWith(Schema.String.annotations({ description: "why every open run for the node was decided" }), { exact: true }),
  runs: Schema.optionalWith(Schema.Array(Schema.Struct({ run: Schema.String, action: Schema.String })), { exact: true }),
  serverUrl: Schema.optionalWith(Schema.String.annotations({ description: "the server's URL the node's clone steps clone from" }), { exact: true }),
  warnings: Schema.optionalWith(Schema.Array(Schema.String).annotations({ description: "what will go wrong as the node stands, and what mends it" }), { exact: true }),
  backoffice: BackofficeOutput
})
export type HookOutput = typeof HookOutput.Type

export const UnhookOutput = Schema.Struct({
  repository: Schema.String,
  removed: Schema.Array(Schema.String),
  otherHooks: Schema.Array(Schema.String),
  log: Schema.optionalWith(Schema.String, { exact: true })
})
export type UnhookOutput = typeof UnhookOutput.Type

const limitText = (limit: string) =>
  Schema.String.annotations({ description: `what gives ${limit} on this host, or "not available: why" (refusal 6)` })

/** what gives each limit of 2.9 on this host */
export const LimitsOutput = Schema.Struct({
  wall: limitText("wall"),
  cpu: limitText("cpu"),
  processes: limitText("processes"),
  file_size: limitText("file_size"),
  memory: limitText("memory")
})
export type LimitsOutput = typeof LimitsOutput.Type

export const StatusOutput = Schema.Struct({
  caller: Schema.Struct({ user: Schema.optionalWith(Schema.String, { exact: true }), capabilities: Schema.String }),
  limits: LimitsOutput.annotations({
    description: "what gives each limit on this host: the cgroup controller (v1 or v2) of processes and memory, prlimit's for cpu " +
      "and file_size, or not available and why (such a limit is refused, refusal 6)"
  }),
  limitsFrom: Schema.String.annotations({ description: "where limits comes from: the node's own measure, or this call's look" }),
  repository: Schema.optionalWith(Schema.String, { exact: true }),
  root: Schema.optionalWith(Schema.String, { exact: true }),
  hook: Schema.optionalWith(Schema.Struct({
    state: Schema.Literal("installed", "other", "absent"),
    words: Schema.String,
    commands: Schema.Array(Schema.String)
  }), { exact: true }),
  otherHooks: Schema.optionalWith(Schema.Array(Schema.String), { exact: true }),
  backoffice: Schema.optionalWith(BackofficeOutput, { exact: true }),
  node: Schema.optionalWith(Schema.String, { exact: true }),
  serverUrl: Schema.optionalWith(Schema.String.annotations({ description: "the server's URL the node's clone steps clone from" }), { exact: true }),
  warnings: Schema.optionalWith(Schema.Array(Schema.String).annotations({ description: "what will go wrong as the node stands, and what mends it" }), { exact: true }),
  supervisor: Schema.optionalWith(Schema.Struct({
    running: Schema.Boolean,
    words: Schema.String,
    pid: Schema.optionalWith(Schema.Number, { exact: true }),
    since: Schema.optionalWith(Schema.String, { exact: true }),
    watchers: Schema.optionalWith(Schema.Array(Schema.Struct({ run: Schema.String, pid: Schema.Number })).annotations({
      description: "the watchers it holds: each run in care with the pid of the watcher holding it"
    }), { exact: true }),
    rounds: Schema.optionalWith(Schema.Number, { exact: true }),
    lastRound: Schema.optionalWith(Schema.Struct({ at: Schema.String, did: Schema.Array(Schema.String) }), { exact: true })
  }).annotations({ description: "the node's resident supervisor (ocx2 supervise): whether it runs, its pid and what it holds" }), { exact: true }),
  lastRun: Schema.optionalWith(Schema.Struct({
    at: Schema.String,
    repository: Schema.String,
    given: Schema.Array(Schema.String),
    did: Schema.Array(Schema.String)
  }), { exact: true }),
  /** the sessions in this root's care, and the runs waiting for their process user */
  care: Schema.optionalWith(Schema.Struct({
    sessions: Schema.Array(Schema.Struct({
      run: Schema.String,
      processUser: Schema.String,
      started: Schema.optionalWith(Schema.String, { exact: true })
    })),
    waiting: Schema.Array(Schema.Struct({ user: Schema.String, runs: Schema.Array(Schema.String) }))
  }), { exact: true }),
  disk: Schema.optionalWith(DiskOutput, { exact: true }),
  /** the space each run's workspace in ROOT's per-user directories takes on disk */
  workspaces: Schema.optionalWith(Schema.Array(Schema.Struct({
    run: Schema.String,
    path: Schema.String,
    bytes: Schema.Number.annotations({ description: "the disk space its files take, as du counts it (allocated blocks)" }),
    complete: Schema.Boolean.annotations({ description: "false: the walk stopped at its bound, so bytes is a lower bound" })
  })).annotations({ description: "each workspace ROOT/care names that lies within ROOT's per-user directories, walked without following links, to a bound" }), { exact: true })
})
export type StatusOutput = typeof StatusOutput.Type

const servedRepository = (tool: string, context: ToolContext) =>
  Effect.gen(function*() {
    if (context.repository === undefined) {
      return yield* refuse(`${tool} acts on the served repository: name it with --repository REPO before the tool's name`)
    }
    const repository = canonicalRepository(context.repository)
    if (!Fs.existsSync(repository)) return yield* refuse(`no repository file ${repository}`)
    return repository
  })

/**
 * A node without the server's URL runs everything but a clone step, which it refuses (refusal 8)
 * only when a run comes: said at install and at status instead, since a node whose runs never
 * clone needs none, and refusing the install would stop those.
 */
export const noServerUrlWarning = (repository: string, node: string): string =>
  `the node ${node} has no server URL: every run with a clone step will be refused (refusal 8, "this node has no server URL ` +
  `to clone from"); give it: ocx2 --repository ${repository} hook --node ${node} --server-url URL (or fossil settings email-url URL -R ${repository})`

const others = (hooks: ReadonlyArray<FossilHook>) => hooks.filter((h) => !runsOcx2Hook(h.command))
const describeHook = (h: FossilHook) => `${h.type}: ${h.command}`

/** hook [--node USER [--check]] [--root ROOT] [--server-url URL] [--fast] */
export const installHook = (input: HookInput, context: ToolContext, programPath: string | undefined) => {
  const act = recording(context.dryRun)
  return finish(act, Effect.gen(function*() {
    const hosts = yield* Hosts
    const repository = yield* servedRepository("hook", context)
    const root = yield* rootOfCall("hook", input.root, programPath, context.entryPoint)
    if (input.check === true && input.node === undefined) {
      // the node's start decides the runs of one node user, and the call names it
      const recorded = nodeOf(root, repository)
      return yield* refuse(
        `hook --check is the node starting, and decides the open runs of its node user: name it with --node USER` +
          (recorded !== undefined ? ` (${nodesFileOf(root)} names ${recorded.user} for ${repository}: hook --node ${recorded.user} --check)` : "")
      )
    }
    const paths = releasePaths(root)
    if (!Fs.existsSync(paths.current)) {
      return yield* refuse(`${root} serves no release (${paths.current} is missing): the hook would run nothing; stage and accept a release first`)
    }
    if (!Fs.existsSync(paths.hook)) {
      return yield* refuse(`${paths.hook} does not reach a program: the hook would run nothing; accept a release that holds ocx2-hook`)
    }
    const command = hookCommandOf(root)
    const hooks = yield* readHooks(repository)
    const ours = hooks.filter((h) => runsOcx2Hook(h.command))
    let state: "installed" | "unchanged" = "unchanged"
    if (ours.length === 1 && ours[0]!.command === command && ours[0]!.type === "after-receive") {
      act.note("hook", `already installed on ${repository}: ${command}`)
    } else {
      // from the highest index down, so each index still names its hook
      for (const h of [...ours].sort((a, b) => b.index - a.index)) {
        yield* act("unhook", `fossil hook delete ${h.index} -R ${repository} (it ran ${h.command})`, deleteHook(repository, h.index))
      }
      yield* act("hook", `fossil hook add --type after-receive --command "${command}" -R ${repository}`, addHook(repository, command))
      state = "installed"
    }
    for (const h of others(hooks)) act.note("other hook", `left as it is: ${describeHook(h)}`)

    let runs: HookOutput["runs"]
    let why: string | undefined
    let nodeUrl: string | undefined
    const warnings: Array<string> = []
    if (input.node !== undefined) {
      const user = yield* readUser(repository, input.node)
      if (user === undefined) return yield* refuse(`no user ${input.node} in ${repository}: create it, holding no capability of its own`)
      if (/[as]/.test(user.capabilities)) {
        return yield* refuse(`${input.node} holds admin or setup (${user.capabilities}): a node user holds no capability of its own`)
      }
      const serverUrl = input.serverUrl ?? (yield* repositoryUrl(repository))
      yield* act("node", `${nodesFileOf(root)}: ${repository} is node ${input.node}${serverUrl !== undefined ? ` at ${serverUrl}` : ""}`,
        Effect.sync(() => writeNode(root, repository, { user: input.node!, ...(serverUrl !== undefined ? { serverUrl } : {}) })))
      const config: NodeConfig = { root, repository, nodeUser: input.node, serverUrl, passwordsFile: undefined }
      nodeUrl = serverUrl
      if (serverUrl === undefined) warnings.push(noServerUrlWarning(repository, input.node))
      why = input.check === true
        ? "asked with --check: the node starts, and every open run for its user is decided again"
        : "installing with --node is the node starting: every open run for its user is decided"
      act.note("check", `${why} (${input.node})`)
      // what dead watchers left unsent (kept logs after an ended that counts, say) goes first
      const left = yield* finishLeftOutboxes(act).pipe(
        Effect.provide(hosts.served(config)),
        Effect.mapError((e) => new HookError({ message: `the node could not send what its watchers left: ${String((e as { message?: unknown }).message ?? e)}` }))
      )
      const started = yield* startNode(config, act, { watcherProgram: watcherOf(root), dryRun: context.dryRun }).pipe(
        Effect.provide(hosts.served(config)),
        Effect.mapError((e) => new HookError({ message: `the node could not check its runs: ${String((e as { message?: unknown }).message ?? e)}` }))
      )
      act.note("node", `${started.decisions.length} open run${started.decisions.length === 1 ? "" : "s"} for ${input.node} checked`)
      runs = [...left, ...started.decisions]
    }

    let backoffice = yield* backofficeOf(repository)
    if (input.fast === true) {
      if (!backoffice.disabled) {
        yield* act("fast", `fossil settings backoffice-disable on -R ${repository}`, setBackofficeDisable(repository))
      }
      if (backoffice.pollers.length === backoffice.fossilPollers.length) {
        yield* act("fast",
          `start ${paths.hook} --poll ${repository} detached (better: run it as a service, docs/operations.md)`,
          startPoller(repository, paths.hook))
      }
      // Fossil's own poller runs the hook inside a write transaction that refuses people's posts
      // (docs/locks.md): ended once the node's runs (never before: a poller that failed to start
      // would leave the repository with none)
      for (const pid of backoffice.fossilPollers) {
        yield* act("fast",
          `end Fossil's own poller (fossil backoffice --poll, pid ${pid}), which refuses people's posts now and then; ` +
            `a service that starts it must run ${paths.hook} --poll ${repository} instead (docs/operations.md)`,
          endPoller(pid))
      }
      if (!context.dryRun) backoffice = yield* backofficeOf(repository)
    }
    act.note("backoffice", backoffice.words)
    const output: HookOutput = {
      root, repository, command, hook: state,
      otherHooks: others(hooks).map(describeHook),
      ...(input.node !== undefined ? { node: input.node } : {}),
      ...(why !== undefined ? { check: true, why } : {}),
      ...(runs !== undefined ? { runs } : {}),
      ...(nodeUrl !== undefined ? { serverUrl: nodeUrl } : {}),
      ...(warnings.length > 0 ? { warnings } : {}),
      backoffice: { mode: backoffice.mode, disabled: backoffice.disabled, pollers: backoffice.pollers, fossilPollers: backoffice.fossilPollers, words: backoffice.words }
    }
    return output
  }))
}

/** unhook [--root ROOT]: every hook that runs ocx2-hook goes; the others and the log stay. */
export const removeHook = (input: RootOnlyInput, context: ToolContext, programPath: string | undefined) => {
  const act = recording(context.dryRun)
  return finish(act, Effect.gen(function*() {
    const repository = yield* servedRepository("unhook", context)
    // on the web a root in the request is refused, not passed over: the page acts on its own release's root
    if (context.entryPoint === "cgi" && input.root !== undefined) {
      yield* rootOfCall("unhook", input.root, programPath, context.entryPoint)
    }
    const root = input.root !== undefined || programPath !== undefined
      ? yield* rootOfCall("unhook", input.root, programPath, context.entryPoint).pipe(Effect.option)
      : undefined
    const hooks = yield* readHooks(repository)
    const ours = hooks.filter((h) => runsOcx2Hook(h.command))
    if (ours.length === 0) act.note("unhook", `no hook runs ocx2-hook on ${repository}: nothing to remove`)
    for (const h of [...ours].sort((a, b) => b.index - a.index)) {
      yield* act("unhook", `fossil hook delete ${h.index} -R ${repository} (it ran ${h.command})`, deleteHook(repository, h.index))
    }
    for (const h of others(hooks)) act.note("other hook", `left as it is: ${describeHook(h)}`)
    const kept = root !== undefined && root._tag === "Some" ? hookLogOf(root.value) : undefined
    if (kept !== undefined) act.note("log", `${kept} is left as it is`)
    const output: UnhookOutput = {
      repository,
      removed: ours.map((h) => h.command),
      otherHooks: others(hooks).map(describeHook),
      ...(kept !== undefined ? { log: kept } : {})
    }
    return output
  }))
}

const rootForStatus = (given: string | undefined, programPath: string | undefined): string | undefined => {
  try {
    if (given !== undefined) return Fs.realpathSync(given)
    return programPath === undefined ? undefined : rootOfProgram(Fs.realpathSync(programPath))
  } catch {
    return undefined
  }
}

/**
 * What gives each limit here. The node's own measure (ROOT/node/capabilities.json, what refusal 6
 * is decided by) says whether; the mounts say which cgroup version. Without that measure, a look
 * that reads and changes nothing (the node makes its cgroup ready when it first measures).
 */
export const hostLimits = (root: string | undefined): { readonly limits: LimitsOutput; readonly limitsFrom: string } => {
  const prlimit = hostTools.prlimit
  const host = realHost()
  const cgroupOf = (controller: "pids" | "memory") => `cgroup v${versionOf(controller, host) ?? "?"} ${controller}`
  const file = root === undefined ? undefined : Path.join(releasePaths(root).node, "capabilities.json")
  let measured: { readonly caps: HostCapabilities; readonly at: Date } | undefined
  if (file !== undefined) {
    try {
      measured = { caps: JSON.parse(Fs.readFileSync(file, "utf8")) as HostCapabilities, at: Fs.statSync(file).mtime }
    } catch {
      // not measured yet, or unreadable: look
    }
  }
  const wall = "the watcher's clock (OCX ends the process)"
  if (measured !== undefined) {
    const c = measured.caps
    const notes = Array.isArray(c.notes) ? c.notes : []
    // the measure's notes name the keys they are about before a colon ("memory: …", "cpu, file_size: …")
    const or = (ok: boolean, key: string, given: string) => {
      if (ok) return given
      const note = notes.find((n) => n.slice(0, n.indexOf(":")).split(", ").includes(key))
      return `not available: ${note === undefined ? "not on this host" : note.slice(note.indexOf(":") + 1).trim()}`
    }
    return {
      limits: {
        wall,
        cpu: or(c.cpu === true, "cpu", `prlimit RLIMIT_CPU (${prlimit})`),
        processes: or(c.processes === true, "processes", cgroupOf("pids")),
        file_size: or(c.file_size === true, "file_size", `prlimit RLIMIT_FSIZE (${prlimit})`),
        memory: or(c.memory === true, "memory", cgroupOf("memory"))
      },
      limitsFrom: `the node's measure in ${file}, ${measured.at.toISOString()}`
    }
  }
  const hasPrlimit = (() => {
    try {
      Fs.accessSync(prlimit, Fs.constants.X_OK)
      return true
    } catch {
      return false
    }
  })()
  return {
    limits: {
      wall,
      cpu: hasPrlimit ? `prlimit RLIMIT_CPU (${prlimit})` : `not available: ${prlimit} is missing`,
      processes: describeController("pids", host),
      file_size: hasPrlimit ? `prlimit RLIMIT_FSIZE (${prlimit})` : `not available: ${prlimit} is missing`,
      memory: describeController("memory", host)
    },
    limitsFrom: `this call's look, which changes nothing (${file === undefined ? "no release root" : `no ${file} yet`}: ` +
      "the node measures the host, and makes its cgroup ready, when it first checks a run)"
  }
}

/** status: anyone may ask who they are and where the hook stands. */
const careOf = (root: string) => ({
  sessions: readSessionFiles(root).map((s) => ({
    run: s.run,
    processUser: s.processUser,
    ...(s.started !== undefined ? { started: s.started.hash } : {})
  })),
  waiting: waitingRuns(releasePaths(root).care)
})

/** The node's supervisor as status shows it: its info file, checked against the kernel. */
const supervisorOf = (root: string, repository: string, user: string): NonNullable<StatusOutput["supervisor"]> => {
  const info = runningSupervisor(root, repository, user)
  if (info === undefined) {
    return { running: false, words: `none runs: the hook does the node's rounds itself (ocx2 supervise --node ${user} --root ${root} starts one)` }
  }
  const watchers = Object.entries(info.watchers).map(([run, pid]) => ({ run, pid }))
  return {
    running: true,
    words: `pid ${info.pid}, since ${info.since}: it hears each receipt and runs the node's rounds (the hook only wakes it), ` +
      `and holds ${watchers.length} watcher${watchers.length === 1 ? "" : "s"}`,
    pid: info.pid,
    since: info.since,
    watchers,
    rounds: info.rounds,
    ...(info.lastRound !== undefined ? { lastRound: info.lastRound } : {})
  }
}

/** How far status walks the workspaces in all: entries, and milliseconds. */
export const workspaceWalkBound = { entries: 200_000, ms: 2_000 }

/**
 * The space each run's workspace takes (ROOT/care/RUN.workspace names it), for those within ROOT
 * and outside OCX's own directories (ROOT's per-user directories): a walk that follows no link and
 * stops at `bound`, after which what was not counted shows as complete false.
 */
export const workspaceSizes = (root: string, bound: { readonly entries: number; readonly ms: number } = workspaceWalkBound) => {
  const paths = releasePaths(root)
  const own = [paths.care, paths.settings, paths.current, paths.previous, paths.next, paths.staged, paths.node].map((p) => Path.resolve(p))
  const within = (p: string, dir: string) => p === dir || p.startsWith(`${dir}/`)
  let names: Array<string>
  try {
    names = Fs.readdirSync(paths.care).filter((n) => n.endsWith(".workspace")).sort()
  } catch {
    return []
  }
  const until = Date.now() + bound.ms
  let entries = 0
  const out: Array<{ run: string; path: string; bytes: number; complete: boolean }> = []
  for (const name of names) {
    let path: string
    try {
      path = Path.resolve(Fs.readFileSync(Path.join(paths.care, name), "utf8").replace(/\n$/, ""))
    } catch {
      continue
    }
    if (!within(path, Path.resolve(root)) || path === Path.resolve(root) || own.some((o) => within(path, o))) continue
    if (!Fs.existsSync(path)) continue
    let bytes = 0
    let complete = true
    const stack = [path]
    while (stack.length > 0) {
      if (entries >= bound.entries || Date.now() > until) {
        complete = false
        break
      }
      const at = stack.pop()!
      entries++
      let st: Fs.Stats
      try {
        st = Fs.lstatSync(at)
      } catch {
        continue // gone meanwhile
      }
      bytes += st.blocks * 512
      if (!st.isDirectory()) continue
      try {
        for (const child of Fs.readdirSync(at)) stack.push(Path.join(at, child))
      } catch {
        // unreadable: counted as itself
      }
    }
    out.push({ run: name.slice(0, -".workspace".length), path, bytes, complete })
  }
  return out
}

/**
 * The active release's Node as this call sees it: gone from the host (its programs cannot start),
 * or of another ABI than the Node running this call, when this call runs the active release itself
 * (a checkout's ocx2 may run another Node and says only what it can know).
 */
const activeReleaseNodeWarnings = (root: string): ReadonlyArray<string> => {
  let current: string
  try {
    current = Fs.realpathSync(releasePaths(root).current)
  } catch {
    return []
  }
  const gone = stagedNodeProblem(current)
  if (gone !== undefined) return [gone]
  const running = releaseDirOfProgram(process.argv[1])
  const mismatch = running === current ? nodeMismatch(current) : undefined
  return mismatch !== undefined ? [mismatch] : []
}

export const hookStatus = (input: RootOnlyInput, context: ToolContext, programPath: string | undefined) => {
  const act = recording(context.dryRun)
  return finish(act, Effect.gen(function*() {
    const caller = { ...(context.caller.user !== undefined ? { user: context.caller.user } : {}), capabilities: context.caller.capabilities }
    // on the web, the root of the release serving the page, never one from the request
    const root = rootForStatus(context.entryPoint === "cgi" ? undefined : input.root, programPath)
    const limits = hostLimits(root)
    if (context.repository === undefined) {
      const output: StatusOutput = {
        caller,
        ...limits,
        ...(root !== undefined ? { root, disk: diskOf(root, undefined), workspaces: workspaceSizes(root) } : {})
      }
      return output
    }
    const repository = canonicalRepository(context.repository)
    const hooks = yield* readHooks(repository)
    const ours = hooks.filter((h) => runsOcx2Hook(h.command))
    const command = root !== undefined ? hookCommandOf(root) : undefined
    const state = ours.some((h) => h.command === command && h.type === "after-receive") ? "installed" : ours.length > 0 ? "other" : "absent"
    const words = state === "installed"
      ? `installed as this root installs it: ${command}`
      : state === "other"
        ? `ocx2-hook runs otherwise: ${ours.map((h) => h.command).join("; ")}${command !== undefined ? ` (this root installs ${command})` : ""}`
        : "absent: no after-receive hook runs ocx2-hook"
    const backoffice = yield* backofficeOf(repository)
    const node = root !== undefined ? nodeOf(root, repository) : undefined
    const last = root !== undefined ? lastHookLogEntry(hookLogOf(root)) : undefined
    const output: StatusOutput = {
      caller,
      ...limits,
      repository,
      ...(root !== undefined ? { root } : {}),
      hook: { state, words, commands: ours.map((h) => h.command) },
      otherHooks: others(hooks).filter((h) => h.type === "after-receive").map((h) => h.command),
      backoffice: { mode: backoffice.mode, disabled: backoffice.disabled, pollers: backoffice.pollers, fossilPollers: backoffice.fossilPollers, words: backoffice.words },
      ...(node !== undefined ? { node: node.user } : {}),
      ...(node?.serverUrl !== undefined ? { serverUrl: node.serverUrl } : {}),
      ...(() => {
        const warnings = [
          ...(node !== undefined && node.serverUrl === undefined ? [noServerUrlWarning(repository, node.user)] : []),
          ...(root !== undefined ? activeReleaseNodeWarnings(root) : [])
        ]
        return warnings.length > 0 ? { warnings } : {}
      })(),
      ...(root !== undefined && node !== undefined ? { supervisor: supervisorOf(root, repository, node.user) } : {}),
      ...(last !== undefined ? { lastRun: { at: last.at, repository: last.repository, given: last.given, did: last.did } } : {}),
      ...(root !== undefined ? { care: careOf(root), disk: diskOf(root, node !== undefined ? { repository, user: node.user } : undefined), workspaces: workspaceSizes(root) } : {})
    }
    return output
  }))
}
