/**
 * Figures for the Repository service against Fossil's own command line (issue 3).
 *
 * Run from the project root (tsx is not installed; bundle, keeping the native addon
 * external, and write the bundle inside the project so it finds node_modules):
 *   npx esbuild bench/repository.ts --bundle --platform=node --format=esm \
 *     --external:better-sqlite3 --outfile=bench/repository.out.mjs && node bench/repository.out.mjs
 *
 * Builds a repository of 10,000 forum posts (100 threads of 100, composed here and
 * imported in one bundle), then measures:
 *  (a) reading everything after the start cursor: the service on a fresh connection
 *      (layer built, file opened, read, every post decoded) vs `fossil sql --readonly`
 *      doing the equivalent query: every post in server order with its sender, its
 *      thread links and its text by content() (deltas applied), printed;
 *  (b) reading after a cursor with 0, 10, 100 and 1000 newer posts, same repository:
 *      the cost must follow what arrived after the cursor, not the repository's size;
 *  (c) reading the 10 posts of a new receipt after a cursor at the end;
 *  (d) writing one reply with the service (on the server's host, and from a clone
 *      over the sync protocol) vs the command line (a reply put in a clone and pushed).
 * Runs of the service and of its baseline alternate, so both see the same machine
 * load; each figure is the median of its runs, after one untimed run of each (the
 * service runs in a long-lived process; its first, unoptimized read is printed apart).
 */
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as FossilRepository from "../layers/FossilRepository.js"
import { type Cursor, type Item, Repository, startCursor } from "../services/Repository.js"
import { alternate, importBundle, median, now } from "./support/measure.js"
import { composeThreads } from "./support/posts.js"
import { composeForumPost } from "../src/fossil/Artifact.js"
import { runFossil } from "../src/fossil/Command.js"
import { cloneAs, createRepository, fossil, makeTempDir, pushArtifacts, startServer } from "../test/support/fossilServer.js"

const N = 10_000
const ms = (x: number) => `${x.toFixed(1)} ms`
const verdict = (ok: boolean) => (ok ? "MET" : "NOT MET")


/**
 * The baseline: what the service returns for a post, by Fossil itself. Server order,
 * private posts left out, the sender, the thread root / post answered / version
 * replaced (the service reads them from the G, I and P cards) and the whole artifact
 * text by content(), which applies deltas; the text holds the title, user and
 * mimetype cards that the service parses out.
 */
const baselineSql = (cursor: Cursor) => `SELECT b.rid, b.uuid, b.rcvid, u.login,
  (SELECT uuid FROM blob WHERE rid = f.froot), (SELECT uuid FROM blob WHERE rid = f.firt),
  (SELECT uuid FROM blob WHERE rid = f.fprev), CAST(content(b.uuid) AS TEXT)
  FROM forumpost f JOIN blob b ON b.rid = f.fpid
  LEFT JOIN rcvfrom r ON r.rcvid = b.rcvid LEFT JOIN user u ON u.uid = r.uid
  WHERE NOT EXISTS (SELECT 1 FROM private p WHERE p.rid = f.fpid) AND b.size >= 0
    AND (b.rcvid > ${cursor.rcvid} OR (b.rcvid = ${cursor.rcvid} AND b.rid > ${cursor.rid}))
  ORDER BY b.rcvid, b.rid;`

