// Handing a run to its watcher: a detached process of its own, so the hook returns at once and
// the run outlives whoever started it. Its output goes to ROOT/care/RUN.log, never to a pipe
// that may already be closed (Fossil closes the hook's).

import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { releasePaths } from "../release/ReleasePaths.js"
import type { NodeConfig } from "../root/NodeConfig.js"

/** The watcher program beside the running one: ocx2-watcher in a release, dist/ocx2-watcher.mjs in a checkout. */
export const watcherProgramBeside = (program: string): string => {
  const real = Fs.realpathSync(program)
  return Path.join(Path.dirname(real), real.endsWith(".mjs") ? "ocx2-watcher.mjs" : "ocx2-watcher")
}

/** The watcher beside the running program (its real path: argv[1], as the bundles are run). */
export const defaultWatcherProgram = (): string => watcherProgramBeside(process.argv[1] ?? "")

/** The served release's watcher (ROOT/current/ocx2-watcher), else the one beside this program. */
export const watcherOf = (root: string): string => {
  const served = Path.join(releasePaths(root).current, "ocx2-watcher")
  return Fs.existsSync(served) ? served : defaultWatcherProgram()
}

export interface HandOffOptions {
  readonly watcherProgram: string
  readonly personStart?: boolean
  /** extra environment (tests set OCX2_CRASH_AT) */
  readonly env?: Readonly<Record<string, string>>
}

/** The watcher's arguments that name the node (every one but --run and --person-start). */
export const nodeArgs = (config: NodeConfig): ReadonlyArray<string> => [
  "--root", config.root,
  "--repository", config.repository,
  "--node", config.nodeUser,
  ...(config.serverUrl !== undefined ? ["--server-url", config.serverUrl] : [])
]

export const watcherArgs = (config: NodeConfig, run: string, options: { readonly personStart?: boolean }): ReadonlyArray<string> => [
  ...nodeArgs(config),
  "--run", run,
  ...(options.personStart === true ? ["--person-start"] : [])
]

/** Starts the run's watcher detached and returns its pid. */
export const handOff = (config: NodeConfig, run: string, options: HandOffOptions): number => {
  const care = releasePaths(config.root).care
  Fs.mkdirSync(care, { recursive: true, mode: 0o700 })
  const out = Fs.openSync(Path.join(care, `${run}.log`), "a", 0o600)
  try {
    const child = ChildProcess.spawn(process.execPath, [options.watcherProgram, ...watcherArgs(config, run, options)], {
      detached: true,
      stdio: ["ignore", out, out],
      env: { ...process.env, ...options.env }
    })
    child.unref()
    return child.pid ?? -1
  } finally {
    Fs.closeSync(out)
  }
}
