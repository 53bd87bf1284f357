/**
 * An in-memory ReleaseRoot for unit tests: release roots as a table of directories (each staged
 * release and the programs it holds) and links (next, current, previous, ocx2-hook, written as the
 * live layer writes them), each root's lock a flag, and checkouts whose check-in, copy plan and
 * steps (gate, build, smoke) the test scripts. Paths are taken as given: nothing is resolved on disk.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Path from "node:path"
import { releaseOfLinkTarget, releaseOfProgram, releasePaths, servedLinks } from "../src/release/ReleasePaths.js"
import {
  type Checkin, CheckoutUnfit, type CopyPlan, NotACheckout, ReleaseRoot, ReleaseRootError, type ReleaseRootService,
  type ReleaseState, RootBusy, StepFailed
} from "../services/ReleaseRoot.js"

export interface TestRoot {
  /** ROOT/staged/NAME, each with the programs it holds */
  readonly staged?: Readonly<Record<string, ReadonlyArray<string>>>
  /** ROOT/LINK -> target, as written (staged/NAME; current/ocx2-hook) */
  readonly links?: Readonly<Partial<Record<"next" | "current" | "previous" | "ocx2-hook", string>>>
  /** another stage, accept or rollback holds the root's lock */
  readonly busy?: boolean
}

export interface TestCheckout {
  readonly checkin: Omit<Checkin, "top">
  /** what stage will copy; a string: the checkout is unfit for this reason */
  readonly plan?: CopyPlan | string
  /** a step that fails, with its reason */
  readonly fails?: Partial<Record<"gate" | "build" | "smoke", string>>
  /** the programs its build leaves in dist/ (default: ocx2, ocx2-cgi, ocx2-hook) */
  readonly programs?: ReadonlyArray<string>
}

export interface TestReleaseRootOptions {
  readonly roots?: Readonly<Record<string, TestRoot>>
  /** a program's path (outside a root, or through a link the table does not hold) -> the path it is a link to */
  readonly programLinks?: Readonly<Record<string, string>>
  readonly checkouts?: Readonly<Record<string, TestCheckout>>
}

/** The service, and the table it acts on, for a test to read back. */
export interface TestReleaseRoot extends ReleaseRootService {
  /** directory -> the programs it holds: each root's staged releases and assemblies */
  readonly directories: Map<string, Set<string>>
  /** ROOT/LINK -> target as written */
  readonly links: Map<string, string>
  /** the roots whose lock is held */
  readonly held: Set<string>
  /** every step run, as "gate CHECKOUT", "build CHECKOUT", "smoke DIR" */
  readonly steps: Array<string>
}

const defaultPrograms = ["ocx2", "ocx2-cgi", "ocx2-hook"]

/** The table the test release root acts on; made once by `make`. */
interface Table {
  readonly options: TestReleaseRootOptions
  readonly roots: Set<string>
  readonly directories: Map<string, Set<string>>
  readonly links: Map<string, string>
  readonly held: Set<string>
  readonly steps: Array<string>
  /** an assembled directory -> the checkout it was assembled from */
  readonly assembledFrom: Map<string, string>
}

/** A path with its links followed, as realpath would; undefined when nothing is there. */
const real = (t: Table, path: string): string | undefined => {
  let at = Path.resolve(path)
  for (let hops = 0; hops < 40; hops++) {
    const alias = t.options.programLinks?.[at]
    if (alias !== undefined) {
      at = Path.resolve(alias)
      continue
    }
    const link = [...t.links.keys()].find((l) => at === l || at.startsWith(`${l}/`))
    if (link === undefined) break
    at = Path.join(Path.dirname(link), t.links.get(link)!, at.slice(link.length))
  }
  const release = t.directories.get(Path.dirname(at))
  return t.directories.has(at) || release?.has(Path.basename(at)) === true ? at : undefined
}

const programRelease = (t: Table, programPath: string | undefined) => {
  const path = programPath === undefined ? undefined : real(t, programPath)
  return path === undefined ? undefined : releaseOfProgram(path)
}

const checkout = (t: Table, path: string) => t.options.checkouts?.[path]

