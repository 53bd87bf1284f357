/**
 * Was the hand-written deflate decoder worth keeping? `npm run bench -- inflate [--runs N] [--from REV]`
 *
 * Until 2026-12 the node decoded blob.content with a deflate decoder of its own
 * (src/fossil/Inflate.ts, about 500 lines), beside node's zlib, to save zlib's fixed cost per
 * call on small posts. It was kept only if the node's round is at least 2x faster with it; it
 * was not, and it went. This bench keeps the question answerable: it takes that decoder from
 * commit REV (default: the last one that had it) and measures both.
 *
 * A repository of 10,000 forum posts (threads of 100, each opened by a run for the node), and
 * the node's round's read of it (src/node/Round.ts nodeMessagesAfter: the layer built, the file
 * opened, every item after the cursor read and decoded, the node's messages picked out) in a
 * fresh process, as the hook makes one per round; at the sizes a node meets: 10, 100 and 1,000
 * new posts after its cursor, and a first read of all 10,000. The read is bundled twice, once
 * as the node ships it (node's zlib) and once with the hand-written decoder in zlib's place;
 * the two are run alternately, N times each (default 15), so both see the same machine.
 * Printed: the medians of the read alone and of the whole process (start to exit, what a round
 * costs), and the ratio zlib / hand-written: the decoder would earn its place only where that
 * ratio is 2 or more.
 */
import { spawnSync } from "node:child_process"
import { build, type BuildOptions } from "esbuild"
import BetterSqlite3 from "better-sqlite3"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { importBundle, median, now } from "./support/measure.js"
import { composeThreads } from "./support/posts.js"
import { createRepository, makeTempDir } from "../test/support/fossilServer.js"

const args = process.argv.slice(2)
const runsAt = args.indexOf("--runs")
const runs = runsAt === -1 ? 15 : Number(args[runsAt + 1])
const fromAt = args.indexOf("--from")
/** the last commit that shipped src/fossil/Inflate.ts */
const decoderRev = fromAt === -1 ? "cf499c2" : args[fromAt + 1]!
const N = 10_000
const here = import.meta.dirname.endsWith("bench") ? import.meta.dirname : Path.join(process.cwd(), "bench")

/** the round's read bundled as shipped (node's zlib), and with the hand-written decoder of `decoderRev` in its place */
const bundles = async (dir: string) => {
  const entry = Path.join(here, "support", "roundRead.ts")
  const handWritten = Path.join(dir, "Inflate.ts")
  const old = spawnSync("git", ["show", `${decoderRev}:src/fossil/Inflate.ts`], { cwd: Path.dirname(here), encoding: "utf8" })
  if (old.status !== 0) throw new Error(`the hand-written decoder is not in commit ${decoderRev}: ${old.stderr.trim()}`)
  Fs.writeFileSync(handWritten, old.stdout)
  const common: BuildOptions = {
    entryPoints: [entry], bundle: true, platform: "node", format: "esm", external: ["better-sqlite3"], logLevel: "warning",
    banner: { js: "import { createRequire as __ocx2CreateRequire } from 'node:module'; const require = __ocx2CreateRequire(import.meta.url);" }
  }
  // inside the project, so the bundles find node_modules
  const zlib = Path.join(here, "inflate-zlib.out.mjs")
  const ours = Path.join(here, "inflate-handwritten.out.mjs")
  await build({ ...common, outfile: zlib })
  await build({
    ...common, outfile: ours,
    plugins: [{ name: "hand-written-inflate", setup: (b) => b.onResolve({ filter: /\/InflateStored\.js$/ }, () => ({ path: handWritten })) }]
  })
  if (Fs.readFileSync(zlib, "utf8").includes("inflateExact")) throw new Error("the shipped bundle holds a hand-written decoder")
  if (!Fs.readFileSync(ours, "utf8").includes("inflateExact")) throw new Error("the second bundle lacks the hand-written decoder")
  return { handBundle: ours, zlibBundle: zlib }
}

