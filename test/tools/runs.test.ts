import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { capabilitiesOf } from "../../src/adapters/cli/RepositoryCapabilities.js"
import { writeMessage } from "../../src/protocol/Envelope.js"
import { stateWords } from "../../src/runs/RunWords.js"
import { create } from "../../src/tools/create.js"
import { hook } from "../../src/tools/hook.js"
import { runTool } from "../../src/tools/RunTool.js"
import { runs, type RunRow, type RunsOutput } from "../../src/tools/runs.js"
import { fossil, webLogin, webNewThread, type WebSession } from "../support/fossilServer.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { closeHookWorld, dist, makeHookWorld, type HookWorld, waitFor } from "../node/hookWorld.js"
import * as Fs from "node:fs"

// The runs list against a real server and real runs (issue 16): a waiting, a running, an ended, a
// refused and a lost run, each in its state, from the tool, the command line as shipped and the web page.

let world: HookWorld
let alice: WebSession
const made: Record<"ended" | "lost" | "running" | "waiting" | "refused", string> = { ended: "", lost: "", running: "", waiting: "", refused: "" }

const createRun = async (script: string, process: object = {}) => {
  const { process: base, objective: _objective, ...rest } = shellRun(world, script)
  const answer = await world.call(create, {
    title: `run: ${script}`, node: users.node.login, objective: `to ${script}`, fields: { ...rest, process: { ...base, ...process } }
  })
  expect(answer.stopped).toEqual({ reason: "completed" })
  return answer.output!.run!
}
const list = async (input: object = {}, as: string = users.admin.login) => {
  const answer = await world.call(runs, input, { as })
  expect(answer.stopped, JSON.stringify(answer.stopped)).toEqual({ reason: "completed" })
  return answer.output!
}
const row = (output: RunsOutput, run: string) => output.runs.find((r) => r.run === run)
const holder = (run: string) => Number(Fs.readFileSync(Path.join(world.root, "care", `${run}.lock`), "utf8").trim())

let cacheHomeBefore: string | undefined
beforeAll(async () => {
  world = await makeHookWorld({ pages: true })
  // the runs list's cache (src/runs/MessagesCache.ts), here and in the programs this test starts
  cacheHomeBefore = process.env.XDG_CACHE_HOME
  process.env.XDG_CACHE_HOME = Path.join(world.dir, "cache")
  expect((await world.call(hook, { node: users.node.login, root: world.root })).stopped.reason).toBe("completed")
  alice = await webLogin(world.server.url, users.admin.login, users.admin.password)
  // ended: a run of builder's that exits
  made.ended = await createRun("echo done")
  await world.waitEnded(made.ended, 60_000)
  // lost: builder's next run, whose watcher dies while it runs; the node starting again answers it
  made.lost = await createRun("sleep 120")
  await world.waitFor("the lost run is answered started", async () => ((await world.replies(made.lost)).some((m) => m.kind === "started") ? true : undefined), { ms: 90_000, run: made.lost })
  process.kill(holder(made.lost), "SIGKILL")
  expect(await waitFor(async () => {
    const again = await world.call(hook, { node: users.node.login, root: world.root })
    return again.output?.runs?.some((r) => r.run === made.lost && /^answered lost/.test(r.action)) ? true : undefined
  }, 60_000, 500)).toBe(true)
  await world.waitEnded(made.lost, 60_000)
  // running: rita's run, still sleeping while the tests look
  made.running = await createRun("echo begun; sleep 600", { user: users.runner.login })
  await world.waitFor("the running run is answered started", async () => ((await world.replies(made.running)).some((m) => m.kind === "started") ? true : undefined), { ms: 90_000, run: made.running })
  // waiting: a manual run nobody started
  made.waiting = await createRun("true", { manual: true, user: users.stranger.login })
  // refused: its process would act as an admin (refusal 4); create would not write it, so a person posts it
  made.refused = await webNewThread(world.server, alice, { title: "run: as an admin", text: world.runText(shellRun(world, "true", { user: users.admin.login })) })
  await world.waitEnded(made.refused, 60_000)
}, 300_000)

afterAll(async () => {
  // a worker runs other files after this one (vitest.config.ts: isolate false)
  if (cacheHomeBefore === undefined) delete process.env.XDG_CACHE_HOME
  else process.env.XDG_CACHE_HOME = cacheHomeBefore
  await closeHookWorld(world)
})

