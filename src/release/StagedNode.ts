// The Node a release was staged with. A staged program names that Node in its first line (the
// absolute path of the Node that staged it: Fossil and services run programs with no PATH of
// ours), and its native addons (better-sqlite3, node-pty) were built for that Node's ABI. A host
// whose Node was upgraded in place (apt upgrading /usr/bin/node from 22 to 24) then runs the
// release with another ABI, and the first addon it loads fails with a message about
// NODE_MODULE_VERSION that names nothing a person can act on. release.json records the Node, so
// the hook, the supervisor and status say plainly what happened and what mends it: restage.

import * as Fs from "node:fs"
import * as Path from "node:path"

export interface NodeOfRelease {
  /** process.version of the Node that staged it, v22.1.0 */
  readonly version: string
  /** its ABI for native addons (process.versions.modules) */
  readonly modules: string
  /** the Node program, every link followed: what the programs' first line names */
  readonly execPath: string
}

/** The Node running this process, as release.json records it. */
export const thisNode = (): NodeOfRelease => {
  let execPath = process.execPath
  try {
    execPath = Fs.realpathSync(execPath)
  } catch {
    // the program as it was started
  }
  return { version: process.version, modules: process.versions.modules, execPath }
}

/**
 * A bundle's text with its first line naming `node` by path in place of the Node found on PATH
 * (`#!/usr/bin/env node`, or `#!/usr/bin/env -S [NAME=VALUE ...] node OPTIONS` where it takes options
 * and an environment of its own):
 * Fossil runs an extension's program with no PATH at all, and a service's PATH may find an older
 * Node (Debian 12's 18 in /usr/bin) than the one that staged the release.
 */
export const namingNode = (text: string, node: string): string => {
  const named = text.replace(/^#!\/usr\/bin\/env node\n/, `#!${node}\n`)
    .replace(/^#!\/usr\/bin\/env -S ((?:[A-Za-z_][A-Za-z0-9_]*=\S* )*)node /, (_line, environment: string) => `#!/usr/bin/env -S ${environment}${node} `)
  // the kernel reads 255 bytes of a #! line and refuses (or cuts) a longer one: a program that would
  // not start is refused here, at staging, where the fix is known
  const first = named.startsWith("#!") ? Buffer.byteLength(named.slice(0, named.indexOf("\n"))) : 0
  if (first > maxFirstLine) {
    throw new Error(`a staged program's first line would be ${first} bytes with Node at ${node}, past the ${maxFirstLine} the kernel reads: stage with a Node at a shorter path`)
  }
  return named
}

/** what Linux reads of a #! line (BINPRM_BUF_SIZE 256, less its end) */
export const maxFirstLine = 255

const major = (version: string) => version.replace(/^v/, "").split(".")[0]

/** The Node release.json of a release directory names, or undefined (no file, or a release staged before it was recorded). */
export const nodeOfRelease = (releaseDir: string): NodeOfRelease | undefined => {
  try {
    const node = (JSON.parse(Fs.readFileSync(Path.join(releaseDir, "release.json"), "utf8")) as { node?: unknown }).node
    if (typeof node !== "object" || node === null) return undefined
    const { version, modules, execPath } = node as Record<string, unknown>
    return typeof version === "string" && typeof modules === "string" && typeof execPath === "string" ? { version, modules, execPath } : undefined
  } catch {
    return undefined
  }
}

const restage = 'restage the release with this host\'s Node (docs/operations.md, "After a Node upgrade")'

/**
 * Why the release in `releaseDir` cannot run on `running` (this process's Node by default), in
 * words a person can act on; undefined when it can (or the release records no Node).
 */
export const nodeMismatch = (releaseDir: string, running: NodeOfRelease = thisNode()): string | undefined => {
  const staged = nodeOfRelease(releaseDir)
  if (staged === undefined || staged.modules === running.modules) return undefined
  const versions = major(staged.version) === major(running.version)
    ? `Node ${staged.version}, this host has ${running.version}`
    : `Node ${major(staged.version)} (${staged.version}), this host has ${major(running.version)} (${running.version})`
  return `the release ${Path.basename(releaseDir)} was staged with ${versions} at ${running.execPath}, ` +
    `whose native modules differ (ABI ${staged.modules}, not ${running.modules}): ${restage}`
}

/**
 * Why the release's programs cannot start at all, for a caller running another Node (status from a
 * checkout): the Node their first line names is gone, or is now another version.
 */
export const stagedNodeProblem = (releaseDir: string): string | undefined => {
  const staged = nodeOfRelease(releaseDir)
  if (staged === undefined) return undefined
  if (!Fs.existsSync(staged.execPath)) {
    return `the release ${Path.basename(releaseDir)} was staged with Node ${staged.version} at ${staged.execPath}, which is gone: its programs cannot start; ${restage}`
  }
  return undefined
}

/** The release directory of a program of a staged release (its real path's directory), or undefined. */
export const releaseDirOfProgram = (program: string | undefined): string | undefined => {
  if (program === undefined) return undefined
  try {
    const dir = Path.dirname(Fs.realpathSync(program))
    return Fs.existsSync(Path.join(dir, "release.json")) ? dir : undefined
  } catch {
    return undefined
  }
}
