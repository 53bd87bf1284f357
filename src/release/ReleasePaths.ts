// The release root's layout (seed 001, "Stage, accept or roll back a release"; "Install or
// remove the hook"). Everything here is pure, so the node, the hook and refusal 7 (a run may
// not bind OCX's own paths) can share the one description of ROOT.

import * as Path from "node:path"
import type { ProgramRelease, ServedLink } from "../../services/ReleaseRoot.js"

// what a served link and a program's release are is the ReleaseRoot service's contract
export type { ProgramRelease, ServedLink }

/** A release is named by its check-in's first twelve hex digits. */
export const releaseNamePattern = /^[0-9a-f]{12}$/

export const isReleaseName = (name: string): boolean => releaseNamePattern.test(name)

/** The first twelve hex digits of a full check-in hash, lower-cased. */
export const releaseNameOf = (checkin: string): string => checkin.toLowerCase().slice(0, 12)

/** The three links that say what is served, each a relative link to staged/NAME. */
export const servedLinks: ReadonlyArray<ServedLink> = ["next", "current", "previous"]

/** The hook's program inside a release, and the link in ROOT that follows current. */
export const hookProgram = "ocx2-hook"
/** What ROOT/ocx2-hook links to: relative, so it follows every switch of current. */
export const hookTarget = `current/${hookProgram}`

export interface ReleasePaths {
  readonly root: string
  /** Where stage puts each release, and its logs. */
  readonly staged: string
  readonly next: string
  readonly current: string
  readonly previous: string
  /** The after-receive hook runs this link: ROOT/ocx2-hook -> current/ocx2-hook. */
  readonly hook: string
  /** The node's care directory (2.15). */
  readonly care: string
  readonly settings: string
  /** The node's own files: hook.log, unconfined. */
  readonly node: string
  /** What the host's sandbox can provide, as measured and kept a while (the node's and create's check). */
  readonly capabilities: string
  readonly gateLog: string
  readonly buildLog: string
  readonly smokeLog: string
  /** Held while stage, accept or rollback changes the root, so two never interleave. */
  readonly lock: string
  /** The served link's path. */
  readonly link: (link: ServedLink) => string
  /** ROOT/staged/NAME */
  readonly release: (name: string) => string
  /** Where stage assembles a release before it is smoked and put in place. */
  readonly partial: (name: string) => string
  /** The target written into a served link: relative, so the root can move. */
  readonly linkTarget: (name: string) => string
}

export const releasePaths = (root: string): ReleasePaths => {
  const at = (...parts: Array<string>) => Path.join(root, ...parts)
  const paths: ReleasePaths = {
    root,
    staged: at("staged"),
    next: at("next"),
    current: at("current"),
    previous: at("previous"),
    hook: at(hookProgram),
    care: at("care"),
    settings: at("settings"),
    node: at("node"),
    capabilities: at("node", "capabilities.json"),
    gateLog: at("staged", "gate.log"),
    buildLog: at("staged", "build.log"),
    smokeLog: at("staged", "smoke.log"),
    lock: at("staged", "release.lock"),
    link: (link) => at(link),
    release: (name) => at("staged", name),
    partial: (name) => at("staged", `${name}.partial`),
    linkTarget: (name) => `staged/${name}`
  }
  return paths
}

/** OCX's own paths in ROOT: what no run may bind or reach (refusal 7). */
export const ownPaths = (root: string): ReadonlyArray<string> => {
  const p = releasePaths(root)
  return [p.care, p.settings, p.current, p.previous, p.next, p.staged, p.hook, p.node]
}

/**
 * The root a program was released into, from the program's real path (links followed):
 * ROOT/staged/NAME/PROGRAM gives ROOT; any other path gives undefined.
 */
export const rootOfProgram = (realProgramPath: string): string | undefined => releaseOfProgram(realProgramPath)?.root

/**
 * Which release of which root a program is, from its real path (links followed):
 * ROOT/staged/NAME/PROGRAM gives all three; any other path gives undefined.
 */
export const releaseOfProgram = (realProgramPath: string): ProgramRelease | undefined => {
  const release = Path.dirname(realProgramPath)
  const staged = Path.dirname(release)
  if (!isReleaseName(Path.basename(release)) || Path.basename(staged) !== "staged") return undefined
  return { root: Path.dirname(staged), name: Path.basename(release), program: Path.basename(realProgramPath) }
}

/**
 * The release a served link's target names, read back as written (`staged/NAME`) or as an
 * absolute path into this root's staged directory; undefined for anything else.
 */
export const releaseOfLinkTarget = (root: string, target: string): string | undefined => {
  const absolute = Path.resolve(root, target)
  if (Path.dirname(absolute) !== Path.join(root, "staged")) return undefined
  const name = Path.basename(absolute)
  return isReleaseName(name) ? name : undefined
}
