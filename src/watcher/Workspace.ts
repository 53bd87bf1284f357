// 2.7: the workspace steps, performed in order once the run is in the node's care and before
// started is written. Each path is judged again here, after links are resolved as they stand
// now (refusal 7); a step that cannot do its work ends the run refused 8, naming it and why.
// What a step asks of Fossil goes through the Checkouts service (services/Checkouts.ts).

import * as Effect from "effect/Effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Checkouts } from "../../services/Checkouts.js"
import { Repository } from "../../services/Repository.js"
import type { PlaceholderName, Values } from "../protocol/Placeholders.js"
import { substitute } from "../protocol/Placeholders.js"
import { refusal, stepFailed, type CheckedRun, type Refusal } from "../protocol/Refusals.js"
import { parseSize } from "../protocol/Sizes.js"
import type { PlannedStep, PlannedText } from "../protocol/Steps.js"
import { isWithin, resolveLoose } from "../sandbox/MountPlan.js"
import type { NodeConfig } from "../root/NodeConfig.js"
import { nodeOwnPaths } from "../root/NodeConfig.js"

export interface StepContext {
  readonly config: NodeConfig
  /** the repository file's role: only the served repository's host can set a password */
  readonly role: "served" | "clone"
  /** who owns what the steps make: the sandbox's uid and gid, or undefined when unconfined */
  readonly owner: { readonly uid: number; readonly gid: number } | undefined
  /** the file_size limit in bytes, for collect */
  readonly fileSizeLimit: number | undefined
}

type Mutable<A> = { -readonly [K in keyof A]: A[K] }

const fail = (step: PlannedStep, why: string) => Effect.fail(stepFailed(step.index, step.step, why))

const textOf = (step: PlannedStep, key: string, values: Values): Effect.Effect<string, Refusal> => {
  const planned = step.keys[key] as PlannedText | undefined
  if (planned === undefined) return fail(step, `its ${key} is missing`)
  const substituted = substitute(planned.text, values)
  return substituted._tag === "Right"
    ? Effect.succeed(substituted.right)
    : Effect.fail(refusal(3, `workspace[${step.index}].${key} uses $$${substituted.left}$$ before it is set`))
}

const listOf = (step: PlannedStep, key: string, values: Values): Effect.Effect<ReadonlyArray<string>, Refusal> => {
  const planned = step.keys[key]
  const list = Array.isArray(planned) ? planned : planned === undefined ? [] : [planned as PlannedText]
  return Effect.forEach(list, (item, i) => {
    const substituted = substitute(item.text, values)
    return substituted._tag === "Right"
      ? Effect.succeed(substituted.right)
      : Effect.fail(refusal(3, `workspace[${step.index}].${key}[${i}] uses $$${substituted.left}$$ before it is set`))
  })
}

/** Refusal 7 for a path a step makes or writes into: within `within`, and clear of OCX's own files. */
const judgePath = (step: PlannedStep, key: string, path: string, within: string, config: NodeConfig): Effect.Effect<string, Refusal> => {
  const where = `workspace[${step.index}].${key}`
  if (!Path.isAbsolute(path)) return Effect.fail(refusal(7, `${where}: ${path} is not an absolute path`))
  const resolved = resolveLoose(path)
  const base = resolveLoose(within)
  if (!isWithin(resolved, base)) {
    return Effect.fail(refusal(7, `${where}: ${path}${resolved !== path ? ` (${resolved})` : ""} lies outside ${within}`))
  }
  for (const own of nodeOwnPaths(config)) {
    const ownResolved = resolveLoose(own)
    if (isWithin(resolved, ownResolved) || isWithin(ownResolved, resolved)) {
      return Effect.fail(refusal(7, `${where}: ${path}${resolved !== path ? ` (${resolved})` : ""} reaches OCX's own ${own}`))
    }
  }
  return Effect.succeed(resolved)
}

const attempt = <A>(step: PlannedStep, what: string, f: () => A): Effect.Effect<A, Refusal> =>
  Effect.try({ try: f, catch: (e) => stepFailed(step.index, step.step, `${what}: ${(e as Error).message}`) })

/** A step's failure of Checkouts: refusal 8, saying what the step could not do and why. */
const checkoutFailed = (step: PlannedStep, what: string) => (e: { readonly message: string }) => fail(step, `${what}: ${e.message}`)

const chownTree = (path: string, owner: StepContext["owner"]) => {
  if (owner === undefined) return
  const walk = (p: string) => {
    const stat = Fs.lstatSync(p)
    Fs.lchownSync(p, owner.uid, owner.gid)
    if (stat.isDirectory()) for (const name of Fs.readdirSync(p)) walk(Path.join(p, name))
  }
  walk(path)
}

/** The full hash of a check-in name (hash, prefix, branch, tag, date) as Fossil resolves it in `repository`. */
export const checkinOf = (step: PlannedStep, name: string, repository: string) =>
  Effect.flatMap(Checkouts, (checkouts) => checkouts.resolveCheckin(repository, name)).pipe(
    Effect.catchTags({
      AmbiguousName: () => fail(step, `${JSON.stringify(name)} names more than one check-in: give more digits`),
      NotFound: () => fail(step, `${JSON.stringify(name)} names no check-in`),
      FossilCommandFailed: checkoutFailed(step, `no check-in named ${JSON.stringify(name)}`)
    })
  )

