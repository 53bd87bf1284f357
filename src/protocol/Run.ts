// 2.1 and 2.8 to 2.10: the run's content, every key with its type, form and default.
// Decoding names the first key that is wrong as a dotted path (refusal 2).
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { isLogin } from "./Envelope.js"
import { DurationText, SizeText, WholeNumber } from "./Sizes.js"
import { isStepKindName, stepKind, type StepKeyType } from "./StepKinds.js"

// ---- forms ---------------------------------------------------------------------------

const noNul = (s: string) => !s.includes("\u0000") || "holds a NUL character"

/** text as a process receives it: no NUL (exec could not pass it) */
export const Text = Schema.String.pipe(Schema.filter(noNul, { identifier: "Text" }))
export const NonEmptyText = Text.pipe(Schema.filter((s) => s.length > 0 || "is empty", { identifier: "NonEmptyText" }))

/** Placeholders whose value is an absolute path, so a path may start with one. */
export const pathPlaceholders = ["root", "release", "workspace", "tree", "clone"] as const

const PATH_START = new RegExp(`^(?:/|\\$\\$(?:${pathPlaceholders.join("|")})\\$\\$(?:/|$))`)

export const pathFormProblem = (s: string): string | undefined =>
  s.includes("\u0000")
    ? "holds a NUL character"
    : PATH_START.test(s)
      ? undefined
      : `${JSON.stringify(s)} is not an absolute path (it starts with / or with $$root$$, $$release$$, $$workspace$$, $$tree$$ or $$clone$$)`

/** an absolute path, or one starting with a placeholder whose value is one */
export const PathText = Schema.String.pipe(Schema.filter((s) => pathFormProblem(s) ?? true, { identifier: "Path" }))

export const Login = Schema.String.pipe(
  Schema.filter((s) => isLogin(s) || `${JSON.stringify(s)} is not a login`, { identifier: "Login" })
)

export const SERVER_CODE = /^[0-9a-f]{40}$/
export const ServerCode = Schema.String.pipe(
  Schema.filter((s) => SERVER_CODE.test(s) || `${JSON.stringify(s)} is not a server-code (40 lower-case hex digits)`, {
    identifier: "ServerCode"
  })
)

export const linuxCapabilityNames: ReadonlyArray<string> = [
  "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
  "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN",
  "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT",
  "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
  "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
  "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND",
  "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE"
]
export const LinuxCapability = Schema.String.pipe(
  Schema.filter((s) => linuxCapabilityNames.includes(s) || `${JSON.stringify(s)} is not a Linux capability name`, {
    identifier: "LinuxCapability"
  })
)

/** an environment variable's name: not empty, no `=`, no NUL */
export const EnvName = Schema.String.pipe(
  Schema.filter((s) => /^[^=\u0000]+$/.test(s) || `${JSON.stringify(s)} is not an environment variable name`, {
    identifier: "EnvName"
  })
)

/** an unversioned file's name: relative, no empty, `.` or `..` part, no backslash or NUL */
export const uvNameProblem = (s: string): string | undefined =>
  s.length === 0 ||
    s.startsWith("/") ||
    s.includes("\\") ||
    s.includes("\u0000") ||
    s.split("/").some((part) => part === "" || part === "." || part === "..")
    ? `${JSON.stringify(s)} is not an unversioned file name (a relative name without empty, . or .. parts)`
    : undefined
export const UnversionedName = Schema.String.pipe(Schema.filter((s) => uvNameProblem(s) ?? true))

const oneOf = <const L extends ReadonlyArray<string>>(...values: L) =>
  Schema.String.pipe(
    Schema.filter((s): s is L[number] => values.includes(s), {
      message: (issue) =>
        `${JSON.stringify(issue.actual)} is not one of ${values.map((v) => JSON.stringify(v)).join(", ")}`
    })
  )

const Flag = (value: boolean) => Schema.optionalWith(Schema.Boolean, { default: () => value, exact: true })
const listOf = <A, I>(item: Schema.Schema<A, I>) =>
  Schema.optionalWith(Schema.Array(item), { default: () => [] as ReadonlyArray<A>, exact: true })

// ---- 2.8 sandbox ---------------------------------------------------------------------

export const CreatedFile = Schema.Struct({ at: PathText, text: Text })

