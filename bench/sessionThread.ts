/**
 * A session thread of 2,000 posts by three people posting at once (issue 37, 2):
 * `npm run bench -- sessionThread [--posts N]`.
 *
 * A served repository in fast mode with the node's hook installed (test/node/threeVoices.ts), one
 * session hearing everyone, and three signed-in people each posting replies through the web form
 * one after another, the three at the same time (a post Fossil refused is posted again, and
 * counted). Printed: whether every post was given to the session once, in the server's order; and
 * at 100, 1,000 and 2,000 posts given, the time the rounds that gave the last hundred took (from
 * hook.log: median and most) and the session's watcher's memory (resident, and its peak so far).
 * Everything listens on 127.0.0.1 and lives in a temporary directory, removed at the end.
 */
import { endWatchers, sleep } from "../test/node/hookWorld.js"
import { makeThreadWorld, memoryMb, people, threeVoices, type Place } from "../test/node/threeVoices.js"

const argv = process.argv.slice(2)
const postsArg = argv.indexOf("--posts")
const total = postsArg >= 0 ? Number(argv[postsArg + 1]) : 2000
if (!Number.isInteger(total) || total < 100) {
  console.error("usage: npm run bench -- sessionThread [--posts N (at least 100)]")
  process.exit(2)
}
const checkpoints = [100, 1000, 2000].filter((n) => n <= total)
if (!checkpoints.includes(total)) checkpoints.push(total)

/** a at or before b in the server's order */
const before = (a: Place, b: Place) => a.rcvid < b.rcvid || (a.rcvid === b.rcvid && a.rid <= b.rid)
const quantile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!
}

const thread = await makeThreadWorld()
let failed = false
try {
  const memory = new Map<number, ReturnType<typeof memoryMb>>()
  const reachedAt = new Map<number, number>()
  const began = Date.now()
  // the watcher's memory is sampled the moment each checkpoint's post is given
  let sampling = true
  const sampler = (async () => {
    while (sampling) {
      const given = thread.lines().length - 1
      for (const n of checkpoints) {
        if (given >= n && !memory.has(n)) {
          memory.set(n, memoryMb(thread.watcherPid()))
          reachedAt.set(n, Date.now() - began)
        }
      }
      if (checkpoints.every((n) => memory.has(n))) return
      await sleep(100)
    }
  })()
  const { posted, refused } = await threeVoices(thread.world, thread.run, total)
  const postedMs = Date.now() - began
  const deadline = Date.now() + 300_000
  while (thread.lines().length - 1 < total && Date.now() < deadline) await sleep(250)
  await sleep(1500) // nothing more arrives
  sampling = false
  await sampler

  const given = thread.lines().slice(1).map((l) => l.post)
  const order = thread.serverOrder()
  const counts = new Map<string, number>()
  for (const hash of given) if (hash !== undefined) counts.set(hash, (counts.get(hash) ?? 0) + 1)
  const missing = order.filter((h) => !counts.has(h))
  const twice = [...counts].filter(([, n]) => n > 1).length
  const inOrder = given.length === order.length && given.every((h, i) => h === order[i])
  const byPerson = people.map((p, who) => {
    const mine = thread.lines().slice(1).filter((l) => l.from === p.login).map((l) => l.post)
    return mine.length === posted[who]!.length && mine.every((h, i) => h === posted[who]![i])
  })
  failed = missing.length > 0 || twice > 0 || !inOrder || order.length !== total || byPerson.includes(false)

  console.log(`sessionThread: ${total} posts by ${people.map((p) => p.login).join(", ")} at once, through the web form, in ${(postedMs / 1000).toFixed(1)} s (${refused} tries refused by Fossil and posted again)`)
  console.log(`  given: ${given.length} lines for ${order.length} posts in the thread; missing ${missing.length}, given twice ${twice}, ` +
    `in the server's order: ${inOrder ? "yes" : "NO"}, each person's in their own order: ${byPerson.every((b) => b) ? "yes" : "NO"}`)
  if (missing.length > 0) console.log(`  missing: ${missing.slice(0, 10).join(" ")}`)

  // each checkpoint: the rounds whose cursor ended among that checkpoint's last hundred posts
  const places = thread.places()
  const placeAt = (n: number) => places.get(order[Math.min(n, order.length) - 1]!)!
  const rounds = thread.rounds()
  console.log("  posts given | at (s) | rounds over the last 100 | round ms median | round ms max | watcher RSS MB | watcher peak MB")
  for (const n of checkpoints) {
    const from: Place = n > 100 ? placeAt(n - 100) : { rcvid: 0, rid: 0 }
    const to = placeAt(n)
    const these = rounds.filter((r) => !before(r.to, from) && before(r.to, to))
    const ms = these.map((r) => r.ms)
    const m = memory.get(n)
    console.log(`  ${String(n).padStart(11)} | ${((reachedAt.get(n) ?? NaN) / 1000).toFixed(1).padStart(6)} | ${String(ms.length).padStart(24)} | ` +
      `${String(quantile(ms, 0.5)).padStart(15)} | ${String(ms.length === 0 ? NaN : Math.max(...ms)).padStart(12)} | ` +
      `${(m?.rss ?? NaN).toFixed(1).padStart(14)} | ${(m?.peak ?? NaN).toFixed(1).padStart(15)}`)
  }
  const all = rounds.map((r) => r.ms)
  console.log(`  every round that gave something: ${all.length}, median ${quantile(all, 0.5)} ms, p95 ${quantile(all, 0.95)} ms, most ${all.length === 0 ? NaN : Math.max(...all)} ms`)
} finally {
  endWatchers(thread.world.root)
  await thread.world.close()
}
process.exit(failed ? 1 : 0)
