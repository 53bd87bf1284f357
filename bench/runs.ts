/**
 * The runs list on a repository of 10,000 runs (issue 16), against `fossil sql` doing the same
 * query. `npm run bench -- runs`.
 *
 * Builds a served repository of 10,000 runs, each the first post of a thread of its own sent by
 * an admin: 1,000 waiting (nothing answers them), 1,000 started, 7,000 ended (started, ended
 * exited, and a kept-logs reply), 500 refused (ended alone) and 500 lost (started, ended lost):
 * 33,500 posts, imported in two bundles (the runs from the admin, the answers from the node).
 * Then measures, each as a person runs it (a process started, its answer printed):
 *  (a) `ocx2 --json runs --limit 0`: every run with its state, times and objective, as JSON;
 *  (b) `ocx2 --json runs` (the newest 50) and `ocx2 --json runs --state started --sender alice`;
 *  (c) the baseline, `fossil sql --readonly` doing the same query: every post's text by content()
 *      (deltas applied), its message block cut out and read with json_extract into a temporary
 *      table indexed by what it answers, then each run with its node, sender, time received and
 *      objective, and the first started and ended from its node (the replies that count), newest first.
 * The runs list keeps what it read in a cache (src/runs/MessagesCache.ts): (a) is measured with
 * none (every post read), (b) and (c) from the cache its call before wrote, (d) after 100 runs
 * more arrived. Runs of the two alternate, so both see the same machine load; each figure is the
 * median of 5 runs after one untimed run of each. The answers are checked to agree before anything is timed.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { type Artifact, composeForumPost } from "../src/fossil/Artifact.js"
import { alternate, importBundle, median, now } from "./support/measure.js"
import { runFossil } from "../src/fossil/Command.js"
import { createRepository, fossil, makeTempDir } from "../test/support/fossilServer.js"

const N = 10_000
const ms = (x: number) => `${x.toFixed(0)} ms`
const project = Path.dirname(import.meta.dirname)
const ocx2 = Path.join(project, "dist", "ocx2.mjs")


const block = (value: object) => `\`\`\`json\n${JSON.stringify(value)}\n\`\`\``

/** The baseline: the same list by Fossil's own SQL (content() applies deltas and inflates). */
const baselineSql = `
CREATE TEMP TABLE m AS
  SELECT b.rid, b.uuid, b.rcvid, u.login AS sender, r.mtime, CAST(content(b.uuid) AS TEXT) AS t
  FROM forumpost f JOIN blob b ON b.rid = f.fpid LEFT JOIN rcvfrom r ON r.rcvid = b.rcvid LEFT JOIN user u ON u.uid = r.uid
  WHERE b.size >= 0 AND NOT EXISTS (SELECT 1 FROM private p WHERE p.rid = b.rid);
CREATE TEMP TABLE k AS
  SELECT rid, uuid, rcvid, sender, mtime, js, json_extract(js, '$.re') AS re FROM (
    SELECT rid, uuid, rcvid, sender, mtime,
      substr(substr(t, instr(t, '\`\`\`json') + 8), 1, instr(substr(t, instr(t, '\`\`\`json') + 8), '\`\`\`') - 1) AS js
    FROM m WHERE instr(t, '\`\`\`json') > 0) WHERE json_valid(js) AND json_extract(js, '$.ocx') = 2;
CREATE INDEX temp.k_re ON k(re);
SELECT run.uuid, json_extract(run.js, '$.to'), run.sender, strftime('%Y-%m-%dT%H:%M:%SZ', run.mtime),
  json_extract(run.js, '$.run.objective'),
  (SELECT strftime('%Y-%m-%dT%H:%M:%SZ', s.mtime) FROM k s WHERE s.re = run.uuid AND json_type(s.js, '$.started') IS NOT NULL
     AND s.sender = json_extract(run.js, '$.to') ORDER BY s.rcvid, s.rid LIMIT 1),
  (SELECT strftime('%Y-%m-%dT%H:%M:%SZ', e.mtime) || ' ' || json_extract(e.js, '$.ended.outcome') FROM k e WHERE e.re = run.uuid
     AND json_type(e.js, '$.ended') IS NOT NULL AND e.sender = json_extract(run.js, '$.to') ORDER BY e.rcvid, e.rid LIMIT 1)
FROM k run WHERE json_type(run.js, '$.run') IS NOT NULL AND json_extract(run.js, '$.to') IS NOT NULL
ORDER BY run.rcvid DESC, run.rid DESC;
`

