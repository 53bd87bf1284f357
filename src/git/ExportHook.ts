// The hook keeps the git export current (seed 001, "Fetch the git export"): on a receipt that
// brought a check-in after the last export, it starts the export detached and goes on, since
// Fossil runs hooks one after another from its backoffice and an export of a large repository
// takes a while. Posts, ticket changes and tags alone export nothing.

import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { openDatabase } from "../fossil/Sqlite.js"
import { checkinAfter, exportMirrorOf, readExportState } from "./ExportFiles.js"
import { exportNow, type ExportResult } from "./ExportRun.js"

/** the user fossil runs as for the hook's exports: Fossil gives the hook no USER */
export const exportUser = (): string => process.env["USER"] ?? process.env["LOGNAME"] ?? "ocx2"

/** How long a detached exporter waits for an export already running before it leaves the check-in to it. */
const waitSeconds = 600

/** What arrived for the export: the mirror and the newest check-in after its cursor, or nothing to do. */
const due = (repository: string): { readonly mirror: string; readonly rid: number } | undefined => {
  const db = openDatabase(repository, { readonly: true, fileMustExist: true })
  try {
    const mirror = exportMirrorOf(db)
    if (mirror === undefined) return undefined
    const rid = checkinAfter(db, readExportState(repository).exported?.rid ?? 0)
    return rid === undefined ? undefined : { mirror, rid }
  } finally {
    db.close()
  }
}

/**
 * One line for the hook's log when a check-in awaits the export (which is then started, detached
 * through the hook's own program `--export`, or awaited from source); undefined when none does.
 */
export const exportWhenDue = async (repository: string, program: string | undefined): Promise<string | undefined> => {
  const awaiting = due(repository)
  if (awaiting === undefined) return undefined
  const what = `a check-in arrived after the git export (rid ${awaiting.rid})`
  const real = program === undefined ? undefined : (() => {
    try {
      return Fs.realpathSync(program)
    } catch {
      return undefined
    }
  })()
  if (real === undefined || real.endsWith(".ts")) {
    const result = await exportDetached(repository)
    return `${what}: ${describeExport(result)}`
  }
  const child = ChildProcess.spawn(process.execPath, [program!, "--export", repository], {
    detached: true,
    stdio: "ignore",
    cwd: "/"
  })
  child.on("error", () => {})
  child.unref()
  return `${what}: exporting to ${awaiting.mirror}, detached (pid ${child.pid ?? "?"})`
}

/** What the detached exporter (ocx2-hook --export REPO) does: the export, only while still due. */
export const exportDetached = (repository: string): Promise<ExportResult> =>
  exportNow(repository, { onlyWhenDue: true, oneWaiting: true, waitSeconds, user: exportUser() })

export const describeExport = (result: ExportResult): string => {
  switch (result._tag) {
    case "Exported": return `exported to ${result.mirror}: ${result.said}`
    case "Current": return `${result.mirror} was already current (another export took the check-in)`
    case "NoMirror": return "no git export to keep current"
    case "Busy": return `another export held the lock for ${result.waited} s`
    case "Queued": return "another exporter already waits to export after the one running"
    case "Failed": return `the export to ${result.mirror} failed: ${result.said}`
  }
}