const withUrlCredentials = (url: string, user: string, password: string): string => {
  const u = new URL(url)
  u.username = encodeURIComponent(user)
  u.password = encodeURIComponent(password)
  return u.toString()
}

/** Performs the run's steps in order; returns every value they set (2.6). */
export const performSteps = (checked: CheckedRun, context: StepContext) =>
  Effect.gen(function*() {
    const values: Mutable<Partial<Record<PlaceholderName, string>>> = { ...checked.start }
    const { config } = context
    const checkouts = yield* Checkouts
    for (const step of checked.plan.steps) {
      switch (step.step) {
        case "directory": {
          const at = yield* textOf(step, "at", values)
          const resolved = yield* judgePath(step, "at", at, config.root, config)
          yield* attempt(step, `cannot make ${at}`, () => {
            Fs.mkdirSync(resolved, { recursive: true, mode: 0o755 })
            if (context.owner !== undefined) Fs.chownSync(resolved, context.owner.uid, context.owner.gid)
          })
          values.workspace = resolved
          break
        }
        case "files": {
          const of = yield* textOf(step, "of", values)
          const into = yield* textOf(step, "into", values)
          const target = yield* judgePath(step, "into", into, values.workspace!, config)
          const checkin = yield* checkinOf(step, of, config.repository)
          yield* checkouts.exportFiles(config.repository, checkin, target).pipe(
            Effect.catchTags({
              FossilCommandFailed: checkoutFailed(step, `cannot export ${of}`),
              UnpackFailed: checkoutFailed(step, `cannot unpack ${of} into ${into}`)
            })
          )
          yield* attempt(step, `cannot unpack ${of} into ${into}`, () => chownTree(target, context.owner))
          values.tree = target
          values.checkin = checkin
          break
        }
        case "password": {
          if (context.role !== "served") {
            return yield* fail(step, "only the served repository's host can set a password; this node works from a clone")
          }
          const password = Crypto.randomBytes(18).toString("base64url")
          const user = checked.run.process.user
          yield* checkouts.setPassword(config.repository, user, password).pipe(
            Effect.catchTag("FossilCommandFailed", checkoutFailed(step, `cannot set ${user}'s password`))
          )
          values.password = password
          break
        }
        case "clone": {
          const into = yield* textOf(step, "into", values)
          const password = yield* textOf(step, "password", values)
          const target = yield* judgePath(step, "into", into, values.workspace!, config)
          if (config.serverUrl === undefined) return yield* fail(step, "this node has no server URL to clone from")
          const url = withUrlCredentials(config.serverUrl, checked.run.process.user, password)
          yield* attempt(step, `cannot make ${Path.dirname(into)}`, () => Fs.mkdirSync(Path.dirname(target), { recursive: true }))
          yield* checkouts.clone(url, target).pipe(
            Effect.catchTag("FossilCommandFailed", checkoutFailed(step, `cannot clone as ${checked.run.process.user}`))
          )
          yield* attempt(step, `cannot give ${into} to the process's account`, () => chownTree(target, context.owner))
          values.clone = target
          break
        }
        case "checkout": {
          const of = yield* textOf(step, "of", values)
          const into = yield* textOf(step, "into", values)
          const target = yield* judgePath(step, "into", into, values.workspace!, config)
          const checkin = yield* checkinOf(step, of, values.clone!)
          yield* attempt(step, `cannot make ${into}`, () => Fs.mkdirSync(target, { recursive: true }))
          yield* checkouts.open(values.clone!, checkin, target).pipe(
            Effect.catchTag("FossilCommandFailed", checkoutFailed(step, `cannot check out ${of}`))
          )
          yield* attempt(step, `cannot give ${into} to the process's account`, () => chownTree(target, context.owner))
          values.tree = target
          values.checkin = checkin
          break
        }
        case "collect": {
          const names = yield* listOf(step, "of", values)
          const into = yield* textOf(step, "into", values)
          const target = yield* judgePath(step, "into", into, values.workspace!, config)
          const repository = yield* Repository
          for (const name of names) {
            const file = yield* repository.readUnversioned(name).pipe(
              Effect.catchAll((e) => fail(step, `cannot collect ${name}: ${e.message}`))
            )
            if (context.fileSizeLimit !== undefined && file.content.length > context.fileSizeLimit) {
              return yield* fail(step, `${name} is ${file.content.length} bytes, over the file_size limit`)
            }
            const destination = Path.join(target, name)
            yield* judgePath(step, "into", destination, target, config)
            yield* attempt(step, `cannot write ${destination}`, () => {
              Fs.mkdirSync(Path.dirname(destination), { recursive: true })
              if (Fs.existsSync(destination) && Fs.lstatSync(destination).isSymbolicLink()) Fs.unlinkSync(destination)
              Fs.writeFileSync(destination, file.content, { flag: "w", mode: 0o644 })
              chownTree(target, context.owner)
            })
          }
          break
        }
      }
    }
    return values as Values
  })

export const fileSizeLimitOf = (checked: CheckedRun): number | undefined => {
  const text = checked.run.limits.file_size
  if (text === undefined) return undefined
  const parsed = parseSize(text)
  return parsed._tag === "Right" ? parsed.right : undefined
}
