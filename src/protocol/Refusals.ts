// 2.14: refusals 1 to 7, checked in order when a run arrives (and again when a person
// starts a manual run); the first that holds ends the run refused with a note naming
// exactly what. Refusal 8 (a step fails) is found by the watcher as steps run.
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { endedRefused, type EndedContent } from "./Outcomes.js"
import { hasDotDot, isWithin, knownPrefix, meeting, normalizePath } from "./Paths.js"
import { substituteKnown, type StartValues } from "./Placeholders.js"
import { decodeRunMessage, Limits, LinuxCapability, limitNames, type LimitName, type Run } from "./Run.js"
import { holdsR, isAdminOrSetup, type Sender } from "./Senders.js"
import { parseDuration, parseSize } from "./Sizes.js"
import { planRun, startValues, type Plan, type PlannedPath, type PlannedText } from "./Steps.js"

export type RefusalNumber = 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8

export interface Refusal {
  readonly _tag: "Refusal"
  readonly number: RefusalNumber
  /** names exactly what: the key, the path, the step, the limit */
  readonly note: string
}

export const refusal = (number: RefusalNumber, note: string): Refusal => ({ _tag: "Refusal", number, note })

/** Refusal 8: a step failed as it ran, named by its position and kind, and why. */
export const stepFailed = (index: number, kind: string, why: string): Refusal =>
  refusal(8, `workspace[${index}] (${kind}) failed: ${why}`)

/** The `ended` that answers a refusal: its note says which refusal and what. */
export const endedOfRefusal = (r: Refusal): EndedContent => endedRefused(`refusal ${r.number}: ${r.note}`)

// ---- ROOT/settings/capability-R.json -------------------------------------------------

const ListedPath = Schema.String.pipe(
  Schema.filter((s) => (s.startsWith("/") && !hasDotDot(s)) || `${JSON.stringify(s)} is not an absolute path without ..`)
)

/** What a sender holding R (and neither admin nor setup) may ask; every key optional. */
export const CapabilityR = Schema.Struct({
  network: Schema.optionalWith(Schema.Boolean, { default: () => false, exact: true }),
  linux_capabilities: Schema.optionalWith(Schema.Array(LinuxCapability), {
    default: () => [] as ReadonlyArray<string>,
    exact: true
  }),
  read_only: Schema.optionalWith(Schema.Array(ListedPath), { default: () => [] as ReadonlyArray<string>, exact: true }),
  /** each limit named caps runs; one left out caps nothing */
  limits: Schema.optionalWith(Limits, { default: () => ({}), exact: true })
})
export type CapabilityR = typeof CapabilityR.Type

const decodeCapabilityRStrict = Schema.decodeUnknownEither(CapabilityR, { onExcessProperty: "error" })

export const decodeCapabilityR = (json: unknown): Either.Either<CapabilityR, string> =>
  Either.mapLeft(decodeCapabilityRStrict(json), (error) => {
    const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
    const key = issue?.path.map(String).join(".") ?? ""
    return `capability-R.json${key === "" ? "" : ` ${key}`}: ${
      issue?._tag === "Unexpected" ? "a key it does not define" : (issue?.message ?? "invalid")
    }`
  })

// ---- the host ------------------------------------------------------------------------

/** Sandbox keys and limits a host may be unable to provide (refusal 6). */
export const providableKeys = [
  "sandbox",
  "network",
  "linux_capabilities",
  "isolate_terminal",
  "ends_with_parent",
  /** process.session: a node that cannot deliver (2.11) cannot run a session */
  "session",
  /** process.terminal: a node that holds no terminals cannot give one */
  "terminal",
  ...limitNames
] as const
export type ProvidableKey = (typeof providableKeys)[number]
export type Provides = Readonly<Record<ProvidableKey, boolean>>

export const providesAll: Provides = Object.fromEntries(providableKeys.map((key) => [key, true])) as Provides

export interface HostSettings {
  /** ROOT, the release root */
  readonly root: string
  readonly nodeUser: string
  /** base name of the node's repository file without .fossil */
  readonly repositoryName: string
  /** ROOT/current */
  readonly releaseDir: string
  /** ROOT/settings/capability-R.json, parsed; undefined when absent */
  readonly capabilityR: CapabilityR | undefined
  /** ROOT/settings/unconfined exists */
  readonly unconfined: boolean
  readonly provides: Provides
  /** OCX's own paths: the run's clone file, ROOT/care, ROOT/settings, the program dirs, the passwords file */
  readonly ownPaths: ReadonlyArray<string>
  /** follows links: realpath of the longest existing prefix plus the rest */
  readonly resolve: (path: string) => string
  /**
   * Whether a host path exists (2.8: a path to bind that does not exist is refused). Absent where
   * the node's host is not the one checking (create, for a node on another host): not judged.
   */
  readonly exists?: (path: string) => boolean
  /**
   * false where ROOT is a stand-in (create, for a node on another host, whose ROOT it cannot
   * know): what lies within ROOT is then not judged. Absent or true: `root` is the node's ROOT.
   */
  readonly rootKnown?: boolean
}