const spawnText = (program: string, args: ReadonlyArray<string>, input?: string) =>
  new Promise<string>((resolve, reject) => {
    const child = ChildProcess.spawn(program, args, { stdio: ["pipe", "pipe", "pipe"] })
    const out: Array<Buffer> = []
    const err: Array<Buffer> = []
    child.stdout.on("data", (c: Buffer) => out.push(c))
    child.stderr.on("data", (c: Buffer) => err.push(c))
    child.once("error", reject)
    child.once("exit", (code) =>
      code === 0 ? resolve(Buffer.concat(out).toString("utf8")) : reject(new Error(`${program} ${args.join(" ")}: ${code}: ${Buffer.concat(err).toString("utf8")}`)))
    child.stdin.end(input ?? "")
  })

const main = async () => {
  const dir = makeTempDir("ocx2-bench-runs-")
  const users = [{ login: "alice", capabilities: "s", password: "pw-alice" }, { login: "lab", capabilities: "", password: "pw-lab" }]
  const repo = await createRepository(Path.join(dir, "served.fossil"), users)
  try {
    let t = now()
    const base = Date.parse("2026-01-01T00:00:00Z")
    const runs: Array<Artifact> = []
    const answers: Array<Artifact> = []
    const expected = { waiting: 0, started: 0, ended: 0, refused: 0, lost: 0 }
    for (let i = 0; i < N; i++) {
      const at = base + i * 60_000
      const run = composeForumPost({
        user: "alice", date: new Date(at), title: `Build ${i}`,
        text: `Build ${i}.\n\n${block({ ocx: 2, to: "lab", run: { clone: "0".repeat(40), objective: `build number ${i}`, process: { user: "builder", command: ["make", "image"] } } })}\n`
      })
      runs.push(run)
      const reply = (offset: number, text: string) =>
        answers.push(composeForumPost({ user: "lab", date: new Date(at + offset), root: run.hash, replyTo: run.hash, text }))
      const kind = i % 20
      if (kind < 2) {
        expected.waiting++
        continue
      }
      if (kind === 2) {
        expected.refused++
        reply(1000, block({ ocx: 2, re: run.hash, ended: { outcome: "refused", note: "refusal 4: process.user builder holds admin" } }))
        continue
      }
      reply(1000, block({ ocx: 2, re: run.hash, started: { values: { workspace: `/srv/ocx/work/${run.hash}` }, limits: { wall: "10m" } } }))
      if (kind < 5) {
        expected.started++
        continue
      }
      if (kind === 5) {
        expected.lost++
        reply(30_000, block({ ocx: 2, re: run.hash, ended: { outcome: "lost", note: "its watcher is gone" } }))
        continue
      }
      expected.ended++
      reply(20_000, block({ ocx: 2, re: run.hash, ended: { outcome: "exited", exit: i % 7 === 0 ? 2 : 0 } }))
      reply(20_500, `The process exited ${i % 7 === 0 ? 2 : 0}.\n\nstderr:\n\n\`\`\`stderr\nmake: building image ${i}\n${"a line of the build's output\n".repeat(5)}\`\`\`\n`)
    }
    await importBundle(repo, "alice", runs, dir)
    await importBundle(repo, "lab", answers, dir)
    console.log(`build: ${N} runs and ${answers.length} answers (${N + answers.length} posts) composed and imported in ${ms(now() - t)}; ` +
      `states: ${JSON.stringify(expected)}`)

    // the runs list keeps what it read in a cache of the user's (src/runs/MessagesCache.ts): measured without it and with it
    const cache = Path.join(dir, "cache")
    process.env.XDG_CACHE_HOME = cache
    const ocx = (args: ReadonlyArray<string>) => spawnText(process.execPath, [ocx2, "--json", "--repository", repo, "--user", "alice", "runs", ...args])
    const cold = (args: ReadonlyArray<string>) => {
      Fs.rmSync(cache, { recursive: true, force: true })
      return ocx(args)
    }
    const sql = () => runFossil(["sql", "--readonly", "-R", repo], { user: "root", input: baselineSql }).then((r) => {
      if (r.code !== 0) throw new Error(`fossil sql failed: ${r.stderr}`)
      return r.stdout
    })

    // the two agree before anything is timed
    const answer = JSON.parse(await ocx(["--limit", "0"])) as { output: { total: number; runs: Array<{ run: string; state: string; started?: string; ended?: string; outcome?: string }> } }
    const rows = (await sql()).split("\n").filter((l) => /^'[0-9a-f]{64}'/.test(l))
    const counts = { waiting: 0, started: 0, ended: 0, refused: 0, lost: 0 } as Record<string, number>
    for (const r of answer.output.runs) counts[r.state]!++
    if (answer.output.runs.length !== N || rows.length !== N) throw new Error(`ocx2 listed ${answer.output.runs.length} runs, fossil sql ${rows.length}; ${N} were posted`)
    if (JSON.stringify(counts) !== JSON.stringify(expected)) throw new Error(`ocx2's states ${JSON.stringify(counts)} are not the runs' ${JSON.stringify(expected)}`)
    const sqlFirst = rows[0]!.slice(1, 65)
    if (answer.output.runs[0]!.run !== sqlFirst) throw new Error(`the newest run: ocx2 ${answer.output.runs[0]!.run}, fossil sql ${sqlFirst}`)
    const withEnded = rows.filter((l) => / (exited|refused|lost)'/.test(l)).length
    const ocxEnded = answer.output.runs.filter((r) => r.outcome !== undefined).length
    if (withEnded !== ocxEnded) throw new Error(`ended runs: ocx2 ${ocxEnded}, fossil sql ${withEnded}`)
    console.log(`both list ${N} runs, newest first, the same ${ocxEnded} of them ended`)
    if (process.env.OCX2_BENCH_KEEP === "built") return

    const [all, baseline] = await alternate(5, () => cold(["--limit", "0"]), sql)
    console.log(`(a) every run, no cache (every post read): ocx2 --json runs --limit 0 ${ms(all)} vs fossil sql --readonly (the same query) ${ms(baseline)}; ratio ${(all / baseline).toFixed(2)}`)
    await ocx(["--limit", "0"])
    const [cached, baseline2] = await alternate(5, () => ocx(["--limit", "0"]), sql)
    console.log(`(b) every run, from the cache of the call before: ${ms(cached)} vs fossil sql ${ms(baseline2)}; ratio ${(cached / baseline2).toFixed(2)}`)
    const [newest, filtered] = await alternate(5, () => ocx([]), () => ocx(["--state", "started", "--sender", "alice"]))
    console.log(`(c) from the cache: ocx2 --json runs (the newest 50) ${ms(newest)}; runs --state started --sender alice ${ms(filtered)}; ` +
      `ratios to fossil sql ${(newest / baseline2).toFixed(2)}, ${(filtered / baseline2).toFixed(2)}`)
    // 100 runs more, posted since the cache was written: read on top of it
    const more = Array.from({ length: 100 }, (_, i) => composeForumPost({
      user: "alice", date: new Date(base + (N + i) * 60_000), title: `Build ${N + i}`,
      text: `Build ${N + i}.\n\n${block({ ocx: 2, to: "lab", run: { clone: "0".repeat(40), objective: `build number ${N + i}`, process: { user: "builder", command: ["make", "image"] } } })}\n`
    }))
    await importBundle(repo, "alice", more, dir)
    let t2 = now()
    const after = JSON.parse(await ocx(["--limit", "0"])) as { output: { total: number }; operations: Array<{ detail: string }> }
    const afterMs = now() - t2
    if (after.output.total !== N + 100 || !/arrived since/.test(after.operations[0]!.detail)) throw new Error(`after 100 more: ${JSON.stringify(after.operations)}`)
    t2 = now()
    await sql()
    console.log(`(d) 100 runs posted since the cache was written: ${ms(afterMs)} (the cache and the 100 read) vs fossil sql ${ms(now() - t2)}`)
    const [start] = await alternate(5, () => spawnText(process.execPath, [ocx2, "--json", "list"]), async () => undefined)
    console.log(`    of which starting the program (ocx2 --json list, no repository): ${ms(start)}`)
  } finally {
    if (process.env.OCX2_BENCH_KEEP !== undefined) console.log(`kept ${repo}`)
    else Fs.rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
