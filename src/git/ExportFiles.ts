// The git export's own files, beside the served repository as its write lock is
// (.REPO.ocx2-write.lock): the export's lock, so one export runs at a time, and its state (the
// last export and the last failure), which the hook's cursor and export's dry run read. Plain
// Node and SQLite only: the hook, which runs on every receipt, reads them.

import type BetterSqlite3 from "better-sqlite3"
import * as Fs from "node:fs"
import * as Path from "node:path"

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

/** What the export's mirror state says, read directly (`fossil git status` stops at an autopush it cannot parse). */
export interface MirrorState {
  readonly mirror: string | undefined
  /** check-ins in the repository that the export has not written */
  readonly awaiting: number | undefined
  readonly autopush: string | undefined
  readonly mainBranch: string | undefined
}

export const readMirrorState = (repository: string, open: (path: string, readonly: boolean) => BetterSqlite3.Database): MirrorState => {
  const db = open(repository, true)
  try {
    const mirror = exportMirrorOf(db)
    if (mirror === undefined) return { mirror, awaiting: undefined, autopush: undefined, mainBranch: undefined }
    const stateFile = Path.join(Path.resolve(Path.dirname(repository), mirror), ".mirror_state", "db")
    if (!Fs.existsSync(stateFile)) {
      const all = db.prepare<[], { n: number }>("SELECT count(*) AS n FROM event WHERE type = 'ci'").get()
      return { mirror, awaiting: all?.n, autopush: undefined, mainBranch: undefined }
    }
    const state = open(stateFile, true)
    try {
      const config = new Map(state.prepare<[], { key: string; value: unknown }>("SELECT key, Value AS value FROM mconfig").all().map((r) => [r.key, r.value]))
      const exported = new Set(state.prepare<[], { uuid: string }>("SELECT uuid FROM mmark WHERE NOT isfile").all().map((r) => r.uuid))
      const start = Number(config.get("start") ?? 0)
      const candidates = db.prepare<[number], { uuid: string }>(
        "SELECT b.uuid FROM event e JOIN blob b ON b.rid = e.objid WHERE e.type = 'ci' AND e.mtime > ?"
      ).all(Number.isFinite(start) ? start : 0)
      const autopush = config.get("autopush")
      const mainBranch = config.get("mainbranch")
      return {
        mirror,
        awaiting: candidates.filter((c) => !exported.has(c.uuid)).length,
        autopush: typeof autopush === "string" && autopush !== "" ? autopush : undefined,
        mainBranch: typeof mainBranch === "string" ? mainBranch : undefined
      }
    } finally {
      state.close()
    }
  } finally {
    db.close()
  }
}