export interface CheckInput {
  /** the block holding the run (Envelope's Message.block) */
  readonly message: { readonly block: Readonly<Record<string, unknown>> }
  /** the run's full hash: $$run$$ */
  readonly runHash: string
  /** as the server's receipt says; undefined when unknown */
  readonly sender: Sender | undefined
  /** the process user's capabilities on the server; undefined when there is no such user */
  readonly processUserCapabilities: string | undefined
  /** logins named as the `to` of a run an admin or setup sent */
  readonly cloneUsers: ReadonlySet<string>
  readonly host: HostSettings
}

export interface CheckedRun {
  readonly to: string
  readonly run: Run
  readonly start: StartValues
  readonly plan: Plan
}

// ---- 1: the sender -------------------------------------------------------------------

const senderRefusal = (input: CheckInput): Refusal | undefined => {
  const sender = input.sender
  if (sender === undefined) return refusal(1, "the server has not said who sent it")
  if (!isAdminOrSetup(sender.capabilities) && !holdsR(sender.capabilities)) {
    return refusal(1, `its sender ${sender.login} holds none of admin (a), setup (s) and R`)
  }
  if (sender.login === input.message.block["to"]) return refusal(1, `the run's to (${sender.login}) sent it`)
  if (!isAdminOrSetup(sender.capabilities) && input.host.capabilityR === undefined) {
    return refusal(1, `its sender ${sender.login} holds R, and this host has no ROOT/settings/capability-R.json`)
  }
  return undefined
}

const pathKeysOf = (run: Run): ReadonlyArray<readonly [string, string]> => {
  const out: Array<readonly [string, string]> = []
  run.workspace.forEach((step, i) => {
    for (const key of ["at", "into"]) {
      const value = step[key]
      if (typeof value === "string") out.push([`workspace[${i}].${key}`, value])
    }
  })
  const sandbox = run.sandbox
  if (sandbox !== undefined) {
    for (const key of ["proc", "dev", "tmp"] as const) out.push([`sandbox.${key}`, sandbox[key]])
    for (const list of ["read_only", "read_write", "homes"] as const) {
      sandbox[list].forEach((path, i) => out.push([`sandbox.${list}[${i}]`, path]))
    }
    sandbox.created_files.forEach((file, i) => out.push([`sandbox.created_files[${i}].at`, file.at]))
  }
  if (run.process.cwd !== undefined) out.push(["process.cwd", run.process.cwd])
  run.process.unversioned_files.forEach((file, i) => {
    out.push([`process.unversioned_files[${i}].at`, file.at], [`process.unversioned_files[${i}].as`, file.as])
  })
  return out
}

/** Texts that stand within the run's own workspace: $$workspace$$, and what steps make inside it. */
const OWN_WORKSPACE = /^\$\$(?:workspace|tree|clone)\$\$(?:\/|$)/
const RELEASE = /^\$\$release\$\$(?:\/|$)/

const limitValue = (name: LimitName, value: string | number): number =>
  typeof value === "number"
    ? value
    : Either.getOrElse(name === "wall" ? parseDuration(value) : parseSize(value), () => Number.POSITIVE_INFINITY)

