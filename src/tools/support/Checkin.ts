// A check-in named as Fossil's users name one: a full hash, a unique prefix, or a branch or
// tag name (the newest check-in carrying it, as Fossil resolves a symbolic name).

import type BetterSqlite3 from "better-sqlite3"
import { openDatabase } from "../../fossil/Sqlite.js"
import { isHashPrefix } from "../../fossil/Hash.js"

export interface CheckinFound {
  readonly hash: string
  /** the user its U card names (event.user, or euser when edited) */
  readonly user: string
  /** who the repository received it from; undefined on a clone, whose receipts name its pulls */
  readonly sender: string | undefined
}

export type CheckinLookup = CheckinFound | { readonly problem: string }

export const findCheckin = (repository: string, name: string, role: "served" | "clone"): CheckinLookup => {
  const db = openDatabase(repository, { readonly: true, fileMustExist: true })
  try {
    const select = `SELECT b.uuid AS hash, coalesce(e.euser, e.user) AS user, u.login AS sender
      FROM blob b JOIN event e ON e.objid = b.rid AND e.type = 'ci'
      LEFT JOIN rcvfrom r ON r.rcvid = b.rcvid LEFT JOIN user u ON u.uid = r.uid`
    type Row = { hash: string; user: string | null; sender: string | null }
    const found = (row: Row): CheckinFound => ({ hash: row.hash, user: row.user ?? "", sender: role === "served" ? row.sender ?? undefined : undefined })
    if (isHashPrefix(name)) {
      const rows = db.prepare<[string, string], Row>(`${select} WHERE b.uuid = ? OR b.uuid GLOB ? || '*' LIMIT 2`).all(name, name)
      const exact = rows.find((r) => r.hash === name)
      if (exact !== undefined) return found(exact)
      if (rows.length === 1) return found(rows[0]!)
      if (rows.length > 1) return { problem: `${name} names more than one check-in: give more digits` }
    }
    const named = db.prepare<[string], Row>(
      `${select} WHERE b.rid = (SELECT x.rid FROM tag t JOIN tagxref x ON x.tagid = t.tagid JOIN event c ON c.objid = x.rid AND c.type = 'ci'
        WHERE t.tagname = 'sym-' || ? AND x.tagtype > 0 ORDER BY c.mtime DESC LIMIT 1)`
    ).get(name)
    return named !== undefined ? found(named) : { problem: `no check-in named ${name} in the repository` }
  } finally {
    db.close()
  }
}
