import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { create } from "../../src/tools/create.js"
import { hook } from "../../src/tools/hook.js"
import { watch, type WatchOutput } from "../../src/tools/watch.js"
import { cloneAs, fossil } from "../support/fossilServer.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { closeHookWorld, dist, makeHookWorld, type HookWorld, waitFor } from "../node/hookWorld.js"

// watch (issue 16): a running run's lines as its process prints them, on its node's host, until
// it ends with its outcome; a session's deliveries; the same through MCP; the record alone elsewhere.

let world: HookWorld

const createRun = async (script: string, process: object = {}) => {
  const { process: base, objective: _objective, ...rest } = shellRun(world, script)
  const answer = await world.call(create, { title: `run: ${script}`, node: users.node.login, objective: "watched", fields: { ...rest, process: { ...base, ...process } } })
  expect(answer.stopped).toEqual({ reason: "completed" })
  return answer.output!.run!
}

beforeAll(async () => {
  world = await makeHookWorld({ pages: true })
  expect((await world.call(hook, { node: users.node.login, root: world.root })).stopped.reason).toBe("completed")
}, 120_000)

afterAll(async () => {
  await closeHookWorld(world)
})

/** ocx2 watch as shipped, given its arguments after the program: its stdout lines each with the moment it arrived. */
const watchProgram = (args: ReadonlyArray<string>) => {
  const child = ChildProcess.spawn(process.execPath, [Path.join(dist, "ocx2.mjs"), ...args], { stdio: ["ignore", "pipe", "pipe"] })
  const lines: Array<{ readonly text: string; readonly at: number }> = []
  let rest = ""
  let stderr = ""
  child.stdout.on("data", (chunk: Buffer) => {
    const at = Date.now()
    const parts = (rest + chunk.toString("utf8")).split("\n")
    rest = parts.pop()!
    for (const text of parts) lines.push({ text, at })
  })
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve))
  return { lines, exited, stderr: () => stderr }
}

/** The latencies (ms) of the lines a watch printed live: those the process printed after the watch had its first (the first were kept before it began). */
const liveLatencies = (printed: ReadonlyArray<{ readonly text: string; readonly at: number }>) =>
  printed.filter((l) => Number(l.text.split(" ")[2]) > printed[0]!.at).map((l) => l.at - Number(l.text.split(" ")[2]))
const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]

