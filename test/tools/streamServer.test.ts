import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { create } from "../../src/tools/create.js"
import { hook } from "../../src/tools/hook.js"
import type { WatchOutput } from "../../src/tools/watch.js"
import { releasePaths } from "../../src/release/ReleasePaths.js"
import { runningServer } from "../../src/follow/StreamServer.js"
import { signGrant } from "../../src/follow/StreamToken.js"
import { cloneAs, fossil, webLogin } from "../support/fossilServer.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { closeHookWorld, dist, makeHookWorld, type HookWorld, waitFor } from "../node/hookWorld.js"

// The run page's stream server forgets a reader whose right is taken (issue 37, item 5): it asks
// the served repository for the viewer's capabilities when a stream opens and again every
// `recheck` seconds (here 0.3: ROOT/settings/stream), its token is good for one run, one
// connection and two minutes, only the Fossil server's own origin may read it cross-origin, and
// it listens on loopback unless told. The real Fossil server, its pages, and the stream server as
// the page starts it.

let world: HookWorld
const RECHECK_SECONDS = 0.3

const waitForGo = "while [ ! -e $$workspace$$/go ]; do sleep 0.05; done"
const letGo = (run: string) => Fs.writeFileSync(Path.join(world.root, "work", run, "go"), "")

const createRun = async (script: string) => {
  const { process: base, objective: _objective, ...rest } = shellRun(world, script)
  const answer = await world.call(create, { title: "a run to follow", node: users.node.login, objective: "followed", fields: { ...rest, process: base } })
  expect(answer.stopped).toEqual({ reason: "completed" })
  return answer.output!.run!
}

/** A run that prints a line and then waits for the test to let it go. */
const startedRun = async () => {
  const run = await createRun(`echo first; ${waitForGo}; echo last`)
  await world.waitFor("the run is answered started", async () => ((await world.replies(run)).some((m) => m.kind === "started") ? true : undefined), { ms: 90_000, run })
  return run
}

/** The run page's live stream for the user: its URL and token, as the page gives them. */
const liveFor = async (user: { readonly login: string; readonly password: string }, run: string) => {
  const session = await webLogin(world.server.url, user.login, user.password)
  const answer = await (await fetch(`${world.server.url}ext/ocx2-cgi/watch?run=${run}&format=json`, { headers: { cookie: session.cookie } })).json() as { output?: WatchOutput; stopped: unknown }
  expect(answer.output?.live, JSON.stringify(answer.stopped)).toBeDefined()
  return { url: `http://127.0.0.1${answer.output!.live!.url}`, token: answer.output!.live!.token }
}

const withToken = (token: string, headers: Record<string, string> = {}) => ({ headers: { authorization: `Bearer ${token}`, ...headers } })

/** The server-sent events of a stream as they arrive, and when it ended. */
const eventsOf = (response: Response) => {
  const events: Array<{ readonly event: string; readonly data: string }> = []
  let buffered = ""
  const ended = (async () => {
    const decoder = new TextDecoder()
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffered += decoder.decode(chunk, { stream: true })
      for (let end = buffered.indexOf("\n\n"); end >= 0; end = buffered.indexOf("\n\n")) {
        const block = buffered.slice(0, end)
        buffered = buffered.slice(end + 2)
        const event = /^event: (.*)$/m.exec(block)?.[1]
        const data = /^data: (.*)$/m.exec(block)?.[1]
        if (event !== undefined && data !== undefined) events.push({ event, data })
      }
    }
    return Date.now()
  })()
  return { events, ended }
}

const writeSettings = (settings: object) => {
  Fs.mkdirSync(releasePaths(world.root).settings, { recursive: true })
  Fs.writeFileSync(Path.join(releasePaths(world.root).settings, "stream"), JSON.stringify(settings))
}

const capabilitiesOf = async (login: string) => (await fossil(["user", "capabilities", login, "-R", world.repository])).trim()
const setCapabilities = (login: string, caps: string) => fossil(["user", "capabilities", login, caps, "-R", world.repository])

beforeAll(async () => {
  world = await makeHookWorld({ pages: true })
  // no host: the default is what is tested
  writeSettings({ recheck: RECHECK_SECONDS })
  expect((await world.call(hook, { node: users.node.login, root: world.root })).stopped.reason).toBe("completed")
}, 120_000)

afterAll(async () => {
  const server = world === undefined ? undefined : runningServer(world.root)
  if (server !== undefined) process.kill(server.pid, "SIGTERM")
  await closeHookWorld(world)
})

