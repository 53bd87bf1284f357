import * as Fs from "node:fs"
import type { NodeConfig } from "../root/NodeConfig.js"
import type { SupervisorFiles } from "../root/SupervisorFiles.js"

/** One JSON line of what the supervisor did, to its log and to stdout (the service's journal). */
export const logTo = (files: SupervisorFiles, config: NodeConfig) => (entry: Record<string, unknown>): void => {
  const line = JSON.stringify({ at: new Date().toISOString(), pid: process.pid, node: config.nodeUser, ...entry })
  try {
    Fs.appendFileSync(files.log, `${line}\n`, { mode: 0o600 })
  } catch {
    // the log gone: the journal still says it
  }
  process.stdout.write(`${line}\n`)
}

/** The first line of an error's message: what a log line says of a failure. */
export const firstLine = (e: unknown): string => String((e as { message?: unknown })?.message ?? e).split("\n")[0]!