/** Refusal 1 for a sender holding R alone: the run asks no more than capability-R.json allows. */
const capabilityRRefusal = (run: Run, cap: CapabilityR, input: CheckInput, start: StartValues): Refusal | undefined => {
  const login = input.sender?.login ?? ""
  const r = (note: string) => refusal(1, `${note} (its sender ${login} holds R alone)`)
  const sandbox = run.sandbox
  if (sandbox === undefined) return r("sandbox: R allows no run without a sandbox")
  if (sandbox.network && !cap.network) return r("sandbox.network: R does not allow the network")
  const capIndex = sandbox.linux_capabilities.findIndex((name) => !cap.linux_capabilities.includes(name))
  if (capIndex >= 0) {
    return r(`sandbox.linux_capabilities[${capIndex}]: R does not allow ${sandbox.linux_capabilities[capIndex]}`)
  }
  if (sandbox.homes.length > 0) return r("sandbox.homes: R allows no home")
  const passwordStep = run.workspace.findIndex((step) => step["step"] === "password")
  if (passwordStep >= 0) return r(`workspace[${passwordStep}] (password): R allows no password step`)
  // version 2 has no secret key (the seed's "a secret" refers to none): nothing to check
  const dotted = pathKeysOf(run).find(([, text]) => hasDotDot(text))
  if (dotted !== undefined) return r(`${dotted[0]}: R allows no path with ..`)
  const directory = run.workspace.findIndex(
    (step) => step["step"] === "directory" && !(typeof step["at"] === "string" && step["at"].endsWith("$$run$$"))
  )
  if (directory >= 0) return r(`workspace[${directory}].at: R allows only a directory whose path ends in $$run$$`)

  const resolve = (path: string) => normalizePath(input.host.resolve(path))
  const listed = cap.read_only.map(resolve)
  const readable = (text: string) =>
    OWN_WORKSPACE.test(text) ||
    RELEASE.test(text) ||
    listed.some((dir) => isWithin(resolve(knownPrefix(substituteKnown(text, start))), dir))
  const unreadable = sandbox.read_only.findIndex((text) => !readable(text))
  if (unreadable >= 0) {
    return r(
      `sandbox.read_only[${unreadable}]: R allows reading only its own $$workspace$$, $$release$$ and ${
        cap.read_only.length === 0 ? "no listed path" : cap.read_only.join(", ")
      }`
    )
  }
  const unwritable = sandbox.read_write.findIndex((text) => !OWN_WORKSPACE.test(text))
  if (unwritable >= 0) return r(`sandbox.read_write[${unwritable}]: R allows writing only within its own $$workspace$$`)

  for (const name of limitNames) {
    const capped = cap.limits[name]
    if (capped === undefined) continue
    const asked = run.limits[name]
    if (asked === undefined) return r(`limits.${name}: R caps it at ${capped} and the run leaves it out`)
    if (limitValue(name, asked) > limitValue(name, capped)) {
      return r(`limits.${name}: ${asked} is above R's cap of ${capped}`)
    }
  }
  return undefined
}

// ---- 4, 5, 6 -------------------------------------------------------------------------

const processUserRefusal = (run: Run, to: string, input: CheckInput): Refusal | undefined => {
  const user = run.process.user
  if (user === to) return refusal(4, `process.user (${user}) is the run's to`)
  if (input.cloneUsers.has(user)) return refusal(4, `process.user (${user}) is a clone's user`)
  if (input.processUserCapabilities === undefined) return refusal(4, `process.user (${user}) is no user of the server`)
  if (isAdminOrSetup(input.processUserCapabilities)) return refusal(4, `process.user (${user}) holds admin or setup`)
  return undefined
}

const unconfinedRefusal = (run: Run, host: HostSettings): Refusal | undefined =>
  run.sandbox === undefined && !host.unconfined
    ? refusal(5, "no sandbox, and this host has no ROOT/settings/unconfined")
    : undefined

const providesRefusal = (run: Run, provides: Provides): Refusal | undefined => {
  const cannot = (key: string) => refusal(6, `${key}: this host cannot provide it`)
  const sandbox = run.sandbox
  if (sandbox !== undefined) {
    if (!provides.sandbox) return cannot("sandbox")
    if (sandbox.network && !provides.network) return cannot("sandbox.network")
    if (sandbox.linux_capabilities.length > 0 && !provides.linux_capabilities) return cannot("sandbox.linux_capabilities")
    if (sandbox.isolate_terminal && !provides.isolate_terminal) return cannot("sandbox.isolate_terminal")
    if (sandbox.ends_with_parent && !provides.ends_with_parent) return cannot("sandbox.ends_with_parent")
  }
  if (run.process.session && !provides.session) return cannot("process.session")
  if (run.process.terminal && !provides.terminal) return cannot("process.terminal")
  const limit = limitNames.find((name) => run.limits[name] !== undefined && !provides[name])
  return limit === undefined ? undefined : cannot(`limits.${limit}`)
}

// ---- 7: paths ------------------------------------------------------------------------

/**
 * The directory a planned text certainly is or lies within: the text itself, or, while a value
 * is still unknown, the directory before it (after its `..` parts, each placeholder one part).
 */
const knownPath = (text: PlannedText): string =>
  text.pending.length === 0 ? text.text : knownPrefix(normalizePath(text.text))

/** The host's /proc: bound, it would show the host's processes (2.8). */
const hostProc = "/proc"

/** Keys whose paths are host paths the sandbox binds (2.8). */
const bindRoles: ReadonlyArray<PlannedPath["role"]> = ["read_only", "read_write", "homes"]

