/**
 * Figures for the Repository service against Fossil's own command line.
 *
 * Run from the project root (tsx is not installed; bundle, keeping the native addon
 * external, and write the bundle inside the project so it finds node_modules):
 *   npx esbuild bench/repository.ts --bundle --platform=node --format=esm \
 *     --external:better-sqlite3 --outfile=bench/repository.out.mjs && node bench/repository.out.mjs
 *
 * Builds a repository of 10,000 forum posts (composed here, imported in one bundle),
 * then times (a) reading everything after a cursor with the service vs `fossil sql
 * --readonly` doing the same query with content(); (b) reading after a cursor near the
 * end; (c) writing one reply with the service (on the server's host, and from a clone
 * over the sync protocol) vs the command-line baseline (a reply put into a clone and
 * pushed with `fossil push`).
 */
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as FossilRepository from "../layers/FossilRepository.js"
import { Repository, startCursor } from "../services/Repository.js"
import { type Artifact, composeForumPost } from "../src/fossil/Artifact.js"
import { writeBundle } from "../src/fossil/Bundle.js"
import { runFossil } from "../src/fossil/Command.js"
import { cloneAs, createRepository, fossil, makeTempDir, pushArtifacts, startServer } from "../test/support/fossilServer.js"

const N = 10_000
const now = () => performance.now()
const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const fmt = (ms: number) => `${ms.toFixed(1)} ms`

const time = async (runs: number, f: () => Promise<unknown>) => {
  const xs: Array<number> = []
  for (let i = 0; i < runs; i++) {
    const t = now()
    await f()
    xs.push(now() - t)
  }
  return median(xs)
}