describe("watch", () => {
  // One run followed twice at once: on its node's host (the care directory) and from a clone's host
  // (the server's run page), each live; the two would otherwise each wait out a run of ten seconds.
  it("prints a running run's lines as its process prints them, then its outcome; from a clone's host it asks the server, as the user the clone remembers", async () => {
    const clone = await cloneAs(world.server.url, users.admin.login, users.admin.password, Path.join(world.dir, "alice.fossil"))
    // each line says when the process printed it (milliseconds), a second apart; twenty of them, so
    // that a watch that takes ten seconds to begin on a loaded machine still sees some printed live
    const run = await createRun("for i in $(seq 1 20); do echo \"line $i $(date +%s%3N)\"; sleep 1; done; echo done >&2; exit 4")
    await world.waitFor("the run is answered started", async () => ((await world.replies(run)).some((m) => m.kind === "started") ? true : undefined), { ms: 60_000, run })
    const watched = watchProgram(["--repository", world.repository, "--user", users.admin.login, "watch", run, "--root", world.root])
    // the clone has not pulled the run: the server's page knows it
    const far = watchProgram(["--repository", clone, "watch", run.slice(0, 16)])

    // on the node's host
    expect(await watched.exited, `ocx2 watch on the node's host: ${watched.stderr()}`).toBe(0)
    const printed = watched.lines.filter((l) => l.text.startsWith("line "))
    expect(printed.map((l) => l.text.split(" ")[1])).toEqual(Array.from({ length: 20 }, (_, i) => String(i + 1)))
    expect(watched.lines.at(-1)!.text).toMatch(new RegExp(`^run ${run}: exited 4 after [0-9.]+ s$`))
    expect(watched.stderr()).toContain("done\n")
    expect(watched.stderr()).toMatch(/\[ocx2 watch: [0-9a-f]{12} started\]/)
    // the lines came as they were printed, not at the end: each before the process printed the next
    const latencies = printed.map((l) => l.at - Number(l.text.split(" ")[2]))
    const late = printed.slice(0, -1).filter((l, i) => l.at >= Number(printed[i + 1]!.text.split(" ")[2]))
    console.log(`watch: each line from the process's echo to ocx2 watch's stdout: ${latencies.join(", ")} ms`)
    // the first lines were printed before watch began, and are given from the stream as it was kept
    expect(late.filter((l) => Number(l.text.split(" ")[2]) > printed[0]!.at)).toEqual([])
    const live = liveLatencies(printed)
    expect(live.length).toBeGreaterThan(0)
    expect(median(live), "the median latency of a line on the node's host (ms)").toBeLessThanOrEqual(300)

    // from the clone's host
    expect(await far.exited, `ocx2 watch from a clone: ${far.stderr()}`).toBe(0)
    const farPrinted = far.lines.filter((l) => l.text.startsWith("line "))
    expect(farPrinted.map((l) => l.text.split(" ")[1])).toEqual(Array.from({ length: 20 }, (_, i) => String(i + 1)))
    expect(far.lines.at(-1)!.text).toMatch(new RegExp(`^run ${run}: exited 4`))
    const farLive = liveLatencies(farPrinted)
    console.log(`watch from a clone: each line from the process's echo to ocx2 watch's stdout: ${farLive.join(", ")} ms`)
    expect(farLive.length).toBeGreaterThan(0)
    expect(median(farLive), "the median latency of a line from the clone's host (ms)").toBeLessThanOrEqual(300)
    // once Fossil has synced, the clone keeps only the hash of the password, which sign-in does not take
    await fossil(["pull", "-R", clone], users.admin.login)
    const program = (env: NodeJS.ProcessEnv = {}) =>
      ChildProcess.spawnSync(process.execPath, [Path.join(dist, "ocx2.mjs"), "--json", "--repository", clone, "watch", run], { encoding: "utf8", env: { ...process.env, ...env } })
    const hashed = program({ OCX_PASSWORD: "" })
    expect(JSON.parse(hashed.stdout).stopped.message).toMatch(/keeps only its sync hash of the password, .*OCX_PASSWORD/)
    const json = JSON.parse(program({ OCX_PASSWORD: users.admin.password }).stdout)
    expect(json.output).toMatchObject({ followed: "server", over: true, summary: { state: "ended", outcome: "exited", exit: 4 } })
    const otherUser = ChildProcess.spawnSync(process.execPath, [Path.join(dist, "ocx2.mjs"), "--json", "--repository", clone, "--user", users.builder.login, "watch", run], { encoding: "utf8" })
    expect(JSON.parse(otherUser.stdout).stopped.message).toMatch(/signs in to .* as alice, the user it remembers, not as builder/)
  }, 120_000)

  it("gives a session's deliveries and what it answers, as they happen", async () => {
    const run = await createRun("while read line; do echo \"heard: $line\"; done", { session: true, hears: ["*"], user: users.stranger.login })
    await world.waitFor("the run is answered started", async () => ((await world.replies(run)).some((m) => m.kind === "started") ? true : undefined), { ms: 60_000, run })
    const seen: Array<WatchOutput["events"][number]> = []
    const following = world.call(watch, { run, root: world.root, seconds: 60 }).then((a) => a.output!)
    void following
    await world.reply(users.admin.login, run, "hello, session")
    const answer = await waitFor(async () => {
      const got = await world.call(watch, { run, root: world.root, seconds: 0 })
      const events = got.output!.events
      return events.some((e) => e.type === "output" && /heard: .*hello, session/.test(e.text!)) ? events : undefined
    }, 60_000, 300)
    seen.push(...answer!)
    expect(seen.some((e) => e.type === "delivery" && /hello, session/.test(e.line!))).toBe(true)
    expect(seen.find((e) => e.type === "state")!.state).toBe("started")
    await world.call((await import("../../src/tools/stop.js")).stop, { run })
    const ended = await following
    expect(ended.over).toBe(true)
    expect(ended.summary.outcome).toBe("stopped")
    expect(ended.events.at(-1)).toMatchObject({ type: "end", state: "stopped" })
  }, 120_000)

  it("through MCP: ocx_watch answers within its seconds with what happened, and offset goes on from there", async () => {
    // "second" only once the first answer is in, however loaded the machine
    const run = await createRun("echo first; while [ ! -e $$workspace$$/go ]; do sleep 0.05; done; echo second", { user: users.runner.login })
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [Path.join(dist, "ocx2.mjs"), "--repository", world.repository, "--user", users.admin.login, "--mcp"],
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", USER: "root" },
      stderr: "pipe"
    })
    const client = new Client({ name: "an-agent", version: "0.0.0" })
    await client.connect(transport)
    try {
      const callWatch = async (args: Record<string, unknown>) => {
        const result = await client.callTool({ name: "ocx_watch", arguments: { run, root: world.root, ...args } }) as unknown as { structuredContent: { output: WatchOutput; stopped: unknown } }
        expect(result.structuredContent.stopped).toEqual({ reason: "completed" })
        return result.structuredContent.output
      }
      const first = await waitFor(async () => {
        const got = await callWatch({ seconds: 0.5 })
        return got.events.some((e) => e.type === "output" && e.text === "first\n") ? got : undefined
      }, 60_000, 100)
      expect(first!.followed).toBe("care directory")
      expect(first!.over).toBe(false)
      Fs.writeFileSync(Path.join(world.root, "work", run, "go"), "")
      const rest = await callWatch({ offset: first!.offset })
      expect(rest.over).toBe(true)
      const texts = rest.events.filter((e) => e.type === "output").map((e) => e.text).join("")
      expect(texts.includes("first")).toBe(first!.over)
      expect(texts).toContain("second\n")
      expect(rest.summary).toMatchObject({ state: "ended", outcome: "exited", exit: 0 })
      expect(rest.events.at(-1)).toMatchObject({ type: "end", state: "exited 0" })
    } finally {
      await client.close()
    }
  }, 120_000)

  it("without the node's care directory it follows the state in the record, and refuses a viewer who may not read the run", async () => {
    const run = await createRun("sleep 1")
    const answer = await world.call(watch, { run })
    // this test's program is no release of the root: it does not know the care directory
    expect(answer.output!.followed).toBe("record")
    expect(answer.output!.over).toBe(true)
    expect(answer.output!.events.map((e) => e.type)).toContain("end")
    const refused = await world.call(watch, { run }, { as: users.builder.login })
    expect(refused.stopped).toEqual({ reason: "refused", message: "forum posts are not yours to read here: that needs Fossil's Read Forum (2)" })
    const none = await world.call(watch, { run: "0000000000" })
    expect(none.stopped.message).toMatch(/names no run/)
  }, 120_000)

  it("on a host whose care directory it cannot read, says it follows the record only and why: on the command line and on the run page (issue 40)", async () => {
    const run = await createRun("echo hidden-output")
    await world.waitEnded(run, 90_000)
    const care = Path.join(world.root, "care")
    // an account that may not read ROOT/care: root without the capabilities that pass over a
    // file's mode (the node, with them, goes on), the care directory's mode taken away meanwhile
    const capless = (program: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv) =>
      ChildProcess.spawnSync("setpriv", ["--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search", "--", program, ...args], { encoding: "utf8", env })
    const mode = Fs.statSync(care).mode & 0o7777
    Fs.chmodSync(care, 0)
    try {
      const cli = capless(process.execPath, [Path.join(dist, "ocx2.mjs"), "--repository", world.repository, "--user", users.admin.login, "watch", run, "--root", world.root],
        { ...process.env })
      expect(cli.status, cli.stderr).toBe(0)
      expect(cli.stderr).toContain(`[ocx2 watch: following the record only (its state and reports, not its output): ${care} cannot be read here as root (EACCES): ` +
        "watch as the node's account on its host to see its output]")
      expect(cli.stdout).toMatch(new RegExp(`^run ${run}: exited 0`))
      expect(cli.stdout).not.toContain("hidden-output")
      // the run page as the server's account runs it (Fossil's CGI environment; the release's own page program)
      const page = (user: string, capabilities: string) => capless(process.execPath, [Path.join(world.root, "current", "ocx2-cgi")], {
        PATH: process.env.PATH ?? "/usr/bin:/bin", GATEWAY_INTERFACE: "CGI/1.1", REQUEST_METHOD: "GET", SCRIPT_NAME: "/ext/ocx2-cgi", PATH_INFO: "/watch",
        QUERY_STRING: `run=${run}`, HTTP_HOST: "127.0.0.1:8080", FOSSIL_USER: user, FOSSIL_CAPABILITIES: capabilities, FOSSIL_REPOSITORY: world.repository
      })
      const hers = page(users.admin.login, "s")
      expect(hers.stdout, hers.stderr).toMatch(/^Status: 200 /)
      expect(hers.stdout).toContain(`id="ocx-run-state">exited 0</span>`)
      expect(hers.stdout).toContain(`<p class="generalError ocx-record-only" id="ocx-record-only">Following the record only (its state and reports, not its output): ${care} cannot be read here as root (EACCES): ` +
        "serve the pages as the node&#39;s account")
      // a viewer without setup is told why too, without the server's path (the record's own texts are shown as written)
      const his = page(users.builder.login, "o2")
      expect(his.stdout).toContain(`id="ocx-record-only">Following the record only (its state and reports, not its output): [server path] cannot be read here as root (EACCES)`)
      expect(/id="ocx-record-only">[^<]*</.exec(his.stdout)?.[0]).not.toContain(world.root)
    } finally {
      Fs.chmodSync(care, mode)
    }
  }, 180_000)

  it("from the checkout, without --root, says it follows the record only and why; --exit-status ends 1 unless the run exited 0 (issue 40)", async () => {
    const failing = await createRun("exit 3")
    const passing = await createRun("true")
    for (const run of [failing, passing]) await world.waitEnded(run, 60_000)
    const shipped = (...args: Array<string>) =>
      ChildProcess.spawnSync(process.execPath, [Path.join(dist, "ocx2.mjs"), "--repository", world.repository, "--user", users.admin.login, "watch", ...args], { encoding: "utf8" })
    // dist/ocx2.mjs is no release's program: it cannot know the node's care directory unless told
    const plain = shipped(failing)
    expect(plain.stderr).toMatch(/^\[ocx2 watch: following the record only \(its state and reports, not its output\): no release root was named .*give --root ROOT/)
    expect(plain.stdout).toMatch(new RegExp(`^run ${failing}: exited 3`))
    expect(plain.status).toBe(0)
    expect(shipped(failing, "--exit-status").status).toBe(1)
    expect(shipped(passing, "--exit-status").status).toBe(0)
    // with its root, its output: no such word
    const rooted = shipped(failing, "--root", world.root, "--exit-status")
    expect(rooted.stderr).not.toContain("following the record only")
    expect(rooted.status).toBe(1)
  }, 120_000)
})
