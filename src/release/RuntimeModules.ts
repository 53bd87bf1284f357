// Which installed packages a staged release needs beside its bundles. The bundles leave some
// packages external (a native addon cannot be bundled), so the release carries each external
// package and what it loads at run time, and nothing a package needs only to install itself.

import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Path from "node:path"
import type { RuntimePackage } from "../../services/ReleaseRoot.js"

// a package a release carries is the ReleaseRoot service's contract
export type { RuntimePackage }

/** The packages the checkout's build leaves out of its bundles: each `--external:NAME`. */
export const externalsOfBuild = (buildScript: string): ReadonlyArray<string> => {
  const names = [...buildScript.matchAll(/--external:["']?([^\s"']+)/g)].map((m) => m[1]!)
  return [...new Set(names)]
}

/** What a package.json says that matters here. */
export interface PackageManifest {
  readonly dependencies?: Readonly<Record<string, string>>
  readonly optionalDependencies?: Readonly<Record<string, string>>
  readonly scripts?: Readonly<Record<string, string>>
}

/**
 * The dependencies a package loads at run time: its dependencies, less those its install
 * scripts run (better-sqlite3 depends on prebuild-install only to fetch its addon).
 */
export const runtimeDependencies = (manifest: PackageManifest): ReadonlyArray<{ name: string; optional: boolean }> => {
  const installWords = new Set(
    ["preinstall", "install", "postinstall"]
      .map((script) => manifest.scripts?.[script] ?? "")
      .flatMap((text) => text.split(/[^A-Za-z0-9@/._-]+/))
  )
  const required = Object.keys(manifest.dependencies ?? {}).map((name) => ({ name, optional: false }))
  const optional = Object.keys(manifest.optionalDependencies ?? {}).map((name) => ({ name, optional: true }))
  return [...required, ...optional].filter((dep) => !installWords.has(dep.name))
}

/** How the closure reads the installed tree; the live layer reads the checkout's node_modules. */
export interface PackageLookup {
  /** Node's resolution: the directory (relative to the checkout) of `name` as seen from `fromRelativeDir`. */
  readonly resolve: (fromRelativeDir: string, name: string) => string | undefined
  readonly manifest: (relativeDir: string) => PackageManifest
  readonly isNative: (relativeDir: string) => boolean
}

/** A package the release needs at run time that the checkout's node_modules does not hold. */
export class MissingPackage extends Schema.TaggedError<MissingPackage>()("MissingPackage", {
  name: Schema.String,
  /** the package that loads it, or "the build (--external)" */
  neededBy: Schema.String
}) {
  override get message() {
    return `the checkout's node_modules has no ${this.name}, which ${this.neededBy} needs at run time`
  }
}

/** Every package the externals load at run time, each once, in the order found. */
export const runtimeClosure = (
  externals: ReadonlyArray<string>,
  lookup: PackageLookup
): Either.Either<ReadonlyArray<RuntimePackage>, MissingPackage> => {
  const found = new Map<string, RuntimePackage>()
  const queue: Array<{ name: string; from: string; neededBy: string; optional: boolean }> = externals.map((name) => ({
    name,
    from: ".",
    neededBy: "the build (--external)",
    optional: false
  }))
  while (queue.length > 0) {
    const next = queue.shift()!
    const dir = lookup.resolve(next.from, next.name)
    if (dir === undefined) {
      if (next.optional) continue
      return Either.left(new MissingPackage({ name: next.name, neededBy: next.neededBy }))
    }
    if (found.has(dir)) continue
    found.set(dir, { name: next.name, relativeDir: dir, native: lookup.isNative(dir) })
    for (const dep of runtimeDependencies(lookup.manifest(dir))) {
      queue.push({ name: dep.name, from: dir, neededBy: next.name, optional: dep.optional })
    }
  }
  return Either.right([...found.values()])
}

/** The directories Node searches for `name` from `fromRelativeDir`, nearest first. */
export const resolutionCandidates = (fromRelativeDir: string, name: string): ReadonlyArray<string> => {
  const candidates: Array<string> = []
  let dir = Path.normalize(fromRelativeDir)
  for (;;) {
    if (Path.basename(dir) !== "node_modules") candidates.push(Path.join(dir, "node_modules", name))
    if (dir === "." || dir === "") break
    dir = Path.dirname(dir)
  }
  return candidates
}

/**
 * Whether a path inside a package (relative to the package's directory) belongs in the
 * release: never its own node_modules (each runtime dependency is copied on its own); of a
 * native package, not its sources (src, deps) and of build/ only the compiled addons.
 */
export const keepInRelease = (pkg: RuntimePackage, inside: string, isDirectory: boolean): boolean => {
  const parts = inside.split(Path.sep).filter((p) => p.length > 0)
  if (parts.length === 0) return true
  if (parts[0] === "node_modules") return false
  if (!pkg.native) return true
  if (parts[0] === "src" || parts[0] === "deps") return false
  if (parts[0] === "build") return isDirectory ? parts.length <= 2 : parts.length === 3 && parts[2]!.endsWith(".node")
  return true
}