/** every key required: the run says all of it */
export const Sandbox = Schema.Struct({
  uid: WholeNumber,
  gid: WholeNumber,
  linux_capabilities: Schema.Array(LinuxCapability),
  network: Schema.Boolean,
  isolate_terminal: Schema.Boolean,
  ends_with_parent: Schema.Boolean,
  proc: PathText,
  dev: PathText,
  tmp: PathText,
  read_only: Schema.Array(PathText),
  read_write: Schema.Array(PathText),
  homes: Schema.Array(PathText),
  created_files: Schema.Array(CreatedFile)
})
export type Sandbox = typeof Sandbox.Type

// ---- 2.9 limits ----------------------------------------------------------------------

export const limitNames = ["wall", "cpu", "processes", "file_size", "memory"] as const
export type LimitName = (typeof limitNames)[number]

export const Limits = Schema.Struct({
  wall: Schema.optionalWith(DurationText, { exact: true }),
  cpu: Schema.optionalWith(WholeNumber, { exact: true }),
  processes: Schema.optionalWith(WholeNumber, { exact: true }),
  file_size: Schema.optionalWith(SizeText, { exact: true }),
  memory: Schema.optionalWith(SizeText, { exact: true })
})
export type Limits = typeof Limits.Type

// ---- 2.10 process --------------------------------------------------------------------

export const Keep = Schema.Struct({
  stderr: Schema.optionalWith(SizeText, { default: () => "64K", exact: true }),
  stdout: Schema.optionalWith(SizeText, { default: () => "64K", exact: true }),
  stdout_when: Schema.optionalWith(oneOf("failure", "always"), { default: () => "failure" as const, exact: true })
})
export type Keep = typeof Keep.Type

/** ["*"] for every user, or logins */
export const Hears = Schema.Array(Schema.String).pipe(
  Schema.filter((list) => {
    if (list.length === 1 && list[0] === "*") return true
    const bad = list.find((login) => !isLogin(login))
    return bad === undefined || (bad === "*" ? `"*" stands alone: ["*"]` : `${JSON.stringify(bad)} is not a login`)
  })
)

export const BranchName = Schema.String.pipe(
  Schema.filter((s) => /^[^\x00-\x1f\x7f]+$/.test(s) || `${JSON.stringify(s)} is not a branch name`)
)

export const UnversionedFile = Schema.Struct({ at: PathText, as: UnversionedName })

export const Process = Schema.Struct({
  user: Login,
  command: Schema.Array(Text).pipe(
    Schema.filter((command) => (command[0] ?? "").length > 0 || "the program (its first item) is missing or empty")
  ),
  env: Schema.optionalWith(Schema.Record({ key: EnvName, value: Text }), {
    default: () => ({}) as Readonly<Record<string, string>>,
    exact: true
  }),
  /** default: $$workspace$$ with a directory step, else / (see cwdOf) */
  cwd: Schema.optionalWith(PathText, { exact: true }),
  manual: Flag(false),
  session: Flag(false),
  hears: Schema.optionalWith(Hears, { default: () => [] as ReadonlyArray<string>, exact: true }),
  checkins: listOf(BranchName),
  deliveries: Schema.optionalWith(oneOf("feed", "start"), { default: () => "feed" as const, exact: true }),
  terminal: Flag(false),
  keep: Schema.optionalWith(Keep, {
    default: () => ({ stderr: "64K", stdout: "64K", stdout_when: "failure" as const }),
    exact: true
  }),
  verdict: Flag(false),
  unversioned_files: listOf(UnversionedFile)
})
export type Process = typeof Process.Type

// ---- 2.1 the run ---------------------------------------------------------------------

/** A step as written: its kind and keys are checked against 2.7 by Steps (refusal 3). */
export const RawStep = Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
  message: () => "expected a step (an object with step naming its kind)"
})
export type RawStep = typeof RawStep.Type

export const Run = Schema.Struct({
  clone: ServerCode,
  objective: Schema.String.pipe(Schema.filter((s) => s.trim().length > 0 || "is empty")),
  workspace: listOf(RawStep),
  sandbox: Schema.optionalWith(Sandbox, { exact: true }),
  limits: Schema.optionalWith(Limits, { default: () => ({}), exact: true }),
  process: Process
})
export type Run = typeof Run.Type
export type RunEncoded = typeof Run.Encoded

/** The key that is wrong, as a dotted path (`process.nodes`, `workspace[1].into`), and why. */
export interface RunKeyError {
  readonly key: string
  readonly message: string
}

export const keyPath = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>(
    (out, part) =>
      typeof part === "number" ? `${out}[${part}]` : out === "" ? String(part) : `${out}.${String(part)}`,
    ""
  )

