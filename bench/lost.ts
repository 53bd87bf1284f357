/**
 * How soon a run whose watcher was killed is answered lost (issue 15): from the SIGKILL of a
 * running run's watcher to its `ended lost` being received by the served repository, with the
 * node's supervisor running (`ocx2 supervise`). Without one, such a run is answered only at the
 * node's next start (`hook --node`): never, until then.
 *
 *   npm run bench -- lost
 *
 * A served repository (Fossil's default backoffice, no poller), its node started with `hook --node`,
 * its supervisor started from the release root. BENCH_LOST_RUNS runs (default 20), one after
 * another: each `sleep 60` in its sandbox, its watcher SIGKILLed once its process runs. Median and
 * max. Target: median < 1 s.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { hook } from "../src/tools/hook.js"
import { webLogin, webNewThread } from "../test/support/fossilServer.js"
import { shellRun, users } from "../test/support/nodeWorld.js"
import { endWatchers, makeHookWorld, waitFor } from "../test/node/hookWorld.js"
import { startSupervisor, stopSupervisor } from "../test/node/supervisorWorld.js"
import { median, receivedAt } from "./support/measure.js"

const runs = Number(process.env.BENCH_LOST_RUNS ?? 20)

const world = await makeHookWorld({ fastHooks: false })
let supervisor: Awaited<ReturnType<typeof startSupervisor>> | undefined
try {
  const installed = await world.call(hook, { node: users.node.login, root: world.root })
  if (installed.stopped.reason !== "completed") throw new Error(`hook --node: ${JSON.stringify(installed.stopped)}`)
  supervisor = await startSupervisor(world)
  const alice = await webLogin(world.server.url, users.admin.login, users.admin.password)
  const took: Array<number> = []
  for (let i = 0; i < runs; i++) {
    const run = await webNewThread(world.server, alice, {
      title: `lost ${i}`,
      text: world.runText(shellRun(world, "echo x > $$workspace$$/launched; sleep 60"))
    })
    const launched = Path.join(world.root, "work", run, "launched")
    if ((await waitFor(() => (Fs.existsSync(launched) ? true : undefined), 60_000, 20)) === undefined) throw new Error(`run ${i} did not start`)
    const watcher = Number(Fs.readFileSync(Path.join(world.root, "care", `${run}.lock`), "utf8").trim())
    const killedAt = Date.now()
    process.kill(watcher, "SIGKILL")
    const ended = await waitFor(async () => (await world.replies(run)).find((m) => m.kind === "ended"), 30_000, 10)
    if (ended === undefined) throw new Error(`run ${i} was not answered within 30 s`)
    const outcome = (ended.content as { outcome?: string }).outcome
    if (outcome !== "lost") throw new Error(`run ${i} ended ${outcome}, not lost`)
    took.push(receivedAt(world.repository, ended.hash)! - killedAt)
  }
  console.log(`lost: ${runs} runs, each's watcher SIGKILLed while its process ran, the node's supervisor running: ` +
    `from the kill to its ended lost received, median ${median(took).toFixed(0)} ms, max ${Math.max(...took).toFixed(0)} ms ` +
    `(target: median < 1000 ms; without a supervisor: not until the node's next start)`)
} finally {
  await stopSupervisor(supervisor)
  endWatchers(world.root)
  await world.close()
}
