// A checked run and the values its steps set, made into the launcher's specification: every
// placeholder substituted, sizes in bytes, durations in seconds. The launcher knows no runs.

import * as Either from "effect/Either"
import * as Match from "effect/Match"
import type { LaunchCheckError, LaunchSpec, Limits } from "../../services/SandboxLauncher.js"
import { substitute, type Values } from "../protocol/Placeholders.js"
import { refusal, type CheckedRun, type Refusal } from "../protocol/Refusals.js"
import { cwdOf } from "../protocol/Run.js"
import { parseDuration, parseSize } from "../protocol/Sizes.js"
import { firstLine } from "../protocol/Subscriptions.js"

export interface LaunchContext {
  readonly runHash: string
  readonly releaseDir: string
  readonly ownPaths: ReadonlyArray<string>
}

const bytes = (text: string | undefined): number | undefined =>
  text === undefined ? undefined : Either.getOrUndefined(parseSize(text))

const seconds = (text: string | undefined): number | undefined =>
  text === undefined ? undefined : Either.getOrUndefined(parseDuration(text))

export const limitsOf = (checked: Pick<CheckedRun, "run">): Limits => {
  const limits = checked.run.limits
  return {
    wallSeconds: seconds(limits.wall),
    cpuSeconds: limits.cpu,
    processes: limits.processes,
    fileSizeBytes: bytes(limits.file_size),
    memoryBytes: bytes(limits.memory)
  }
}

/** Substitutes every placeholder; a value still unset is refusal 3 (the checks should have caught it). */
export const launchSpec = (checked: CheckedRun, values: Values, context: LaunchContext): Either.Either<LaunchSpec, Refusal> => {
  const problems: Array<string> = []
  const sub = (where: string) => (text: string): string => {
    const result = substitute(text, values)
    if (result._tag === "Right") return result.right
    problems.push(`${where} uses $$${result.left}$$, which no step set`)
    return text
  }
  const { run } = checked
  const process = run.process
  const command = process.command.map((part, i) => sub(`process.command[${i}]`)(part))
  const env = Object.fromEntries(Object.entries(process.env).map(([name, value]) => [name, sub(`process.env.${name}`)(value)]))
  const cwd = sub("process.cwd")(cwdOf(run))
  const sandbox = run.sandbox === undefined ? undefined : {
    uid: run.sandbox.uid,
    gid: run.sandbox.gid,
    linuxCapabilities: run.sandbox.linux_capabilities,
    network: run.sandbox.network,
    isolateTerminal: run.sandbox.isolate_terminal,
    endsWithParent: run.sandbox.ends_with_parent,
    proc: sub("sandbox.proc")(run.sandbox.proc),
    dev: sub("sandbox.dev")(run.sandbox.dev),
    tmp: sub("sandbox.tmp")(run.sandbox.tmp),
    readOnly: run.sandbox.read_only.map((p, i) => sub(`sandbox.read_only[${i}]`)(p)),
    readWrite: run.sandbox.read_write.map((p, i) => sub(`sandbox.read_write[${i}]`)(p)),
    homes: run.sandbox.homes.map((p, i) => sub(`sandbox.homes[${i}]`)(p)),
    createdFiles: run.sandbox.created_files.map((f, i) => ({
      at: sub(`sandbox.created_files[${i}].at`)(f.at),
      text: sub(`sandbox.created_files[${i}].text`)(f.text)
    })),
    workspace: values.workspace,
    release: context.releaseDir,
    ownPaths: context.ownPaths
  }
  if (problems.length > 0) return Either.left(refusal(3, problems[0]!))
  return Either.right({
    name: context.runHash,
    command,
    env,
    cwd,
    sandbox,
    limits: limitsOf(checked),
    // a session that feeds keeps its input open for each delivery, and a terminal for what a person
    // joined types (2.10); a process that starts for each delivery reads its lines, then its input closes
    stdin: {
      lines: [firstLine(context.runHash, run.objective)],
      keepOpen: process.session ? process.deliveries === "feed" : process.terminal
    },
    keep: { stdout: bytes(process.keep.stdout) ?? 65536, stderr: bytes(process.keep.stderr) ?? 65536 },
    logDir: values.workspace,
    // 2.10: a terminal the watcher holds, of a common size until a person joined resizes it
    terminal: process.terminal ? { rows: 24, cols: 80 } : undefined
  })
}

/**
 * What the launcher's check found against the run's launch, as the run's refusal: a sandbox path
 * is 7, a limit the host cannot keep 6, a malformed key 2. One row per error the check can give,
 * so a new one does not compile until it is given its refusal here.
 */
export const refusalOfUnfit = (unfit: LaunchCheckError): Refusal =>
  Match.valueTags(unfit, {
    SandboxPathRefused: (e) => refusal(7, `${e.path}${e.resolved !== e.path ? ` (${e.resolved})` : ""}: ${e.reason}`),
    LimitUnavailable: (e) => refusal(6, `${e.which}: ${e.reason}`),
    InvalidLaunchSpec: (e) => refusal(2, `${e.key}: ${e.reason}`)
  })
