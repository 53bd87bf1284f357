/**
 * Checkouts for unit tests, with no Fossil: each repository file is a table of check-ins the test
 * writes (a hash, the names that resolve to it, its files), and the server a clone is made from
 * one of those tables. Exporting or opening a check-in writes its files into the directory as
 * Fossil would, so the steps around it (paths, owners, what follows) run on a real disk; a clone
 * is an empty file standing for the repository. Every call is recorded, in order, and a test may
 * make any operation fail as a fossil command that failed.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Checkouts, FossilCommandFailed, type CheckoutsService } from "../services/Checkouts.js"
import { AmbiguousName, NotFound } from "../services/Repository.js"

export interface TestCheckin {
  /** the full hash */
  readonly hash: string
  /** branch and tag names that resolve to it */
  readonly names?: ReadonlyArray<string>
  /** path within the tree -> content */
  readonly files: Readonly<Record<string, string>>
}

export interface TestCheckoutsOptions {
  /** each repository file's check-ins, by its path */
  readonly repositories?: Readonly<Record<string, ReadonlyArray<TestCheckin>>>
  /** the server's URL without credentials (as `new URL(...).origin + pathname`) -> the repository file it serves */
  readonly servers?: Readonly<Record<string, string>>
  /** an operation that fails, with Fossil's words */
  readonly fails?: Partial<Record<keyof CheckoutsService, string>>
}

export type CheckoutsCall =
  | { readonly op: "resolveCheckin"; readonly repository: string; readonly name: string }
  | { readonly op: "exportFiles"; readonly repository: string; readonly checkin: string; readonly into: string }
  | { readonly op: "setPassword"; readonly repository: string; readonly user: string; readonly password: string }
  | { readonly op: "clone"; readonly url: string; readonly into: string }
  | { readonly op: "open"; readonly repository: string; readonly checkin: string; readonly into: string }

export interface TestCheckouts extends CheckoutsService {
  readonly calls: ReadonlyArray<CheckoutsCall>
  /** each password set: "REPOSITORY USER" -> password */
  readonly passwords: ReadonlyMap<string, string>
}

const writeTree = (files: Readonly<Record<string, string>>, into: string) => {
  Fs.mkdirSync(into, { recursive: true })
  for (const [name, content] of Object.entries(files)) {
    Fs.mkdirSync(Path.dirname(Path.join(into, name)), { recursive: true })
    Fs.writeFileSync(Path.join(into, name), content)
  }
}

export const make = (options: TestCheckoutsOptions = {}): TestCheckouts => {
  const repositories = new Map(Object.entries(options.repositories ?? {}))
  const calls: Array<CheckoutsCall> = []
  const passwords = new Map<string, string>()
  const failing = (op: keyof CheckoutsService) =>
    options.fails?.[op] === undefined ? Effect.void : Effect.fail(new FossilCommandFailed({ reason: options.fails[op] }))
  const checkinsOf = (repository: string) => {
    const checkins = repositories.get(repository)
    return checkins === undefined
      ? Effect.fail(new FossilCommandFailed({ reason: `repository does not exist or is in an unreadable directory: ${repository}` }))
      : Effect.succeed(checkins)
  }
  const checkinOf = (repository: string, hash: string) =>
    Effect.flatMap(checkinsOf(repository), (checkins) => {
      const found = checkins.find((c) => c.hash === hash)
      return found === undefined ? Effect.fail(new FossilCommandFailed({ reason: `no such check-in: ${hash}` })) : Effect.succeed(found)
    })
  return {
    calls,
    passwords,
    resolveCheckin: (repository, name) =>
      Effect.sync(() => calls.push({ op: "resolveCheckin", repository, name })).pipe(
        Effect.zipRight(failing("resolveCheckin")),
        Effect.zipRight(checkinsOf(repository)),
        Effect.flatMap((checkins): Effect.Effect<string, NotFound | AmbiguousName> => {
          const named = checkins.filter((c) => c.hash === name || (c.names ?? []).includes(name))
          const prefixed = named.length > 0 || !/^[0-9a-f]{4,}$/.test(name) ? named : checkins.filter((c) => c.hash.startsWith(name))
          if (prefixed.length > 1) return Effect.fail(new AmbiguousName({ what: "check-in", name }))
          return prefixed[0] === undefined ? Effect.fail(new NotFound({ what: "check-in", name })) : Effect.succeed(prefixed[0].hash)
        })
      ),
    exportFiles: (repository, checkin, into) =>
      Effect.sync(() => calls.push({ op: "exportFiles", repository, checkin, into })).pipe(
        Effect.zipRight(failing("exportFiles")),
        Effect.zipRight(checkinOf(repository, checkin)),
        Effect.flatMap((found) => Effect.sync(() => writeTree(found.files, into)))
      ),
    setPassword: (repository, user, password) =>
      Effect.sync(() => calls.push({ op: "setPassword", repository, user, password })).pipe(
        Effect.zipRight(failing("setPassword")),
        Effect.zipRight(Effect.sync(() => void passwords.set(`${repository} ${user}`, password)))
      ),
    clone: (url, into) =>
      Effect.sync(() => calls.push({ op: "clone", url, into })).pipe(
        Effect.zipRight(failing("clone")),
        Effect.zipRight(Effect.suspend(() => {
          const u = new URL(url)
          const served = options.servers?.[`${u.origin}${u.pathname}`]
          const checkins = served === undefined ? undefined : repositories.get(served)
          if (checkins === undefined) return Effect.fail(new FossilCommandFailed({ reason: `no repository at ${u.origin}${u.pathname}` }))
          return Effect.sync(() => {
            Fs.writeFileSync(into, "")
            repositories.set(into, checkins)
          })
        }))
      ),
    open: (repository, checkin, into) =>
      Effect.sync(() => calls.push({ op: "open", repository, checkin, into })).pipe(
        Effect.zipRight(failing("open")),
        Effect.zipRight(checkinOf(repository, checkin)),
        Effect.flatMap((found) => Effect.sync(() => writeTree(found.files, into)))
      )
  }
}

export const layer = (options: TestCheckoutsOptions = {}) => Layer.sync(Checkouts, () => make(options))
