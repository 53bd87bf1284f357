/**
 * How fast a post reaches a session (issue 6): from the push carrying it to its line on the
 * session's stdin.
 *
 * Run from the project root after `npm run build` (the hook and watcher bundles are measured as shipped):
 *   npx esbuild bench/delivery.ts --bundle --platform=node --format=esm \
 *     --external:better-sqlite3 --external:@lydell/node-pty --outfile=bench/delivery.out.mjs && node bench/delivery.out.mjs
 *
 * A served repository in fast mode (backoffice-disable on, fossil backoffice --poll 1), its node
 * started with `hook --node`, one session (deliveries feed) whose process stamps each line it
 * reads with the clock. BENCH_POSTS posts (default 50, after one warm-up), each pushed alone from
 * alice's clone at a random moment: the time from starting the push to the stamp, median and p95.
 * Target: median < 1 s. Then the node's supervisor (`ocx2 supervise`) is started in the same world,
 * the session going on, and the same is measured again. Target: median < 200 ms.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { composeForumPost } from "../src/fossil/Artifact.js"
import { hook } from "../src/tools/hook.js"
import { cloneAs, pushArtifacts, webLogin, webNewThread } from "../test/support/fossilServer.js"
import { shellRun, users } from "../test/support/nodeWorld.js"
import { endWatchers, makeHookWorld, sleep, waitFor } from "../test/node/hookWorld.js"
import { startSupervisor, stopSupervisor } from "../test/node/supervisorWorld.js"

const posts = Number(process.env.BENCH_POSTS ?? 50)

const quantile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!
}

const world = await makeHookWorld({ fastHooks: true })
let supervisor: Awaited<ReturnType<typeof startSupervisor>> | undefined
try {
  const installed = await world.call(hook, { node: users.node.login, root: world.root })
  if (installed.stopped.reason !== "completed") throw new Error(`hook --node: ${JSON.stringify(installed.stopped)}`)
  const alice = await webLogin(world.server.url, users.admin.login, users.admin.password)
  // each line read is written with the moment it was read (ms), before anything else is done
  const stamp = "while IFS= read -r line; do printf '%s %s\\n' \"$(date +%s%3N)\" \"$line\" >> $$workspace$$/lines; done"
  const run = await webNewThread(world.server, alice, {
    title: "a session for the bench",
    text: world.runText(shellRun(world, stamp, { session: true, hears: ["*"] }, { limits: { wall: "30m" } }))
  })
  const linesFile = Path.join(world.root, "work", run, "lines")
  const stamped = (hash: string): number | undefined => {
    if (!Fs.existsSync(linesFile)) return undefined
    const line = Fs.readFileSync(linesFile, "utf8").split("\n").find((l) => l.includes(hash))
    return line === undefined ? undefined : Number(line.split(" ")[0])
  }
  if ((await waitFor(() => (Fs.existsSync(linesFile) ? true : undefined), 60_000)) === undefined) throw new Error("the session did not start")
  const clone = await cloneAs(world.server.url, users.admin.login, users.admin.password, Path.join(world.dir, "alice.fossil"))

  const measure = async (what: string, target: string) => {
    const took: Array<number> = []
    for (let i = 0; i <= posts; i++) {
      // posts come at any moment: a push right after the last line would always land at the same
      // point of the poller's one-second cycle, and measure that point rather than the path
      await sleep(Math.random() * 1000)
      const post = composeForumPost({ date: new Date(), user: users.admin.login, root: run, replyTo: run, text: `post ${i}` })
      const began = Date.now()
      await pushArtifacts(clone, users.admin.login, [post])
      const at = await waitFor(() => stamped(post.hash), 30_000, 20)
      if (at === undefined) throw new Error(`post ${i} (${post.hash}) never reached the session`)
      if (i > 0) took.push(at - began) // the first warms the page cache and the code caches
    }
    console.log(`posts: ${took.length} (after one warm-up), each pushed alone from a clone, ${what}`)
    console.log(`push to the line on the session's stdin: median ${quantile(took, 0.5)} ms, p95 ${quantile(took, 0.95)} ms, max ${Math.max(...took)} ms (target: median < ${target})`)
  }
  await measure("fast mode", "1000 ms")
  supervisor = await startSupervisor(world)
  await measure("with the node's supervisor (the poller still running: it only wakes it)", "200 ms")
} finally {
  await stopSupervisor(supervisor)
  endWatchers(world.root)
  await world.close()
}
