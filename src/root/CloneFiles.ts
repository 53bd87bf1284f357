// The clone node's own files under ROOT/node (a clone's host), plain node only:
//
//   ROOT/node/clones.json   {"clones": {"/abs/CLONE.fossil": {"user", "serverUrl", "passwordsFile", "bootId"}}}
//
// `ocx2 node` writes its entry on every call; a watcher started for a run of that clone reads
// it to know it works on a clone (writes pushed as the node user, senders asked of the server)
// and where the passwords file is. The boot id says whether the host restarted since the last
// call: a call after a restart is the node starting (--check), whether or not it was asked.
// The node's cursor is HookFiles' cursor-ID-USER.json, over the clone's own receipts.

import * as Fs from "node:fs"
import * as Path from "node:path"
import { openDatabase } from "../fossil/Sqlite.js"
import { releasePaths } from "../release/ReleasePaths.js"
import { canonicalRepository } from "./HookFiles.js"

export interface CloneEntry {
  readonly user: string
  readonly serverUrl: string
  readonly passwordsFile: string
  /** /proc/sys/kernel/random/boot_id at the last call that checked every open run */
  readonly bootId?: string
}

interface ClonesFile {
  readonly clones: Readonly<Record<string, CloneEntry>>
}

export const clonesFileOf = (root: string): string => Path.join(releasePaths(root).node, "clones.json")

export const readClones = (root: string): ClonesFile => {
  try {
    const parsed = JSON.parse(Fs.readFileSync(clonesFileOf(root), "utf8")) as ClonesFile
    if (typeof parsed === "object" && parsed !== null && typeof parsed.clones === "object" && parsed.clones !== null) return parsed
  } catch {
    // absent or unreadable: no clone node on this root
  }
  return { clones: {} }
}

const isEntry = (entry: unknown): entry is CloneEntry => {
  const e = entry as Partial<CloneEntry> | undefined
  return typeof e?.user === "string" && typeof e.serverUrl === "string" && typeof e.passwordsFile === "string"
}

export const cloneEntryOf = (root: string, clone: string): CloneEntry | undefined => {
  const entry = readClones(root).clones[canonicalRepository(clone)]
  return isEntry(entry) ? entry : undefined
}

export const writeCloneEntry = (root: string, clone: string, entry: CloneEntry): void => {
  const file = clonesFileOf(root)
  const clones = { ...readClones(root).clones, [canonicalRepository(clone)]: entry }
  Fs.mkdirSync(Path.dirname(file), { recursive: true, mode: 0o700 })
  const temporary = `${file}.${process.pid}.tmp`
  Fs.writeFileSync(temporary, `${JSON.stringify({ clones }, null, 2)}\n`, { mode: 0o600 })
  Fs.renameSync(temporary, file)
}

export const bootId = (): string | undefined => {
  try {
    return Fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()
  } catch {
    return undefined
  }
}

/** What a clone file remembers of its server: the URL (without credentials) and the user it syncs as. */
export interface CloneRemote {
  readonly url: string
  readonly user: string
  readonly serverCode: string
}

export type CloneReading =
  | { readonly _tag: "Clone"; readonly remote: CloneRemote }
  | { readonly _tag: "Refused"; readonly why: string }

/** Reads a clone's last-sync-url and server-code; a file that remembers no user is no clone a node can work from. */
export const readCloneRemote = (clone: string): CloneReading => {
  let rows: ReadonlyArray<{ name: string; value: unknown }>
  try {
    const db = openDatabase(clone, { readonly: true, fileMustExist: true })
    try {
      rows = db.prepare<[], { name: string; value: unknown }>(
        "SELECT name, value FROM config WHERE name IN ('last-sync-url', 'server-code')"
      ).all()
    } finally {
      db.close()
    }
  } catch (e) {
    return { _tag: "Refused", why: `the clone ${clone} cannot be read as a Fossil repository: ${(e as Error).message}` }
  }
  const settings = new Map(rows.map((r) => [r.name, String(r.value ?? "")]))
  const remembered = settings.get("last-sync-url") ?? ""
  const serverCode = settings.get("server-code") ?? ""
  let url: URL
  try {
    url = new URL(remembered)
  } catch {
    return {
      _tag: "Refused",
      why: `${clone} remembers no server (no last-sync-url): make it with fossil clone --save-http-password https://USER@SERVER/REPO ${Path.basename(clone)}`
    }
  }
  const user = decodeURIComponent(url.username)
  if (user === "") {
    return { _tag: "Refused", why: `${clone} remembers ${remembered} with no user: clone it as the node user with --save-http-password` }
  }
  url.username = ""
  url.password = ""
  if (!/^[0-9a-f]{40}$/.test(serverCode)) return { _tag: "Refused", why: `${clone} has no server-code` }
  return { _tag: "Clone", remote: { url: url.toString(), user, serverCode } }
}
