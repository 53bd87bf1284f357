/**
 * A Fossil bundle (bundle.c) holding composed artifacts: an SQLite file with
 * bconfig(project-code) and bblob(uuid, sz, data = 4-byte size + zlib). Importing it
 * with `fossil bundle import --publish` stores and crosslinks each artifact in one
 * process and one receipt, received from the user that process runs as.
 */
import type BetterSqlite3 from "better-sqlite3"
import { openDatabase } from "./Sqlite.js"
import * as Zlib from "node:zlib"
import type { Artifact } from "./Artifact.js"

export const compress = (bytes: Uint8Array): Buffer => {
  const size = Buffer.alloc(4)
  size.writeUInt32BE(bytes.length)
  return Buffer.concat([size, Zlib.deflateSync(bytes)])
}

export const writeBundle = (path: string, projectCode: string, artifacts: ReadonlyArray<Artifact>): void => {
  const db = openDatabase(path)
  try {
    db.exec(`CREATE TABLE bconfig(bcname TEXT, bcvalue ANY);
      CREATE TABLE bblob(blobid INTEGER PRIMARY KEY, uuid TEXT NOT NULL, sz INT NOT NULL, delta ANY, notes TEXT, data BLOB);`)
    db.prepare("INSERT INTO bconfig VALUES('project-code', ?)").run(projectCode)
    const insert = db.prepare("INSERT INTO bblob(uuid, sz, delta, notes, data) VALUES(?, ?, NULL, NULL, ?)")
    db.transaction(() => {
      for (const a of artifacts) insert.run(a.hash, a.bytes.length, compress(a.bytes))
    })()
  } finally {
    db.close()
  }
}
