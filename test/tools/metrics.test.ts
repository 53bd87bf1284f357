import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { formatCgiResponse, makeCgi, requestFromEnv } from "../../src/adapters/Cgi.js"
import { create } from "../../src/tools/create.js"
import { metricsOf, type MetricsInput } from "../../src/tools/metrics.js"
import { tools } from "../../src/tools/Registry.js"
import type { ToolContext } from "../../src/tools/Tool.js"
import { hook } from "../../src/tools/hook.js"
import { webLogin, type WebSession } from "../support/fossilServer.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { closeHookWorld, dist, makeHookWorld, type HookWorld } from "../node/hookWorld.js"

// The metrics page and `ocx2 metrics` (issue 40) against a real server and real runs: one ended,
// one waiting. Prometheus' text format from the command line as shipped, and from the page through
// a real fossil server for a setup user and a scraper's token; everyone else refused.

let world: HookWorld
let alice: WebSession
let mallory: WebSession
const made = { ended: "", waiting: "" }
const token = "a-metrics-token-of-32-characters"

const createRun = async (script: string, process: object = {}) => {
  const { process: base, objective: _objective, ...rest } = shellRun(world, script)
  const answer = await world.call(create, {
    title: `run: ${script}`, node: users.node.login, objective: `to ${script}`, fields: { ...rest, process: { ...base, ...process } }
  })
  expect(answer.stopped).toEqual({ reason: "completed" })
  return answer.output!.run!
}

beforeAll(async () => {
  world = await makeHookWorld({ pages: true })
  expect((await world.call(hook, { node: users.node.login, root: world.root })).stopped.reason).toBe("completed")
  made.ended = await createRun("echo done")
  await world.waitEnded(made.ended, 90_000)
  // waiting: a manual run nobody started
  made.waiting = await createRun("true", { manual: true, user: users.stranger.login })
  alice = await webLogin(world.server.url, users.admin.login, users.admin.password)
  mallory = await webLogin(world.server.url, users.stranger.login, users.stranger.password)
  Fs.mkdirSync(Path.join(world.root, "settings"), { recursive: true })
  Fs.writeFileSync(Path.join(world.root, "settings", "metrics-token"), `${token}\n`, { mode: 0o600 })
}, 300_000)
afterAll(() => closeHookWorld(world))

/** Prometheus' text format (0.0.4), line by line: every line a comment it knows or a sample; the samples by name and labels. */
const parseExposition = (text: string): Map<string, number> => {
  const samples = new Map<string, number>()
  expect(text.endsWith("\n")).toBe(true)
  const label = String.raw`[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"`
  const sample = new RegExp(String.raw`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{${label}(?:,${label})*\})? (-?[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?|\+Inf|-Inf|NaN)$`)
  const typed = new Set<string>()
  for (const line of text.slice(0, -1).split("\n")) {
    const help = /^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+$/.exec(line)
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line)
    if (help !== null) continue
    if (type !== null) {
      typed.add(type[1]!)
      continue
    }
    const m = sample.exec(line)
    expect(m, `not a line of the exposition format: ${JSON.stringify(line)}`).not.toBeNull()
    const family = m![1]!.replace(/_(bucket|sum|count)$/, "")
    expect(typed.has(m![1]!) || typed.has(family), `${m![1]} has no # TYPE before it`).toBe(true)
    samples.set(`${m![1]}${m![2] ?? ""}`, Number(m![3] === "+Inf" ? Infinity : m![3]))
  }
  return samples
}

const expectCounts = (samples: Map<string, number>) => {
  expect(samples.get('ocx2_runs{node="lab",state="ended"}')).toBe(1)
  expect(samples.get('ocx2_runs{node="lab",state="waiting"}')).toBe(1)
  expect(samples.get('ocx2_runs{node="lab",state="started"}')).toBe(0)
  expect(samples.get('ocx2_runs{node="lab",state="refused"}')).toBe(0)
  expect(samples.get('ocx2_runs{node="lab",state="lost"}')).toBe(0)
  // one run started and ended: one pickup, one duration, each in the +Inf bucket and counted once
  expect(samples.get('ocx2_run_pickup_seconds_count{node="lab"}')).toBe(1)
  expect(samples.get('ocx2_run_pickup_seconds_bucket{node="lab",le="+Inf"}')).toBe(1)
  expect(samples.get('ocx2_run_pickup_seconds_sum{node="lab"}')).toBeGreaterThanOrEqual(0)
  expect(samples.get('ocx2_run_duration_seconds_count{node="lab"}')).toBe(1)
  expect(samples.get('ocx2_run_duration_seconds_bucket{node="lab",le="86400"}')).toBe(1)
  expect(samples.get("ocx2_watchers_alive")).toBe(0)
  expect(samples.get('ocx2_failed_rounds_total{log="hook"}')).toBe(0)
}