describe("runs", () => {
  // real processes: the tools read the served repository, and a fossil writes into its copy
  it.live("reads again only what arrived since its last call, and everything when something before it changed", () =>
    Effect.gen(function*() {
      const first = yield* Effect.promise(() => world.call(runs, { limit: 0 }))
      const again = yield* Effect.promise(() => world.call(runs, { limit: 0 }))
      expect(again.operations[0]!.detail).toMatch(/the messages read before, and what arrived since/)
      // the same list, but for how long the running run has run by now
      const steady = (output: RunsOutput | undefined) => output?.runs.map(({ seconds: _s, ...rest }) => rest)
      expect(steady(again.output)).toEqual(steady(first.output))
      // a copy of the repository where a post was made private (as a post waiting for moderation is)
      const copy = Path.join(world.dir, "copy.fossil")
      Fs.copyFileSync(world.repository, copy)
      const callAs = (user: string) =>
        Effect.flatMap(capabilitiesOf(copy, user), (capabilities) =>
          runTool(runs, { limit: 0 }, { caller: { user, capabilities, sandboxed: false }, dryRun: false, repository: copy }))
      const before = yield* callAs(users.admin.login)
      expect(before.output!.total).toBe(5)
      expect((yield* callAs(users.admin.login)).operations[0]!.detail).toMatch(/what arrived since/)
      yield* Effect.promise(() => fossil(["sql", "-R", copy, `INSERT INTO private SELECT rid FROM blob WHERE uuid = '${made.waiting}'`]))
      const after = yield* callAs(users.admin.login)
      expect(after.operations[0]!.detail).toMatch(/\(every post\)/)
      // alice holds setup, so x: she still sees it, now private
      expect(after.output!.total).toBe(5)
      const builderView = yield* callAs(users.stranger.login)
      expect(builderView.output!.runs.map((r) => r.run)).not.toContain(made.waiting)
      expect(builderView.output!.total).toBe(4)
    }))

  it("lists a waiting, a running, an ended, a refused and a lost run, each in its state, newest first", async () => {
    const output = await list({ limit: 0 })
    expect(output.senders).toBe("receipts")
    expect(output.total).toBe(5)
    expect(output.runs.map((r) => r.run)).toEqual([made.refused, made.waiting, made.running, made.lost, made.ended])
    const ended = row(output, made.ended)!
    expect(ended).toMatchObject({ state: "ended", outcome: "exited", exit: 0, node: "lab", sender: "alice", objective: "to echo done", process_user: "builder", manual: false })
    expect(Date.parse(ended.started!)).toBeGreaterThanOrEqual(Date.parse(ended.posted))
    expect(Date.parse(ended.ended!)).toBeGreaterThanOrEqual(Date.parse(ended.started!))
    expect(ended.seconds).toBeGreaterThanOrEqual(0)
    expect(row(output, made.lost)).toMatchObject({ state: "lost", outcome: "lost", note: expect.stringMatching(/watcher/) })
    const running = row(output, made.running)!
    expect(running).toMatchObject({ state: "started", process_user: "rita" })
    expect(running.ended).toBeUndefined()
    expect(running.seconds).toBeGreaterThanOrEqual(0)
    expect(row(output, made.waiting)).toMatchObject({ state: "waiting", manual: true, waiting_for: "a person to start it (manual)" })
    expect(row(output, made.refused)).toMatchObject({ state: "refused", outcome: "refused", note: expect.stringMatching(/^refusal 4/) })
    expect(output.runs.every((r) => r.thread !== undefined)).toBe(true)
  })

  it("filters by state, node, sender and time, and keeps to its limit", async () => {
    const states = async (input: object) => (await list(input)).runs.map((r) => r.run).sort()
    expect(await states({ state: "open" })).toEqual([made.running, made.waiting].sort())
    expect(await states({ state: "over" })).toEqual([made.ended, made.lost, made.refused].sort())
    expect(await states({ state: "lost" })).toEqual([made.lost])
    expect(await states({ node: "lab", state: "started" })).toEqual([made.running])
    expect(await states({ node: "elsewhere" })).toEqual([])
    expect(await states({ sender: "alice", state: "waiting" })).toEqual([made.waiting])
    expect(await states({ sender: "builder" })).toEqual([])
    expect(await states({ since: "1h" })).toHaveLength(5)
    expect(await states({ until: "2000-01-01" })).toEqual([])
    const limited = await list({ limit: 2 })
    expect(limited.total).toBe(5)
    expect(limited.runs.map((r) => r.run)).toEqual([made.refused, made.waiting])
    const bad = await world.call(runs, { since: "yesterday" })
    expect(bad.stopped.reason).toBe("refused")
    expect(bad.stopped.message).toMatch(/^since: "yesterday" is neither an ISO 8601 date/)
    const badState = await world.call(runs, { state: "done" })
    expect(badState.stopped.message).toMatch(/^bad argument: state/)
  })

  it.live("marks a run waiting for a node that has never answered any run (issue 40), not one whose node has", () =>
    Effect.gen(function*() {
      // a copy, so that no node of this host's hook sees the run and the other tests' lists stay as they are
      const copy = Path.join(world.dir, "silent.fossil")
      Fs.copyFileSync(world.repository, copy)
      const silent = yield* Effect.scoped(Effect.flatMap(FossilRepository.make({ path: copy }), (r) =>
        r.post({ user: users.admin.login, title: "for a node never installed", text: writeMessage({ ocx: 2, to: users.runner.login, run: shellRun(world, "true") }) })))
      const capabilities = yield* capabilitiesOf(copy, users.admin.login)
      const answer = yield* runTool(runs, { limit: 0 }, { caller: { user: users.admin.login, capabilities, sandboxed: false }, dryRun: false, repository: copy })
      const output = answer.output!
      expect(row(output, silent.hash)).toMatchObject({ state: "waiting", node: users.runner.login, waiting_for: "its node", node_silent: true })
      expect(stateWords(row(output, silent.hash)!)).toBe("waiting: its node has never answered a run")
      // lab has answered runs: its manual run waits for a person, and is not marked
      expect(row(output, made.waiting)!.node_silent).toBeUndefined()
    }))

  it("shows a viewer only the runs they may read where they are: forum posts need Read Forum", async () => {
    // builder holds o and i, not 2: the runs' threads are not theirs to read
    const hidden = await list({}, users.builder.login)
    expect(hidden.total).toBe(0)
    const seen = await list({}, users.stranger.login)
    expect(seen.total).toBe(5)
  })

  it("the command line as shipped prints the same list, as JSON and as a table", async () => {
    const ocx2 = (args: ReadonlyArray<string>) =>
      ChildProcess.execFileSync(process.execPath, [Path.join(dist, "ocx2.mjs"), "--repository", world.repository, "--user", "alice", ...args], { encoding: "utf8" })
    const answer = JSON.parse(ocx2(["--json", "runs", "--limit", "0"])) as { output: RunsOutput }
    expect(answer.output.runs.map((r: RunRow) => [r.run, r.state])).toEqual((await list({ limit: 0 })).runs.map((r) => [r.run, r.state]))
    const text = ocx2(["runs", "--state", "over"])
    expect(text).toMatch(new RegExp(`${made.refused.slice(0, 12)}  refused: refusal 4`))
    expect(text).toMatch(new RegExp(`${made.ended.slice(0, 12)}  exited 0`))
    expect(text).toMatch(/3 of 3 runs \(newest first\)/)
  })

  it("the web page lists them on a GET, in Fossil's skin, each linked to its run page; JSON with format=json", async () => {
    const page = await fetch(`${world.server.url}ext/ocx2-cgi/runs?limit=0`, { headers: { cookie: alice.cookie } })
    expect(page.status).toBe(200)
    const html = await page.text()
    expect(html).toMatch(/<table class="ocx-runs"[ >]/)
    for (const [state, run] of [["ended", made.ended], ["lost", made.lost], ["started", made.running], ["waiting", made.waiting], ["refused", made.refused]] as const) {
      expect(html).toContain(`<tr data-run="${run}" data-state="${state}">`)
      expect(html).toContain(`href="/ext/ocx2-cgi/watch?run=${run}"`)
    }
    expect(html).toContain(`href="/forumpost/${made.ended}"`)
    const json = await fetch(`${world.server.url}ext/ocx2-cgi/runs?format=json&state=open`, { headers: { cookie: alice.cookie } })
    const answer = await json.json() as { stopped: unknown; output: RunsOutput }
    expect(answer.stopped).toEqual({ reason: "completed" })
    expect(answer.output.runs.map((r) => r.run).sort()).toEqual([made.running, made.waiting].sort())
    // nobody (not logged in) reads no forum here
    const anonymous = await (await fetch(`${world.server.url}ext/ocx2-cgi/runs?format=json`)).json() as { output: RunsOutput }
    expect(anonymous.output.total).toBe(0)
  })
})