/**
 * Whether a path to bind is the run's own workspace or lies within it, after `..` and links. A
 * workspace not known until a step runs is compared as text (each placeholder one part), and
 * the path judged again when the sandbox is made.
 */
const withinOwnWorkspace = (path: PlannedPath, resolved: string, resolve: (path: string) => string): boolean => {
  const workspace = path.workspace
  if (workspace === undefined) return false
  return workspace.pending.length === 0
    ? isWithin(resolved, resolve(workspace.text))
    : isWithin(normalizePath(path.text.text), normalizePath(workspace.text))
}

const pathRefusal = (plan: Plan, input: CheckInput): Refusal | undefined => {
  const host = input.host
  const resolve = (path: string) => normalizePath(host.resolve(path))
  const root = resolve(host.root)
  const release = resolve(host.releaseDir)
  const own = host.ownPaths.map((path) => ({ path, resolved: resolve(path) }))
  const refuse = (path: PlannedPath, resolved: string, why: string) =>
    refusal(7, `${path.key}: ${path.raw} (${resolved}) ${why}`)

  for (const path of plan.paths) {
    const exact = path.text.pending.length === 0
    const resolved = resolve(knownPath(path.text))
    if (path.role === "directory" && !isWithin(resolved, root)) return refuse(path, resolved, `lies outside ROOT (${root})`)
    if (path.role === "into" || path.role === "unversioned_files") {
      const workspace = path.workspace === undefined ? undefined : resolve(knownPath(path.workspace))
      if (workspace === undefined || !isWithin(resolved, workspace)) {
        return refuse(path, resolved, `lies outside $$workspace$$${workspace === undefined ? "" : ` (${workspace})`}`)
      }
    }
    const binds = bindRoles.includes(path.role)
    // of ROOT, a run binds its own workspace and what lies within it, and $$release$$ read-only
    const ownWorkspace = binds && withinOwnWorkspace(path, resolved, resolve)
    const exempt = ownWorkspace || (path.role === "read_only" && isWithin(resolved, release))
    if (!exempt) {
      // a partly known path, and a place it starts in or writes into, cannot be said to hold them
      const mayHold = exact && (binds || path.role === "directory")
      for (const { path: ownPath, resolved: ownResolved } of own) {
        const how = meeting(resolved, ownResolved)
        if (how === undefined || (how === "holds" && !mayHold)) continue
        return refuse(path, resolved, `${how} OCX's own ${ownPath}`)
      }
    }
    if (!binds) continue
    if (!exempt && host.rootKnown !== false && isWithin(resolved, root)) {
      return refuse(
        path,
        resolved,
        `lies within ROOT (${root}), which holds OCX's programs and every run's workspace: of it a run binds only its own $$workspace$$ and what lies within it`
      )
    }
    const proc = meeting(resolved, hostProc)
    if (proc !== undefined && (exact || proc !== "holds")) return refuse(path, resolved, `${proc} the host's ${hostProc}`)
    if (exact && !ownWorkspace && host.exists !== undefined && !host.exists(resolved)) {
      return refuse(path, resolved, "does not exist on this host")
    }
  }
  return undefined
}

// ---- all in order --------------------------------------------------------------------

/** Refusals 1 to 7 in order; the first that holds is the Left. */
export const checkRun = (input: CheckInput): Either.Either<CheckedRun, Refusal> => {
  const senderProblem = senderRefusal(input)
  if (senderProblem !== undefined) return Either.left(senderProblem)

  const decoded = decodeRunMessage(input.message.block)
  if (Either.isLeft(decoded)) return Either.left(refusal(2, `${decoded.left.key}: ${decoded.left.message}`))
  const { run, to } = decoded.right

  const start = startValues({
    root: input.host.root,
    releaseDir: input.host.releaseDir,
    runHash: input.runHash,
    processUser: run.process.user,
    repositoryName: input.host.repositoryName,
    nodeUser: to
  })
  const cap = input.host.capabilityR
  if (input.sender !== undefined && !isAdminOrSetup(input.sender.capabilities) && cap !== undefined) {
    const r = capabilityRRefusal(run, cap, input, start)
    if (r !== undefined) return Either.left(r)
  }

  const planned = planRun(run, start)
  if (Either.isLeft(planned)) return Either.left(refusal(3, planned.left))
  const plan = planned.right

  const later =
    processUserRefusal(run, to, input) ??
    unconfinedRefusal(run, input.host) ??
    providesRefusal(run, input.host.provides) ??
    pathRefusal(plan, input)
  return later === undefined ? Either.right({ to, run, start, plan }) : Either.left(later)
}