describe("metrics", () => {
  it("ocx2 metrics prints Prometheus' text format: the runs by state and node, pickup and run durations, watchers, failed rounds", () => {
    const ocx2 = (user: string, ...args: Array<string>) =>
      ChildProcess.spawnSync(process.execPath, [Path.join(dist, "ocx2.mjs"), "--repository", world.repository, "--user", user, ...args], { encoding: "utf8", timeout: 60_000 })
    const printed = ocx2(users.admin.login, "metrics", "--root", world.root)
    expect(printed.status, printed.stderr).toBe(0)
    expectCounts(parseExposition(printed.stdout))
    expect(printed.stdout).toContain("# TYPE ocx2_run_pickup_seconds histogram\n")
    console.log(`ocx2 metrics printed (its first lines):\n${printed.stdout.split("\n").slice(0, 10).join("\n")}`)
    // --json: the answer, its text the same document
    const json = ocx2(users.admin.login, "--json", "metrics", "--root", world.root)
    expect(json.status, json.stderr).toBe(0)
    expectCounts(parseExposition((JSON.parse(json.stdout) as { output: { text: string } }).output.text))
    // a user without setup is refused, exit 1, saying what would do
    const refused = ocx2(users.stranger.login, "metrics", "--root", world.root)
    expect(refused.status).toBe(1)
    expect(refused.stderr).toContain("metrics needs Fossil's setup capability (s), or the token of ROOT/settings/metrics-token")
  })

  it("the page through Fossil answers a setup user and the token in Prometheus' text format, and refuses everyone else", async () => {
    const page = `${world.server.url}ext/ocx2-cgi/metrics`
    const asAlice = await fetch(page, { headers: { cookie: alice.cookie } })
    const aliceText = await asAlice.text()
    expect(asAlice.status, aliceText.slice(0, 300)).toBe(200)
    // Fossil keeps only the media type, and passes on Text/Plain as it is (it skins text/plain)
    expect(asAlice.headers.get("content-type")).toMatch(/^text\/plain/i)
    expectCounts(parseExposition(aliceText))

    // a scraper's token: Fossil 2.21 passes an extension no Authorization header, but the cookies
    const scraped = await fetch(page, { headers: { Cookie: `ocx2-metrics-token=${token}` } })
    const scrapedText = await scraped.text()
    expect(scraped.status, scrapedText.slice(0, 300)).toBe(200)
    expect(scraped.headers.get("content-type")).toMatch(/^text\/plain/i)
    expectCounts(parseExposition(scrapedText))

    const nobody = await fetch(page)
    expect(nobody.status).toBe(401)
    expect(await nobody.text()).toContain("metrics needs Fossil's setup capability (s), or the token of ROOT/settings/metrics-token")
    const wrong = await fetch(page, { headers: { Cookie: `ocx2-metrics-token=${token.slice(0, -1)}x` } })
    expect(wrong.status).toBe(403)
    expect(await wrong.text()).toContain("the token sent is not this node's metrics token")
    const asMallory = await fetch(page, { headers: { cookie: mallory.cookie } })
    expect(asMallory.status).toBe(403)
    expect(await asMallory.text()).toContain("metrics needs Fossil's setup capability (s)")
    // a signed-in viewer's own cookie beside the token's: the token still reads
    const both = await fetch(page, { headers: { Cookie: `${mallory.cookie}; ocx2-metrics-token=${token}` } })
    expect(both.status).toBe(200)
    // a root from the request is refused: the page reads its own release's
    const rooted = await fetch(`${page}?root=${encodeURIComponent(world.dir)}`, { headers: { cookie: alice.cookie } })
    expect(rooted.status).toBe(403)
  })

  it("the CGI takes the token as Authorization: Bearer where the server passes it on, and compares it in full", async () => {
    const env = (extra: Record<string, string>) => ({
      REQUEST_METHOD: "GET", SCRIPT_NAME: "/ext/ocx2-cgi", PATH_INFO: "/metrics", QUERY_STRING: "", HTTP_HOST: "127.0.0.1",
      FOSSIL_REPOSITORY: world.repository, FOSSIL_CAPABILITIES: "", ...extra
    })
    const answer = async (extra: Record<string, string>) => {
      // the page's root is its program's: here, as ROOT/current/ocx2 of the world's root
      const cgi = makeCgi(tools.map((t) => t.name !== "metrics" ? t : { ...t, handle: (input: MetricsInput, context: ToolContext) => metricsOf(input, context, Path.join(world.root, "current", "ocx2")) }))
      return cgi(requestFromEnv(env(extra), ""))
    }
    const byHeader = await answer({ AUTH_TYPE: "Bearer", AUTH_CONTENT: token })
    expect(byHeader.status, byHeader.body.slice(0, 300)).toBe(200)
    expect(byHeader.contentType).toBe("text/plain; version=0.0.4")
    expectCounts(parseExposition(byHeader.body))
    expect((await answer({ HTTP_AUTHORIZATION: `Bearer ${token}` })).status).toBe(200)
    expect((await answer({ HTTP_AUTHORIZATION: `Bearer ${token}x` })).status).toBe(403)
    expect((await answer({ HTTP_AUTHORIZATION: `Basic ${Buffer.from("a:b").toString("base64")}` })).status).toBe(401)
    expect(formatCgiResponse(byHeader)).toMatch(/^Status: 200 OK\r\nContent-Type: Text\/Plain; version=0\.0\.4; charset=utf-8\r\n\r\n# HELP /)
  })
})