/** Follows the run as `user` until its first line, takes `revoke`, and answers how long the stream went on after it. */
const cutAfter = async (user: { readonly login: string; readonly password: string }, run: string, revoke: () => Promise<unknown>) => {
  const live = await liveFor(user, run)
  const response = await fetch(live.url.replace(/offset=\d+/, "offset=0"), withToken(live.token))
  if (response.status !== 200) throw new Error(`the stream server answered ${response.status}: ${await response.text()}`)
  const stream = eventsOf(response)
  await world.waitFor("the stream's first output event", () => (stream.events.some((e) => e.event === "output" && e.data.includes("first")) ? true : undefined), { ms: 90_000, run })
  await revoke()
  const revoked = Date.now()
  const ended = await Promise.race([stream.ended, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 20_000))])
  return { after: ended === undefined ? undefined : ended - revoked, events: stream.events }
}

describe("the stream server", () => {
  it("cuts off a reader whose Read Forum is taken away mid-stream, within the recheck period", async () => {
    const run = await startedRun()
    const before = await capabilitiesOf(users.runner.login)
    expect(before).toContain("2")
    try {
      const cut = await cutAfter(users.runner, run, () => setCapabilities(users.runner.login, before.replace("2", "")))
      console.log(`stream server: a reader who lost Read Forum was cut off ${cut.after} ms after (recheck every ${RECHECK_SECONDS * 1000} ms)`)
      expect(cut.after, "the stream went on after the reader lost Read Forum").toBeDefined()
      // a check comes within one period; the rest is the machine's load
      expect(cut.after!).toBeLessThan(RECHECK_SECONDS * 1000 + 10_000)
      expect(cut.events.find((e) => e.event === "refused")?.data).toMatch(/may not read forum posts here \(Read Forum, 2\)/)
      expect(cut.events.some((e) => e.event === "end")).toBe(false)
      // a user removed is cut off the same way
      await setCapabilities(users.runner.login, before)
      const removed = await cutAfter(users.runner, run, () => fossil(["sql", "-R", world.repository, `DELETE FROM user WHERE login = '${users.runner.login}'`]))
      expect(removed.after, "the stream went on after the user was removed").toBeDefined()
      expect(removed.events.find((e) => e.event === "refused")?.data).toMatch(/no longer in the repository/)
    } finally {
      if ((await fossil(["sql", "-R", world.repository, `SELECT count(*) FROM user WHERE login = '${users.runner.login}'`])).trim() === "0") {
        await fossil(["user", "new", users.runner.login, "", users.runner.password, "-R", world.repository])
      }
      await setCapabilities(users.runner.login, before)
      letGo(run)
    }
  }, 180_000)

  it("cuts off a reader who read through nobody's capabilities when nobody loses Read Forum", async () => {
    const run = await startedRun()
    const nobody = await capabilitiesOf("nobody")
    // builder cannot read the forum on their own: only through what nobody gives everyone
    expect(await capabilitiesOf(users.builder.login)).not.toContain("2")
    await setCapabilities("nobody", `${nobody}2`)
    try {
      const cut = await cutAfter(users.builder, run, () => setCapabilities("nobody", nobody))
      expect(cut.after, "the stream went on after nobody lost Read Forum").toBeDefined()
      expect(cut.events.find((e) => e.event === "refused")?.data).toMatch(/builder may not read forum posts here/)
    } finally {
      await setCapabilities("nobody", nobody)
      letGo(run)
    }
  }, 180_000)

  it("takes a token for its one run, for one connection, within minutes", async () => {
    const run = await startedRun()
    const other = await createRun("true")
    try {
      const live = await liveFor(users.stranger, run)
      const grant = JSON.parse(Buffer.from(live.token.split(".")[0]!, "base64url").toString("utf8")) as { expires: number; nonce: string }
      expect(grant.expires - Date.now(), "the token's lifetime").toBeLessThanOrEqual(5 * 60_000)
      // run A's token does not follow run B
      expect((await fetch(live.url.replace(run, other), withToken(live.token))).status).toBe(403)
      const first = await fetch(live.url, withToken(live.token))
      expect(first.status).toBe(200)
      await first.body?.cancel()
      // spent by its connection
      const again = await fetch(live.url, withToken(live.token))
      expect(again.status).toBe(403)
      expect(await again.text()).toMatch(/used already/)
      // one the node signed, for this run, but expired
      const secret = Fs.readFileSync(Path.join(releasePaths(world.root).node, "stream.secret"))
      const body = JSON.parse(Buffer.from(live.token.split(".")[0]!, "base64url").toString("utf8"))
      const expired = signGrant(secret, { ...body, nonce: "an expired one", expires: Date.now() - 1000 })
      const refused = await fetch(live.url, withToken(expired))
      expect(refused.status).toBe(403)
      expect(await refused.text()).toMatch(/expired/)
      // the token carried in the URL (a browser's EventSource) is taken once too, and never written to the server's log
      const fresh = await liveFor(users.stranger, run)
      const inUrl = await fetch(`${fresh.url}&token=${encodeURIComponent(fresh.token)}`)
      expect(inUrl.status).toBe(200)
      await inUrl.body?.cancel()
      expect((await fetch(`${fresh.url}&token=${encodeURIComponent(fresh.token)}`)).status).toBe(403)
      expect(Fs.readFileSync(Path.join(releasePaths(world.root).node, "stream.log"), "utf8")).not.toContain(fresh.token.split(".")[1]!)
      // a stream server started again does not know what the one before spent: it takes no token signed before it started
      const unspent = await liveFor(users.stranger, run)
      const before = runningServer(world.root)!
      process.kill(before.pid, "SIGTERM")
      await world.waitFor("the stream server is gone from ROOT", () => (runningServer(world.root) === undefined ? true : undefined), { ms: 30_000 })
      const next = await liveFor(users.stranger, run)
      const older = await fetch(next.url, withToken(unspent.token))
      expect(older.status).toBe(403)
      expect(await older.text()).toMatch(/older than this stream server/)
    } finally {
      letGo(run)
    }
  }, 180_000)

  it("lets only the Fossil server's own origin read the stream cross-origin", async () => {
    const run = await startedRun()
    try {
      const own = new URL(world.server.url).origin
      const first = await liveFor(users.stranger, run)
      const foreign = await fetch(first.url, withToken(first.token, { origin: "https://evil.example" }))
      expect(foreign.status).toBe(200)
      expect(foreign.headers.get("access-control-allow-origin")).toBeNull()
      await foreign.body?.cancel()
      const live = await liveFor(users.stranger, run)
      const ours = await fetch(live.url, withToken(live.token, { origin: own }))
      expect(ours.status).toBe(200)
      expect(ours.headers.get("access-control-allow-origin")).toBe(own)
      await ours.body?.cancel()
    } finally {
      letGo(run)
    }
  }, 180_000)

  it("listens on loopback unless ROOT/settings/stream says otherwise", async () => {
    const run = await startedRun()
    try {
      await liveFor(users.stranger, run)
      const server = runningServer(world.root)!
      expect(Fs.readFileSync(Path.join(releasePaths(world.root).node, "stream.log"), "utf8")).toMatch(new RegExp(`listens on 127\\.0\\.0\\.1:${server.port}\\n`))
      // from any other address of this host it cannot be reached
      const others = Object.values(Os.networkInterfaces()).flat().filter((a) => a !== undefined && !a.internal && a.family === "IPv4").map((a) => a!.address)
      for (const address of others) {
        const outcome = await new Promise<string>((resolve) => {
          const socket = Net.connect({ host: address, port: server.port })
          socket.once("connect", () => { socket.destroy(); resolve("connected") })
          socket.once("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message))
        })
        expect(outcome, `the stream server at ${address}:${server.port}`).toBe("ECONNREFUSED")
      }
      console.log(`stream server: listens on 127.0.0.1, refused at ${others.join(", ") || "(no other address on this host)"}`)
    } finally {
      letGo(run)
    }
  }, 180_000)

  it("from a clone's host where the stream server cannot be reached (loopback), watch follows the run through its page", async () => {
    const clone = await cloneAs(world.server.url, users.admin.login, users.admin.password, Path.join(world.dir, "stream-alice.fossil"))
    const run = await startedRun()
    // the page names a stream nobody can reach, as a loopback server is from another host
    writeSettings({ recheck: RECHECK_SECONDS, url: "http://127.0.0.1:1" })
    try {
      const child = ChildProcess.spawn(process.execPath, [Path.join(dist, "ocx2.mjs"), "--repository", clone, "watch", run], { stdio: ["ignore", "pipe", "pipe"] })
      let stdout = ""
      let stderr = ""
      child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
      child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
      const exited = new Promise<number | null>((resolve) => child.once("exit", resolve))
      expect(await waitFor(() => (stdout.includes("first\n") ? true : undefined), 90_000), stderr).toBe(true)
      letGo(run)
      expect(await exited, stderr).toBe(0)
      expect(stdout.split("\n").filter((l) => l === "first" || l === "last")).toEqual(["first", "last"])
      expect(stdout).toMatch(new RegExp(`run ${run}: exited 0`))
    } finally {
      writeSettings({ recheck: RECHECK_SECONDS })
      letGo(run)
    }
  }, 180_000)
})
