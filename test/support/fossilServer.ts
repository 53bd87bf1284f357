/**
 * A real Fossil server for tests, and real clients of it: a person at the web forms
 * and a person pushing from a clone with the `fossil` command.
 *
 * The server and the web forms are the demo's (src/demo/LocalServer.ts, src/demo/WebForms.ts),
 * written once for both; here is what only tests need: a person pushing from a clone. A served
 * repository of a test's own is the test world's (test/support/world.ts).
 */
import BetterSqlite3 from "better-sqlite3"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fossil, makeTempDir, type FossilUser } from "../../src/demo/LocalServer.js"
import type { Artifact } from "../../src/fossil/Artifact.js"
import { writeBundle } from "../../src/fossil/Bundle.js"
import { errorLines, runFossil } from "../../src/fossil/Command.js"

export {
  addUsers, createRepository, fossil, freePort, makeTempDir, restartServer, serviceEnvironment, spawnAsService, startServer,
  type RunningServer, type ServerOptions
} from "../../src/demo/LocalServer.js"
export * from "../../src/demo/WebForms.js"

export type TestUser = FossilUser

// ---------- a person pushing from a clone ----------

/** `fossil clone --save-http-password` as `user`; returns the clone's path. */
export const cloneAs = async (url: string, user: string, password: string, path: string): Promise<string> => {
  const u = new URL(url)
  u.username = encodeURIComponent(user)
  u.password = encodeURIComponent(password)
  await fossil(["clone", "--save-http-password", "--no-open", u.toString(), Path.resolve(path)], user)
  return Path.resolve(path)
}

/**
 * Puts a composed artifact into the clone (bundle import, then `unsent` so one round
 * trip carries it) and pushes. Fails on `Error:` lines, since `fossil push` exits 0.
 */
export const pushArtifacts = async (clone: string, user: string, artifacts: ReadonlyArray<Artifact>): Promise<string> => {
  const dir = makeTempDir("ocx2-push-")
  try {
    const db = new BetterSqlite3(clone, { fileMustExist: true })
    let projectCode: string
    try {
      projectCode = db.prepare<[], { value: string }>("SELECT value FROM config WHERE name = 'project-code'").get()!.value
    } finally {
      db.close()
    }
    const bundle = Path.join(dir, "b.bundle")
    writeBundle(bundle, projectCode, artifacts)
    await fossil(["bundle", "import", bundle, "--publish", "-R", clone], user)
    const w = new BetterSqlite3(clone, { fileMustExist: true })
    try {
      const add = w.prepare("INSERT OR IGNORE INTO unsent SELECT rid FROM blob WHERE uuid = ?")
      for (const a of artifacts) add.run(a.hash)
    } finally {
      w.close()
    }
    return await pushClone(clone, user)
  } finally {
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}

export const pushClone = async (clone: string, user: string): Promise<string> => {
  const r = await runFossil(["push", "-R", clone], { user })
  const out = `${r.stdout}\n${r.stderr}`
  const errors = errorLines(out)
  if (r.code !== 0 || errors.length > 0) throw new Error(`fossil push of ${clone} failed: ${errors.join("; ") || out}`)
  return out
}
