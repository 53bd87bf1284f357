import type BetterSqlite3 from "better-sqlite3"
import * as Fs from "node:fs"
import * as Path from "node:path"

// The git export's own files, beside the served repository as its write lock is
// (.REPO.ocx2-write.lock): the export's lock, so one export runs at a time, and its state (the
// last export and the last failure), which the hook's cursor and export's dry run read. Plain
// Node and SQLite only: the hook, which runs on every receipt, reads them.

export const exportLockOf = (repository: string): string =>
  Path.join(Path.dirname(repository), `.${Path.basename(repository)}.ocx2-export.lock`)

export const exportStateFileOf = (repository: string): string =>
  Path.join(Path.dirname(repository), `.${Path.basename(repository)}.ocx2-export.json`)

export interface ExportState {
  /** the last export that ran to the end: when, into which mirror, and the newest check-in's receipt it covered */
  readonly exported?: { readonly at: string; readonly mirror: string; readonly rcvid: number; readonly said: string }
  /** the last export that failed: when, and what Fossil said */
  readonly failed?: { readonly at: string; readonly mirror: string; readonly said: string }
}

export const readExportState = (repository: string): ExportState => {
  try {
    const parsed = JSON.parse(Fs.readFileSync(exportStateFileOf(repository), "utf8")) as ExportState
    return typeof parsed === "object" && parsed !== null ? parsed : {}
  } catch {
    return {}
  }
}

/** Written beside its place and renamed over it: a reader sees the old state or the new, whole. */
export const writeExportState = (repository: string, state: ExportState): void => {
  const file = exportStateFileOf(repository)
  const temporary = `${file}.${process.pid}`
  Fs.writeFileSync(temporary, `${JSON.stringify(state)}\n`)
  Fs.renameSync(temporary, file)
}

/** Where `fossil git export` last wrote (its last-git-export-repo), or undefined when it never did. */
export const exportMirrorOf = (db: BetterSqlite3.Database): string | undefined => {
  const row = db.prepare<[], { value: unknown }>("SELECT value FROM config WHERE name = 'last-git-export-repo'").get()
  const value = row === undefined || row.value === null ? "" : String(row.value)
  return value === "" ? undefined : value
}

/**
 * The receipt (rcvid) of the newest check-in received after `rcvid`, or undefined when none was:
 * posts, ticket changes and tags alone give the export nothing to do.
 */
export const checkinAfter = (db: BetterSqlite3.Database, rcvid: number): number | undefined => {
  const row = db.prepare<[number], { newest: number | null }>(
    "SELECT max(b.rcvid) AS newest FROM blob b JOIN event e ON e.objid = b.rid WHERE e.type = 'ci' AND b.rcvid > ?"
  ).get(rcvid)
  return row === undefined || row.newest === null ? undefined : row.newest
}
