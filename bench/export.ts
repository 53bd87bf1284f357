/**
 * How soon a check-in pushed to Fossil can be fetched with git over HTTP from the extension root
 * (issue 17: "within a second of the hook"), fast mode (backoffice-disable on, fossil backoffice
 * --poll 1), the programs as shipped (the hook, its detached exporter, ocx2-git), BENCH_RUNS
 * check-ins (default 10), one at a time:
 *
 *  - from the hook's start (its log entry's time) to the check-in fetchable (git ls-remote over
 *    HTTP names it): what the hook, the exporter and the git program add;
 *  - from the server's receipt of the check-in to fetchable: the backoffice's poll as well;
 *  - baseline, in the same world: `fossil git export` of one check-in run directly, plus one
 *    git ls-remote over HTTP: the floor of the first figure.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import BetterSqlite3 from "better-sqlite3"
import type { HookLogEntry } from "../src/root/HookFiles.js"
import { gitExport } from "../src/tools/export.js"
import { hook } from "../src/tools/hook.js"
import { runFossil } from "../src/fossil/Command.js"
import { cloneAs, webLogin } from "../test/support/fossilServer.js"
import { users } from "../test/support/nodeWorld.js"
import { closeHookWorld, sleep } from "../test/node/hookWorld.js"
import { git, makeGitWorld } from "../test/git/gitWorld.js"

const runs = Number(process.env.BENCH_RUNS ?? 10)

const quantile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!
}
const median = (values: ReadonlyArray<number>) => quantile(values, 0.5)

const world = await makeGitWorld()
try {
  if ((await world.call(gitExport, { mirror: world.mirror })).stopped.reason !== "completed") throw new Error("the first export failed")
  if ((await world.call(hook, { root: world.root })).stopped.reason !== "completed") throw new Error("hook failed")
  const builder = await webLogin(world.server.url, users.builder.login, users.builder.password)
  const remoteHead = () => git(["-c", `http.extraHeader=Cookie: ${builder.cookie}`, "ls-remote", world.gitUrl, "refs/heads/master"]).stdout.split(/\s/)[0]
  const clone = await cloneAs(world.server.url, users.admin.login, users.admin.password, Path.join(world.dir, "alice.fossil"))
  const checkout = Path.join(world.dir, "alice-checkout")
  Fs.mkdirSync(checkout)
  await runFossil(["open", clone], { user: "alice", cwd: checkout })
  const log = Path.join(world.root, "node", "hook.log")
  const entries = (): ReadonlyArray<HookLogEntry> => !Fs.existsSync(log) ? [] : Fs.readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l) as HookLogEntry)
  const receivedAt = (): number => {
    const db = new BetterSqlite3(world.repository, { readonly: true, fileMustExist: true })
    try {
      const row = db.prepare("SELECT max(r.mtime) AS mtime FROM event e JOIN blob b ON b.rid = e.objid JOIN rcvfrom r USING(rcvid) WHERE e.type = 'ci'").get() as { mtime: number }
      return (row.mtime - 2440587.5) * 86400000
    } finally {
      db.close()
    }
  }

  const fromHook: Array<number> = []
  const fromReceipt: Array<number> = []
  for (let i = 0; i < runs; i++) {
    const seen = entries().length
    await world.commitAndPush(checkout, "bench.txt", `${i}\n`, `bench check-in ${i}`)
    const deadline = Date.now() + 30_000
    let fetchable: number | undefined
    while (Date.now() < deadline) {
      const head = remoteHead()
      if (head !== undefined && git(["log", "-1", "--format=%s", head], { cwd: world.mirror, allowFail: true }).stdout.trim() === `bench check-in ${i}`) {
        fetchable = Date.now()
        break
      }
      await sleep(20)
    }
    if (fetchable === undefined) throw new Error(`check-in ${i} was not fetchable within 30 s`)
    const started = entries().slice(seen).find((e) => e.did.some((d) => d.startsWith("a check-in arrived after the git export")))
    if (started === undefined) throw new Error(`no hook entry started the export of check-in ${i}`)
    fromHook.push(fetchable - Date.parse(started.at))
    fromReceipt.push(Math.round(fetchable - receivedAt()))
    await sleep(300 + Math.random() * 700)
  }

  // the floor: the export itself and one look over HTTP, in the same world
  const floor: Array<number> = []
  for (let i = 0; i < Math.min(runs, 5); i++) {
    Fs.writeFileSync(Path.join(world.dir, "checkout", "floor.txt"), `${i}\n`)
    for (const args of [["addremove"], ["commit", "--no-warnings", "-m", `floor ${i}`]]) await runFossil(args, { user: "alice", cwd: Path.join(world.dir, "checkout") })
    const began = Date.now()
    ChildProcess.spawnSync("fossil", ["git", "export", "-R", world.repository], { stdio: "ignore" })
    remoteHead()
    floor.push(Date.now() - began)
  }

  const fmt = (values: ReadonlyArray<number>) => `median ${median(values)} ms, p95 ${quantile(values, 0.95)} ms, max ${Math.max(...values)} ms`
  console.log(`git fetch of a pushed check-in, ${runs} check-ins, fast mode:`)
  console.log(`  from the hook's start to fetchable over HTTP: ${fmt(fromHook)}`)
  console.log(`  from the server's receipt to fetchable:       ${fmt(fromReceipt)}`)
  console.log(`  baseline, fossil git export + one ls-remote: ${fmt(floor)}`)
  console.log(`  ratio of the medians (hook's start / baseline): ${(median(fromHook) / median(floor)).toFixed(2)}x`)
} finally {
  await closeHookWorld(world)
}
