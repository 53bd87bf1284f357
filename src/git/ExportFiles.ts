import type BetterSqlite3 from "better-sqlite3"
import * as Fs from "node:fs"
import * as Path from "node:path"

// The git export's own files, beside the served repository as its write lock is
// (.REPO.ocx2-write.lock): the export's lock, so one export runs at a time, and its state (the
// last export and the last failure), which the hook's cursor and export's dry run read. Plain
// Node and SQLite only: the hook, which runs on every receipt, reads them.

export const exportLockOf = (repository: string): string =>
  Path.join(Path.dirname(repository), `.${Path.basename(repository)}.ocx2-export.lock`)

/** held by the one exporter waiting for the export's lock (the hook's exporters: one exports, one waits) */
export const exportWaitingLockOf = (repository: string): string =>
  Path.join(Path.dirname(repository), `.${Path.basename(repository)}.ocx2-export-waiting.lock`)

export const exportStateFileOf = (repository: string): string =>
  Path.join(Path.dirname(repository), `.${Path.basename(repository)}.ocx2-export.json`)

export interface ExportState {
  /** the last export that ran to the end: when, into which mirror, and the newest check-in (its rid) it covered */
  readonly exported?: { readonly at: string; readonly mirror: string; readonly rid: number; readonly said: string }
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
 * The newest check-in (its rid) after `rid`, or undefined when none is: posts, ticket changes
 * and tags alone give the export nothing to do. A range of event's primary key, so the hook's
 * question costs what arrived, not the repository's size. (A check-in whose artifact was a
 * phantom before the cursor is not seen here; the next check-in's export carries it, since
 * `fossil git export` exports every check-in it has not.)
 */
export const checkinAfter = (db: BetterSqlite3.Database, rid: number): number | undefined => {
  const row = db.prepare<[number], { newest: number | null }>(
    "SELECT max(objid) AS newest FROM event WHERE objid > ? AND type = 'ci'"
  ).get(rid)
  return row === undefined || row.newest === null ? undefined : row.newest
}
