import * as Fs from "node:fs"
import * as Path from "node:path"
import { decodeCapabilityR, type CapabilityR, type HostSettings, type Provides } from "../protocol/Refusals.js"
import { ownPaths, releasePaths } from "../release/ReleasePaths.js"
import { resolveLoose } from "../sandbox/MountPlan.js"
import type { HostCapabilities } from "../../services/SandboxLauncher.js"

/** One node: a repository file acted on as one node user, from one release root. */
export interface NodeConfig {
  readonly root: string
  /** the node's repository file: the served one (the hook) or a clone (`ocx2 node`) */
  readonly repository: string
  readonly nodeUser: string
  /** the server's URL, for the clone step (a process user's clone is made from it) */
  readonly serverUrl: string | undefined
  /** on a clone's host, the node user's passwords file */
  readonly passwordsFile: string | undefined
}

/** The repository file's base name without .fossil: $$repository_name$$. */
export const repositoryName = (repository: string): string => Path.basename(repository).replace(/\.fossil$/, "")

/** Everything refusal 7 keeps a run away from: ROOT's own parts, the repository file and its side files, the passwords file. */
export const nodeOwnPaths = (config: NodeConfig): ReadonlyArray<string> => [
  ...ownPaths(config.root),
  config.repository,
  `${config.repository}-journal`,
  `${config.repository}-wal`,
  `${config.repository}-shm`,
  ...(config.passwordsFile !== undefined ? [config.passwordsFile] : [])
]

/**
 * What the launcher keeps a sandbox's binds away from, judged again just before the launch on
 * the paths as they then stand: OCX's own files and ROOT itself, which holds OCX's programs and
 * every run's workspace (refusal 7, DECISIONS 14). The launcher lets through the run's own
 * workspace, and $$release$$ read-only.
 */
export const launchOwnPaths = (config: NodeConfig): ReadonlyArray<string> => [config.root, ...nodeOwnPaths(config)]

export interface CapabilityRFile {
  readonly value: CapabilityR | undefined
  /** why the file was not taken, when it is there but malformed */
  readonly problem: string | undefined
}

/** ROOT/settings/capability-R.json: absent allows R senders nothing; malformed is reported, never guessed at. */
export const readCapabilityR = (root: string): CapabilityRFile => {
  const file = Path.join(releasePaths(root).settings, "capability-R.json")
  let text: string
  try {
    text = Fs.readFileSync(file, "utf8")
  } catch {
    return { value: undefined, problem: undefined }
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    return { value: undefined, problem: `${file} is not JSON: ${(e as Error).message}` }
  }
  const decoded = decodeCapabilityR(json)
  return decoded._tag === "Right"
    ? { value: decoded.right, problem: undefined }
    : { value: undefined, problem: `${file}: ${decoded.left}` }
}

export const providesOf = (capabilities: HostCapabilities): Provides => ({
  sandbox: capabilities.sandbox,
  network: capabilities.sandbox,
  linux_capabilities: capabilities.sandbox,
  isolate_terminal: capabilities.sandbox,
  ends_with_parent: capabilities.sandbox,
  session: true,
  // a pseudo-terminal the watcher holds, which a person joins with attach (2.10)
  terminal: true,
  wall: capabilities.wall,
  cpu: capabilities.cpu,
  processes: capabilities.processes,
  file_size: capabilities.file_size,
  memory: capabilities.memory
})

/** What the refusals need to know of this host (2.14). */
export const hostSettings = (config: NodeConfig, capabilities: HostCapabilities): HostSettings => {
  const paths = releasePaths(config.root)
  return {
    root: config.root,
    nodeUser: config.nodeUser,
    repositoryName: repositoryName(config.repository),
    releaseDir: paths.current,
    capabilityR: readCapabilityR(config.root).value,
    unconfined: Fs.existsSync(Path.join(paths.settings, "unconfined")),
    provides: providesOf(capabilities),
    ownPaths: nodeOwnPaths(config),
    resolve: resolveLoose,
    exists: (path) => Fs.existsSync(path)
  }
}
