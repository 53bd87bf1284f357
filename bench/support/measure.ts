// What the benches share: timing two ways of doing one thing side by side, and putting posts
// straight into a repository (one bundle import) to give them something to measure.
import BetterSqlite3 from "better-sqlite3"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { Artifact } from "../../src/fossil/Artifact.js"
import { writeBundle } from "../../src/fossil/Bundle.js"
import { fossil } from "../../test/support/fossilServer.js"

export const now = () => performance.now()
export const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/** runs f and g alternately, `runs` times each (one untimed warm-up each first); medians */
export const alternate = async (runs: number, f: () => Promise<unknown>, g: () => Promise<unknown>) => {
  await f()
  await g()
  const fs: Array<number> = []
  const gs: Array<number> = []
  for (let i = 0; i < runs; i++) {
    let t = now()
    await f()
    fs.push(now() - t)
    t = now()
    await g()
    gs.push(now() - t)
  }
  return [median(fs), median(gs)] as const
}

/** `artifacts` received by `repo` from `user`, in one bundle import */
export const importBundle = async (repo: string, user: string, artifacts: ReadonlyArray<Artifact>, dir: string) => {
  const projectCode = (await fossil(["sql", "-R", repo, "SELECT value FROM config WHERE name='project-code'"])).trim().replace(/'/g, "")
  const bundle = Path.join(dir, `b-${Date.now()}.bundle`)
  writeBundle(bundle, projectCode, artifacts)
  await fossil(["bundle", "import", bundle, "--publish", "-U", user, "-R", repo], user)
  Fs.rmSync(bundle)
}

/** when the served repository received the artifact, in epoch ms (rcvfrom.mtime is a Julian day) */
export const receivedAt = (repository: string, hash: string): number | undefined => {
  const db = new BetterSqlite3(repository, { readonly: true, fileMustExist: true })
  try {
    const row = db.prepare("SELECT r.mtime AS mtime FROM blob b JOIN rcvfrom r USING(rcvid) WHERE b.uuid = ?").get(hash) as { mtime: number } | undefined
    return row === undefined ? undefined : (row.mtime - 2440587.5) * 86400000
  } finally {
    db.close()
  }
}