const importBundle = async (repo: string, user: string, artifacts: ReadonlyArray<Artifact>, dir: string) => {
  const projectCode = (await fossil(["sql", "-R", repo, "SELECT value FROM config WHERE name='project-code'"])).trim().replace(/'/g, "")
  const bundle = Path.join(dir, `b-${Date.now()}.bundle`)
  writeBundle(bundle, projectCode, artifacts)
  await fossil(["bundle", "import", bundle, "--publish", "-U", user, "-R", repo], user)
  Fs.rmSync(bundle)
}

const main = async () => {
  const dir = makeTempDir("ocx2-bench-")
  const users = [{ login: "alice", capabilities: "gio234nrwcy", password: "pw-alice" }, { login: "lab", capabilities: "oi", password: "pw-lab" }]
  const repo = await createRepository(Path.join(dir, "served.fossil"), users)
  const server = await startServer(repo)
  try {
    // ---- build: 100 threads of 100 posts, one bundle, one fossil process
    let t = now()
    const base = Date.parse("2026-01-01T00:00:00Z")
    const artifacts: Array<Artifact> = []
    for (let th = 0; th < N / 100; th++) {
      const root = composeForumPost({ user: "alice", date: new Date(base + th * 1000), title: `Thread ${th}`, text: `run ${th}\n\`\`\`json\n{"ocx": 2, "to": "lab", "run": {"n": ${th}}}\n\`\`\`` })
      artifacts.push(root)
      for (let r = 1; r < 100; r++) {
        artifacts.push(composeForumPost({ user: "alice", date: new Date(base + th * 1000 + r), root: root.hash, replyTo: root.hash, text: `reply ${r} of ${th}: ${"x".repeat(80)}` }))
      }
    }
    const composeMs = now() - t
    t = now()
    await importBundle(repo, "alice", artifacts, dir)
    const importMs = now() - t
    console.log(`build: composed ${N} posts in ${fmt(composeMs)}, imported in one bundle in ${fmt(importMs)}`)

    const clone = await cloneAs(server.url, "lab", "pw-lab", Path.join(dir, "lab.fossil"))
    const clone2 = await cloneAs(server.url, "lab", "pw-lab", Path.join(dir, "lab2.fossil"))

    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const repository = yield* Repository
      // ---- (a) everything after the start
      let count = 0
      const serviceAll = yield* Effect.promise(() => time(3, () => Effect.runPromise(Effect.scoped(Effect.gen(function*() {
        const r = yield* Repository
        const batch = yield* r.readAfter(startCursor, 2 * N)
        count = batch.items.length
      }).pipe(Effect.provide(FossilRepository.layer({ path: repo })))))))
      const sql = `SELECT b.rid, b.uuid, b.rcvid, u.login, CAST(content(b.uuid) AS TEXT) FROM forumpost f JOIN blob b ON b.rid = f.fpid
        LEFT JOIN rcvfrom r ON r.rcvid = b.rcvid LEFT JOIN user u ON u.uid = r.uid
        WHERE NOT EXISTS (SELECT 1 FROM private p WHERE p.rid = f.fpid) AND b.rcvid > 0 ORDER BY b.rcvid, b.rid;`
      let sqlBytes = 0
      const fossilAll = yield* Effect.promise(() => time(3, async () => {
        const r = await runFossil(["sql", "--readonly", "-R", repo], { user: "root", input: sql })
        sqlBytes = r.stdout.length
      }))
      console.log(`(a) read all ${count} items after the start: service ${fmt(serviceAll)} (open + read + decode) vs fossil sql --readonly ${fmt(fossilAll)} (${sqlBytes} bytes out); ratio service/fossil = ${(serviceAll / fossilAll).toFixed(2)}`)

      // ---- (b) after a cursor near the end: 10 new posts
      const before = (yield* repository.readAfter(startCursor, 2 * N)).cursor
      const tail = Array.from({ length: 10 }, (_, i) => composeForumPost({ user: "alice", date: new Date(base + 9e8 + i), title: `late ${i}`, text: `late ${i}` }))
      yield* Effect.promise(() => importBundle(repo, "alice", tail, dir))
      let tailCount = 0
      const serviceTail = yield* Effect.promise(() => time(5, () => Effect.runPromise(repository.readAfter(before).pipe(Effect.tap((b) => Effect.sync(() => { tailCount = b.items.length })))))
      )
      const fossilTail = yield* Effect.promise(() => time(5, () => runFossil(["sql", "--readonly", "-R", repo], {
        user: "root", input: sql.replace("b.rcvid > 0", `b.rcvid > ${before.rcvid}`)
      })))
      console.log(`(b) read the ${tailCount} items after a cursor near the end: service ${fmt(serviceTail)} (open connection) vs fossil sql ${fmt(fossilTail)}; vs all: ${(serviceTail / serviceAll * 100).toFixed(2)} % of the full read`)
    }).pipe(Effect.provide(FossilRepository.layer({ path: repo })))))

    // ---- (c) one reply
    const root = artifacts[0]!.hash
    const served = await time(5, () => Effect.runPromise(Effect.scoped(Effect.flatMap(Repository, (r) => r.reply({ user: "alice", to: root, text: "a reply" }))
      .pipe(Effect.provide(FossilRepository.layer({ path: repo }))))))
    const fromClone = await time(5, () => Effect.runPromise(Effect.scoped(Effect.flatMap(Repository, (r) => r.reply({ user: "lab", to: root, text: "a reply from the clone" }))
      .pipe(Effect.provide(FossilRepository.layer({ path: clone, server: { url: server.url, passwords: { lab: "pw-lab" } } }))))))
    let k = 0
    const baseline = await time(5, () => pushArtifacts(clone2, "lab", [composeForumPost({ user: "lab", date: new Date(), root, replyTo: root, text: `baseline ${k++}` })]))
    console.log(`(c) one reply: service on the server's host ${fmt(served)} (bundle import + receipt); service from a clone ${fmt(fromClone)} (xfer: check, push, confirm)`)
    console.log(`    baseline, fossil from a clone (bundle import + push) ${fmt(baseline)}; ratios: host/baseline ${(served / baseline).toFixed(2)}, clone/baseline ${(fromClone / baseline).toFixed(2)}`)
  } finally {
    await server.stop()
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