/** What is served: the links read and switched, the root's lock. */
const rootOps = (t: Table) => ({
  resolveRoot: (root) => {
    const resolved = Path.resolve(root)
    return t.roots.has(resolved) ? Effect.succeed(resolved) : Effect.fail(new ReleaseRootError({ path: root, reason: "no such directory" }))
  },
  rootOfProgram: (programPath) => Effect.sync(() => programRelease(t, programPath)?.root),
  releaseOfProgram: (programPath) => Effect.sync(() => programRelease(t, programPath)),
  read: (root) =>
    Effect.suspend(() => {
      const paths = releasePaths(root)
      let state: ReleaseState = { root }
      for (const link of servedLinks) {
        const target = t.links.get(paths.link(link))
        if (target === undefined) continue
        const name = releaseOfLinkTarget(root, target)
        if (name === undefined) {
          return Effect.fail(new ReleaseRootError({ path: root, reason: `${paths.link(link)} links to ${target}, which is no release staged in ${paths.staged}` }))
        }
        state = { ...state, [link]: { name, present: t.directories.has(paths.release(name)) } }
      }
      const hookLink = t.links.get(paths.hook)
      return Effect.succeed(hookLink !== undefined ? { ...state, hookLink } : state)
    }),
  // the program "" asks whether the release's directory is there
  hasProgram: (root, name, program) =>
    Effect.sync(() => {
      const release = t.directories.get(releasePaths(root).release(name))
      return release !== undefined && (program === "" || release.has(program))
    }),
  switchLink: (root, link, target) =>
    Effect.suspend(() => {
      if (!t.roots.has(root)) return Effect.fail(new ReleaseRootError({ path: Path.join(root, link), reason: "ENOENT: no such file or directory" }))
      t.links.set(Path.join(root, link), target)
      return Effect.void
    }),
  lock: (root) =>
    Effect.acquireRelease(
      Effect.suspend(() => {
        if (t.held.has(root)) return Effect.fail(new RootBusy({ lock: releasePaths(root).lock }))
        t.held.add(root)
        return Effect.void
      }),
      () => Effect.sync(() => t.held.delete(root))
    )
}) satisfies Partial<ReleaseRootService>

/** A checkout staged: its check-in and plan, its steps as scripted, its release assembled, smoked and placed. */
const stagingOps = (t: Table) => ({
  checkinOf: (path) =>
    Effect.suspend(() => {
      const c = checkout(t, path)
      return c === undefined ? Effect.fail(new NotACheckout({ path })) : Effect.succeed({ ...c.checkin, top: path })
    }),
  planCopy: (path) =>
    Effect.suspend(() => {
      const plan = checkout(t, path)?.plan ?? { externals: [], packages: [] }
      return typeof plan === "string" ? Effect.fail(new CheckoutUnfit({ path, reason: plan })) : Effect.succeed(plan)
    }),
  runScript: (path, script, log, output) =>
    Effect.suspend(() => {
      t.steps.push(`${script} ${path}`)
      output?.(`${script} of ${path}\n`)
      const failed = checkout(t, path)?.fails?.[script]
      return failed === undefined ? Effect.void : Effect.fail(new StepFailed({ step: script, log, reason: failed }))
    }),
  assemble: (path, _plan, into, release) =>
    Effect.suspend(() => {
      const programs = [...(checkout(t, path)?.programs ?? defaultPrograms)].sort()
      if (!programs.includes("ocx2")) {
        return Effect.fail(new StepFailed({ step: "build", log: release.buildLog, reason: `it left no ${Path.join(path, "dist", "ocx2.mjs")}` }))
      }
      t.directories.set(into, new Set(programs))
      t.assembledFrom.set(into, path)
      return Effect.succeed(programs)
    }),
  smoke: (dir, log) =>
    Effect.suspend(() => {
      t.steps.push(`smoke ${dir}`)
      const from = t.assembledFrom.get(dir)
      const failed = from === undefined ? undefined : checkout(t, from)?.fails?.smoke
      if (failed !== undefined) return Effect.fail(new StepFailed({ step: "smoke", log, reason: failed }))
      if (t.directories.get(dir)?.has("ocx2") !== true) return Effect.fail(new StepFailed({ step: "smoke", log, reason: `${Path.join(dir, "ocx2")} is not there` }))
      return Effect.void
    }),
  place: (from, to) =>
    Effect.suspend(() => {
      const programs = t.directories.get(from)
      if (programs === undefined) return Effect.fail(new ReleaseRootError({ path: to, reason: `ENOENT: no such file or directory, rename '${from}' -> '${to}'` }))
      t.directories.delete(from)
      t.directories.set(to, programs)
      return Effect.void
    }),
  remove: (path) =>
    Effect.sync(() => {
      for (const dir of [...t.directories.keys()]) if (dir === path || dir.startsWith(`${path}/`)) t.directories.delete(dir)
    })
}) satisfies Partial<ReleaseRootService>

export const make = (options: TestReleaseRootOptions = {}): TestReleaseRoot => {
  const t: Table = {
    options,
    roots: new Set(),
    directories: new Map(),
    links: new Map(),
    held: new Set(),
    steps: [],
    assembledFrom: new Map()
  }
  for (const [root, r] of Object.entries(options.roots ?? {})) {
    t.roots.add(root)
    for (const [name, programs] of Object.entries(r.staged ?? {})) t.directories.set(releasePaths(root).release(name), new Set(programs))
    for (const [link, target] of Object.entries(r.links ?? {})) t.links.set(Path.join(root, link), target)
    if (r.busy === true) t.held.add(root)
  }
  const service: ReleaseRootService = { ...rootOps(t), ...stagingOps(t) }
  return { ...service, directories: t.directories, links: t.links, held: t.held, steps: t.steps }
}

/** The layer, and the root's table for reading back what the tool did. */
export const layer = (options: TestReleaseRootOptions = {}) => {
  const releaseRoot = make(options)
  return { releaseRoot, layer: Layer.succeed(ReleaseRoot, releaseRoot) }
}