const decodeStrict = Schema.decodeUnknownEither(Run, { onExcessProperty: "error", errors: "first" })
const encodeRunSync = Schema.encodeSync(Run)

const fromParseError = (error: ParseResult.ParseError, prefix: ReadonlyArray<PropertyKey> = []): RunKeyError => {
  const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
  const key = keyPath([...prefix, ...(issue?.path ?? [])])
  const message =
    issue === undefined
      ? "is not a run"
      : issue._tag === "Unexpected"
        ? issue.path.length === 3 && issue.path[0] === "process" && issue.path[1] === "env"
          ? "is not an environment variable name"
          : "a key version 2 does not define"
        : issue._tag === "Missing"
          ? "missing"
          : issue.message
  return { key: key === "" ? "run" : key, message }
}

const isObject = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const keyTypeProblem = (type: StepKeyType, value: unknown): string | undefined => {
  switch (type) {
    case "text":
      return typeof value === "string" ? undefined : "expected text"
    case "path":
      return typeof value === "string" ? pathFormProblem(value) : "expected a path (text)"
    case "names":
      return Array.isArray(value) && value.every((name) => typeof name === "string" && name.length > 0)
        ? undefined
        : "expected a list of names (texts)"
  }
}

/** Types and forms of the keys a step kind has (refusal 2); kind, missing and extra keys are refusal 3. */
const stepTypeError = (workspace: ReadonlyArray<RawStep>): RunKeyError | undefined => {
  for (const [index, step] of workspace.entries()) {
    const kind = step["step"]
    if (kind === undefined) continue
    if (typeof kind !== "string") return { key: `workspace[${index}].step`, message: "expected text" }
    if (!isStepKindName(kind)) continue
    for (const [key, type] of Object.entries(stepKind(kind).keys)) {
      if (!Object.hasOwn(step, key)) continue
      const problem = keyTypeProblem(type, step[key])
      if (problem !== undefined) return { key: `workspace[${index}].${key}`, message: problem }
    }
  }
  return undefined
}

/** Rules of 2.10 that tie two keys together (refusal 2). */
const combinationError = (run: Run): RunKeyError | undefined => {
  if (run.process.verdict && run.process.session) {
    return { key: "process.verdict", message: "a session asks no verdict" }
  }
  if (run.process.session && run.process.deliveries === "start" && run.process.unversioned_files.length > 0) {
    return { key: "process.unversioned_files", message: "a session whose deliveries is start publishes no files" }
  }
  return undefined
}

/** The run's content (the value of `run`), with defaults applied. */
export const decodeRun = (content: unknown): Either.Either<Run, RunKeyError> => {
  if (!isObject(content)) return Either.left({ key: "run", message: "expected an object" })
  return Either.flatMap(Either.mapLeft(decodeStrict(content), (error) => fromParseError(error)), (run) => {
    const problem = stepTypeError(run.workspace) ?? combinationError(run)
    return problem === undefined ? Either.right(run) : Either.left(problem)
  })
}

/** The run as it is sent (defaults written out). */
export const encodeRun = (run: Run): RunEncoded => encodeRunSync(run)

/**
 * The run's envelope (2.0): `to` is required and a login; beside `ocx`, `to`, `re` and
 * `run`, a block holding a run may have no key (`node` of version 1 is refused by name).
 */
export const checkRunEnvelope = (block: Readonly<Record<string, unknown>>): Either.Either<string, RunKeyError> => {
  const extra = Object.keys(block).find((key) => !["ocx", "to", "re", "run"].includes(key))
  if (extra !== undefined) return Either.left({ key: extra, message: "a key version 2 does not define" })
  const to = block["to"]
  if (to === undefined) return Either.left({ key: "to", message: "missing" })
  if (!isLogin(to)) return Either.left({ key: "to", message: `${JSON.stringify(to)} is not a login` })
  return Either.right(to)
}

/** The envelope, then the content: what refusal 2 says of a block holding a run. */
export const decodeRunMessage = (
  block: Readonly<Record<string, unknown>>
): Either.Either<{ readonly to: string; readonly run: Run }, RunKeyError> =>
  Either.flatMap(checkRunEnvelope(block), (to) => Either.map(decodeRun(block["run"]), (run) => ({ to, run })))

/** Whether the run has a workspace: a `directory` step (2.7). */
export const hasWorkspace = (run: Run): boolean => run.workspace.some((step) => step["step"] === "directory")

/** `cwd` with its default (2.10). */
export const cwdOf = (run: Run): string => run.process.cwd ?? (hasWorkspace(run) ? "$$workspace$$" : "/")
