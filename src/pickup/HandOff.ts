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

/**
 * How a watcher's Node is started, by the hand-off and the spare alike (a session's watcher lives as
 * long as its session: a node holding hundreds holds hundreds of these). Measured by bench/sessions
 * (issue 42), a live watcher held 27 MB of its own:
 * - half of it malloc's heap holding what its start had freed in its middle (glibc raises its
 *   threshold for mapping a block apart as large blocks are freed): large blocks are mapped apart
 *   and given back (a fixed threshold), with two arenas at most;
 * - V8's heap: a 1 MB young generation, no optimizing compiler (a watcher waits on its process and
 *   files, as the supervisor does), one thread for V8's work, a heap sized for memory over speed;
 *   what the start leaves is collected once the process runs, and after bursts of deliveries,
 *   with the bytecode of what has not run since (src/watcher/Collect.ts).
 * --jitless and --lite-mode would save a little more, but they turn WebAssembly off, and fetch's
 * HTTP parser (a clone's watcher talks to its server through it) is WebAssembly. V8 rejects a code
 * cache written under other flags: the watcher's is written by the first watcher started with these
 * that exits (a run of the program by hand with others rewrites it; the next watcher writes it back).
 */
export const watcherNodeFlags: ReadonlyArray<string> = [
  "--max-semi-space-size=1", "--no-opt", "--single-threaded", "--v8-pool-size=1", "--optimize-for-size"
]
export const watcherEnvironment: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: "2",
  MALLOC_MMAP_THRESHOLD_: "65536",
  MALLOC_TRIM_THRESHOLD_: "65536"
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
    const child = ChildProcess.spawn(process.execPath, [...watcherNodeFlags, options.watcherProgram, ...watcherArgs(config, run, options)], {
      detached: true,
      stdio: ["ignore", out, out],
      env: { ...process.env, ...watcherEnvironment, ...options.env }
    })
    child.unref()
    return child.pid ?? -1
  } finally {
    Fs.closeSync(out)
  }
}