interface Timing { readonly readMs: number; readonly processMs: number; readonly messages: number }

const roundOf = (bundle: string, repository: string, cursor: { rcvid: number; rid: number }): Timing => {
  const t = now()
  const r = spawnSync(process.execPath, [bundle, repository, String(cursor.rcvid), String(cursor.rid)], { encoding: "utf8" })
  const processMs = now() - t
  if (r.status !== 0) throw new Error(`the round's read failed: ${r.stderr}`)
  const out = JSON.parse(r.stdout.trim().split("\n").pop()!) as { readMs: number; messages: number }
  return { readMs: out.readMs, processMs, messages: out.messages }
}

const main = async () => {
  const dir = makeTempDir("ocx2-bench-inflate-")
  const made: Array<string> = []
  try {
    const users = [{ login: "alice", capabilities: "gio234nrwcy", password: "pw-alice" }, { login: "lab", capabilities: "oi", password: "pw-lab" }]
    const repository = await createRepository(Path.join(dir, "served.fossil"), users)
    await importBundle(repository, "alice", composeThreads(N), dir)
    const { handBundle, zlibBundle } = await bundles(dir)
    made.push(handBundle, zlibBundle)

    // the cursors that leave k posts after them, in the server's order
    const db = new BetterSqlite3(repository, { readonly: true })
    const order = db.prepare("SELECT b.rcvid AS rcvid, b.rid AS rid FROM forumpost f JOIN blob b ON b.rid = f.fpid ORDER BY b.rcvid, b.rid").all() as Array<{ rcvid: number; rid: number }>
    db.close()
    if (order.length !== N) throw new Error(`the repository holds ${order.length} posts, not ${N}`)
    const cases = [10, 100, 1000, N].map((k) => ({
      k,
      cursor: k === N ? { rcvid: 0, rid: 0 } : order[order.length - k - 1]!
    }))

    console.log(`the node's round's read in a fresh process, ${runs} runs of each decoder alternately (medians), load average ${(await import("node:os")).loadavg()[0]!.toFixed(2)}`)
    console.log("posts after the cursor | read: hand-written | read: zlib | zlib/hand-written | process: hand-written | process: zlib | zlib/hand-written")
    const verdicts: Array<boolean> = []
    for (const { k, cursor } of cases) {
      roundOf(handBundle, repository, cursor)
      roundOf(zlibBundle, repository, cursor)
      const ours: Array<Timing> = []
      const theirs: Array<Timing> = []
      for (let i = 0; i < runs; i++) {
        ours.push(roundOf(handBundle, repository, cursor))
        theirs.push(roundOf(zlibBundle, repository, cursor))
      }
      if (ours[0]!.messages !== theirs[0]!.messages) throw new Error(`the two reads disagree: ${ours[0]!.messages} and ${theirs[0]!.messages} messages`)
      const r = (xs: Array<Timing>, f: (t: Timing) => number) => median(xs.map(f))
      const readRatio = r(theirs, (t) => t.readMs) / r(ours, (t) => t.readMs)
      const processRatio = r(theirs, (t) => t.processMs) / r(ours, (t) => t.processMs)
      verdicts.push(processRatio >= 2)
      const ms = (x: number) => `${x.toFixed(1)} ms`
      console.log(`${String(k).padStart(6)}${k === N ? " (first read)" : ""} | ${ms(r(ours, (t) => t.readMs))} | ${ms(r(theirs, (t) => t.readMs))} | ${readRatio.toFixed(2)}x | ` +
        `${ms(r(ours, (t) => t.processMs))} | ${ms(r(theirs, (t) => t.processMs))} | ${processRatio.toFixed(2)}x`)
    }
    console.log(verdicts.every((v) => v)
      ? "the hand-written decoder would make the round at least 2x faster at every size"
      : "the hand-written decoder does not make the round 2x faster at every size: node's zlib is enough")
  } finally {
    for (const f of made) Fs.rmSync(f, { force: true })
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