const main = async () => {
  const dir = makeTempDir("ocx2-bench-")
  const users = [{ login: "alice", capabilities: "gio234nrwcy", password: "pw-alice" }, { login: "lab", capabilities: "oi", password: "pw-lab" }]
  const repo = await createRepository(Path.join(dir, "served.fossil"), users)
  const server = await startServer(repo)
  try {
    // ---- build: 100 threads of 100 posts, one bundle, one fossil process
    let t = now()
    const artifacts = composeThreads(N)
    const composeMs = now() - t
    t = now()
    await importBundle(repo, "alice", artifacts, dir)
    const importMs = now() - t
    console.log(`build: composed ${N} posts in ${ms(composeMs)}, imported in one bundle in ${ms(importMs)}`)

    const clone = await cloneAs(server.url, "lab", "pw-lab", Path.join(dir, "lab.fossil"))
    const clone2 = await cloneAs(server.url, "lab", "pw-lab", Path.join(dir, "lab2.fossil"))

    const fossilSql = async (sql: string) => {
      const r = await runFossil(["sql", "--readonly", "-R", repo], { user: "root", input: sql })
      if (r.code !== 0) throw new Error(`fossil sql failed: ${r.stderr}`)
      return r.stdout
    }
    const freshRead = (cursor: Cursor, limit: number) =>
      Effect.runPromise(Effect.scoped(Effect.flatMap(Repository, (r) => r.readAfter(cursor, limit))
        .pipe(Effect.provide(FossilRepository.layer({ path: repo })))))

    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const repository = yield* Repository
      // the process's first read: V8 has not optimized the decoding yet (a node reads for
      // hours, so the figures below are taken after one untimed read each)
      const t0 = now()
      const all = (yield* repository.readAfter(startCursor, 2 * N)).items
      const firstMs = now() - t0
      const posts = all.filter((i) => i._tag === "Post")
      console.log(`repository: ${all.length} items after the start (${posts.length} posts, ${all.length - posts.length} other); ` +
        `the process's first full read (code not yet optimized by V8) took ${ms(firstMs)}`)

      // ---- (a) everything after the start, on a fresh connection
      let count = 0
      let lines = 0
      const [serviceAll, fossilAll] = yield* Effect.promise(() => alternate(5,
        async () => { count = (await freshRead(startCursor, 2 * N)).items.length },
        async () => { lines = (await fossilSql(baselineSql(startCursor))).split("\nZ ").length - 1 }))
      console.log(`(a) read all after the start: service ${ms(serviceAll)} (${count} items: layer, open, read, decode) ` +
        `vs fossil sql --readonly ${ms(fossilAll)} (${lines} posts with text)`)
      console.log(`    ratio service/fossil = ${(serviceAll / fossilAll).toFixed(2)}; target service <= fossil: ${verdict(serviceAll <= fossilAll)}`)

      // ---- (b) after a cursor with k newer posts, on the open connection
      const rows: Array<[number, number, number]> = []
      for (const k of [0, 10, 100, 1000]) {
        const at: Item = all[all.length - k - 1]!
        const cursor = { rcvid: at.rcvid, rid: at.rid }
        let got = 0
        const [service, baseline] = yield* Effect.promise(() => alternate(7,
          () => Effect.runPromise(repository.readAfter(cursor).pipe(Effect.tap((b) => Effect.sync(() => { got = b.items.length })))),
          () => fossilSql(baselineSql(cursor))))
        if (got !== k) throw new Error(`expected ${k} items after the cursor, read ${got}`)
        rows.push([k, service, baseline])
      }
      console.log(`(b) read after a cursor with k newer posts (the same ${N}-post repository, open connection):`)
      for (const [k, service, baseline] of rows) {
        console.log(`    k = ${String(k).padStart(4)}: service ${ms(service).padStart(9)} (${(service / serviceAll * 100).toFixed(1).padStart(4)} % of the full read) ` +
          `vs fossil sql ${ms(baseline).padStart(8)}; ratio ${(service / baseline).toFixed(2)}`)
      }
      const time = (k: number) => rows.find((r) => r[0] === k)![1]
      const perPost = (time(1000) - time(100)) / 900
      console.log(`    scaling: each further post costs ${(perPost * 1000).toFixed(0)} µs (slope from k = 100 to 1000); ` +
        `the fixed part, ${ms(time(0))} at k = 0 (${(time(0) / serviceAll * 100).toFixed(1)} % of the full read), is the call, ` +
        `the transaction and one pass over blob for rcvid (Fossil has no index on it); k = 10 -> 100 -> 1000 cost ` +
        `${ms(time(10))} -> ${ms(time(100))} -> ${ms(time(1000))} (x${(time(100) / time(10)).toFixed(1)}, x${(time(1000) / time(100)).toFixed(1)})`)

      // ---- (c) 10 posts of a new receipt, after a cursor at the end
      const before = (yield* repository.readAfter(startCursor, 2 * N)).cursor
      const tail = Array.from({ length: 10 }, (_, i) => composeForumPost({ user: "alice", date: new Date(Date.parse("2026-01-01T00:00:00Z") + 9e8 + i), title: `late ${i}`, text: `late ${i}` }))
      yield* Effect.promise(() => importBundle(repo, "alice", tail, dir))
      let tailCount = 0
      const [serviceTail, fossilTail] = yield* Effect.promise(() => alternate(7,
        () => Effect.runPromise(repository.readAfter(before).pipe(Effect.tap((b) => Effect.sync(() => { tailCount = b.items.length })))),
        () => fossilSql(baselineSql(before))))
      console.log(`(c) read the ${tailCount} posts of a new receipt after a cursor at the end: service ${ms(serviceTail)} (open connection) ` +
        `vs fossil sql ${ms(fossilTail)}; ratio ${(serviceTail / fossilTail).toFixed(2)}; target: ${verdict(serviceTail <= fossilTail)}`)
    }).pipe(Effect.provide(FossilRepository.layer({ path: repo })))))

    // ---- (d) one reply
    const root = artifacts[0]!.hash
    const replyAs = (config: FossilRepository.FossilRepositoryConfig, user: string, text: string) => () =>
      Effect.runPromise(Effect.scoped(Effect.flatMap(Repository, (r) => r.reply({ user, to: root, text }))
        .pipe(Effect.provide(FossilRepository.layer(config)))))
    let k = 0
    const baselineReply = () => pushArtifacts(clone2, "lab", [composeForumPost({ user: "lab", date: new Date(), root, replyTo: root, text: `baseline ${k++}` })])
    const [served, baseline] = await alternate(5, replyAs({ path: repo }, "alice", "a reply"), baselineReply)
    const [fromClone, baseline2] = await alternate(5,
      replyAs({ path: clone, server: { url: server.url, passwords: { lab: "pw-lab" } } }, "lab", "a reply from the clone"), baselineReply)
    console.log(`(d) one reply: service on the server's host ${ms(served)} (bundle import + receipt); service from a clone ${ms(fromClone)} (xfer: check, push, confirm)`)
    console.log(`    baseline, fossil from a clone (bundle import + push) ${ms(median([baseline, baseline2]))}; ` +
      `ratios: host/baseline ${(served / baseline).toFixed(2)}, clone/baseline ${(fromClone / baseline2).toFixed(2)}; ` +
      `target: ${verdict(served <= baseline && fromClone <= baseline2)}`)
  } finally {
    await server.stop()
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
