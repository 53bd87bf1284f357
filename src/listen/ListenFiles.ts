// The fleet's listener as others see it (docs/architecture.md, "The listener"): plain Node only, since
// the receipt page reads it on every question a clone's node asks (one small file, no process).
//
//   ROOT/settings/listen   JSON, optional: {"host": "127.0.0.1", "port": 8092, "url": "https://..."}:
//                          where it listens, and the address clones are given when a proxy or a
//                          name other than the page's own stands before it
//   ROOT/node/listen.json  the one running: its pid and the kernel's start time of it, where it
//                          listens, the address it was told to give, and the repositories it serves
//                          (each by the id of its real path)
//   ROOT/node/listen.log   one JSON line per thing it did (started, stopped, a repository it could not read)

import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { releaseOfProgram, releasePaths } from "../release/ReleasePaths.js"
import { canonicalRepository } from "../root/HookFiles.js"
import { stillRuns } from "../root/SupervisorFiles.js"

export interface ListenSettings {
  readonly host: string
  readonly port: number
  /** the address clones are given, without a trailing slash; by default the page's own host name and the port */
  readonly url: string | undefined
}

/** The port a listener takes when its settings name none: fixed, so a restarted one is found where it was. */
export const defaultListenPort = 8092

export const listenSettingsFile = (root: string): string => Path.join(releasePaths(root).settings, "listen")
export const listenStateFile = (root: string): string => Path.join(releasePaths(root).node, "listen.json")
export const listenLogFile = (root: string): string => Path.join(releasePaths(root).node, "listen.log")

/** ROOT/settings/listen as given, each value that is not sane passed over for its default. */
export const listenSettings = (root: string): ListenSettings => {
  let given: { host?: unknown; port?: unknown; url?: unknown } = {}
  try {
    given = JSON.parse(Fs.readFileSync(listenSettingsFile(root), "utf8"))
  } catch {
    // absent or unreadable: the defaults
  }
  return {
    // loopback unless told: the listener is reached from other hosts only where the operator exposed it
    host: typeof given.host === "string" && given.host !== "" ? given.host : "127.0.0.1",
    port: typeof given.port === "number" && Number.isInteger(given.port) && given.port >= 0 && given.port < 65536 ? given.port : defaultListenPort,
    url: typeof given.url === "string" && /^https?:\/\//.test(given.url) ? given.url.replace(/\/+$/, "") : undefined
  }
}

/** A served repository's id in the listener's addresses: the first 12 hex digits of the SHA-1 of its real path. */
export const repositoryId = (repository: string): string =>
  Crypto.createHash("sha1").update(canonicalRepository(repository)).digest("hex").slice(0, 12)

export interface ListenState {
  readonly pid: number
  /** the pid's start time as the kernel counts it, so a pid used again is not taken for it */
  readonly started: string
  readonly host: string
  readonly port: number
  readonly url?: string
  /** id -> the repository's real path */
  readonly repositories: Readonly<Record<string, string>>
}

/** The listener that runs for this root, read from its state file and checked against the kernel. */
export const runningListener = (root: string): ListenState | undefined => {
  try {
    const state = JSON.parse(Fs.readFileSync(listenStateFile(root), "utf8")) as ListenState
    if (!Number.isSafeInteger(state.pid) || typeof state.started !== "string" || !Number.isInteger(state.port)) return undefined
    return stillRuns(state.pid, state.started) ? state : undefined
  } catch {
    return undefined
  }
}

/**
 * Where a clone's node asks its held question of the listener, as the receipt page tells it: the
 * listener of the release root serving the page (its program's real path), if one runs and serves
 * this repository; the address its settings name, else the page's own host name (`origin`, the
 * server as the client reached it) and the listener's port. Undefined: ask the page, as before.
 */
export const listenerAddressFor = (programPath: string | undefined, repository: string, origin: string | undefined): string | undefined => {
  if (programPath === undefined) return undefined
  let root: string | undefined
  try {
    root = releaseOfProgram(Fs.realpathSync(programPath))?.root
  } catch {
    return undefined
  }
  if (root === undefined) return undefined
  const running = runningListener(root)
  if (running === undefined) return undefined
  const id = repositoryId(repository)
  if (running.repositories?.[id] === undefined) return undefined
  if (running.url !== undefined) return `${running.url}/${id}/receipt`
  if (origin === undefined) return undefined
  try {
    const page = new URL(origin)
    // the listener speaks plain HTTP: a page reached over TLS names it only through its settings' url (a TLS proxy)
    if (page.protocol !== "http:") return undefined
    return `http://${page.hostname}:${running.port}/${id}/receipt`
  } catch {
    return undefined
  }
}
