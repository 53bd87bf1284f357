import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { supervisorFilesOf } from "../../src/root/SupervisorFiles.js"
import { addUsers, webLogin, webNewThread } from "../support/fossilServer.js"
import { pidsNaming, waitFor } from "../support/world.js"
import { closeCloneWorld, cloneUsers, type CloneWorld, makeCloneWorld, postRun, runNode, useThisBuild, waitForKind } from "./cloneWorld.js"
import {
  addNodeUsers, listenerWaiting, listenState, type RunningListener, type ServerHost, serveFromReleaseRoot, simulatedNode, startListener
} from "./fleetWorld.js"
import { dist } from "./hookWorld.js"

// The fleet's listener (ocx2-listen) on the server's host: one resident process holding every clone
// node's question until a receipt lands, where the receipt page holds each in a process of its own.
// A clone's node learns its address from the page and falls back to the page by itself while the
// listener is down; a listener restarted under waiting nodes loses none of them; a node user without
// Read is told nothing. Real fossil server, the release's programs, a real clone node and its supervisor.

let world: CloneWorld
let host: ServerHost
let listener: RunningListener | undefined
let supervisor: ChildProcess.ChildProcess | undefined

beforeAll(async () => {
  world = await makeCloneWorld("ocx2-listen-")
  useThisBuild(world, dist)
  host = await serveFromReleaseRoot(world, dist)
  expect((await runNode(world, ["--check"])).stopped).toEqual({ reason: "completed" })
}, 120_000)

afterAll(async () => {
  if (supervisor !== undefined && supervisor.exitCode === null) {
    const exited = new Promise((r) => supervisor!.once("exit", r))
    supervisor.kill("SIGTERM")
    await exited
  }
  await listener?.stop("SIGKILL")
  await closeCloneWorld(world)
})

const supervisorLog = () => {
  const log = supervisorFilesOf(world.root, world.clone, cloneUsers.lab2.login).log
  return Fs.existsSync(log) ? Fs.readFileSync(log, "utf8") : ""
}
/** What the server's host shows: the listener's state and log, and the CGI processes alive. */
const explainHost = () =>
  `listener: ${listenState(host)}\n${Fs.existsSync(Path.join(host.root, "node", "listen.log")) ? Fs.readFileSync(Path.join(host.root, "node", "listen.log"), "utf8") : ""}` +
  `${Fs.existsSync(Path.join(host.root, "listen.out")) ? Fs.readFileSync(Path.join(host.root, "listen.out"), "utf8") : ""}\nsupervisor's log:\n${supervisorLog().slice(-4000)}`

/** The page's processes (a question the page holds is one), by pid. */
const pageProcesses = () => pidsNaming(Path.join(host.root, "current", "ocx2-cgi")).filter((pid) => pid !== process.pid)

/** A run for lab2, posted on the server through its web form, answered started and ended exited 0 by lab2, each once. */
const runAnsweredOnce = Effect.gen(function*() {
  const run = yield* Effect.promise(() => postRun(world, "true", {}, { workspace: [{ step: "directory", at: "$$root$$/work/$$run$$" }] }))
  const ended = yield* waitForKind(world, run, "ended", 90_000, 200)
  expect(ended.map((m) => [m.kind, m.sender, m.kind === "ended" ? (m.content as { outcome?: string }).outcome : undefined]), explainHost())
    .toEqual([["started", "lab2", undefined], ["ended", "lab2", "exited"]])
  return run
})

describe("the fleet's listener", () => {
  it.live("a clone node holds its question at the listener, falls back to the page while it is down and comes back when it returns, losing no run", () => Effect.gen(function*() {
    listener = yield* Effect.promise(() => startListener(host, world.served))
    supervisor = ChildProcess.spawn(process.execPath, [Path.join(world.root, "current", "ocx2"), "supervise", "--node", cloneUsers.lab2.login, "--root", world.root], {
      env: { ...process.env, USER: "root" }, stdio: "ignore", detached: true
    })
    expect(yield* Effect.promise(() => waitFor(() => (supervisorLog().includes("the node on") ? true : undefined), 60_000, 100))).toBe(true)
    // the page's first answer named the listener: the node's held question is there, and no page process holds one
    expect(yield* Effect.promise(() => waitFor(async () => ((await listenerWaiting(host)) === 1 ? true : undefined), 30_000, 100)), explainHost()).toBe(true)
    expect(yield* Effect.promise(() => waitFor(() => (pageProcesses().length === 0 ? true : undefined), 30_000, 100)), explainHost()).toBe(true)
    const runs = [yield* runAnsweredOnce]

    // killed: the node's question is cut; after its tries at the listener it holds it at the page, by itself
    yield* Effect.promise(() => listener!.stop("SIGKILL"))
    listener = undefined
    runs.push(yield* runAnsweredOnce)
    expect(yield* Effect.promise(() => waitFor(() => (pageProcesses().length > 0 ? true : undefined), 40_000, 100)), `no question held at the page\n${explainHost()}`).toBe(true)
    runs.push(yield* runAnsweredOnce)

    // started again: the page's next answer names it, and the node's question goes back there
    listener = yield* Effect.promise(() => startListener(host, world.served))
    expect(yield* Effect.promise(() => waitFor(async () => ((await listenerWaiting(host)) === 1 ? true : undefined), 60_000, 200)), `not back at the listener\n${explainHost()}`).toBe(true)
    runs.push(yield* runAnsweredOnce)

    // each run answered once, with nothing more written after a while; the supervisor never failed a round
    yield* Effect.sleep("2 seconds")
    for (const run of runs) {
      const replies = yield* waitForKind(world, run, "ended", 1000)
      expect(replies.map((m) => m.kind)).toEqual(["started", "ended"])
    }
    expect(supervisorLog()).not.toContain("failed")
  }), 420_000)

  it.live("a listener restarted while 50 nodes wait loses none of them: each is told of a receipt that landed while it was down, and of one after", () => Effect.gen(function*() {
    listener ??= yield* Effect.promise(() => startListener(host, world.served))
    const users = yield* Effect.promise(() => addNodeUsers(world.served, "sim", 50, "o"))
    const nodes = users.map((user) => simulatedNode(world.url, user))
    yield* Effect.addFinalizer(() => Effect.sync(() => nodes.forEach((n) => n.stop())))
    // (beside the real node's question, if the case before left its supervisor running)
    const real = (yield* Effect.promise(() => listenerWaiting(host))) ?? 0
    expect(yield* Effect.promise(() => waitFor(async () => ((await listenerWaiting(host)) === real + 50 ? true : undefined), 120_000, 200)), explainHost()).toBe(true)
    const before = Math.max(...nodes.map((n) => n.seen!))

    // a SIGTERM answers each question with what is known: each asks again at once, and tries again until it is back
    yield* Effect.promise(() => listener!.stop("SIGTERM"))
    const alice = yield* Effect.promise(() => webLogin(world.url, cloneUsers.alice.login, cloneUsers.alice.password))
    yield* Effect.promise(() => webNewThread({ repository: world.served }, alice, { title: "while the listener is down", text: "a receipt" }))
    listener = yield* Effect.promise(() => startListener(host, world.served))
    const toldOf = (n: number) => nodes.filter((node) => node.told.some(([newest]) => newest > n))
    expect(yield* Effect.promise(() => waitFor(() => (toldOf(before).length === 50 ? true : undefined), 60_000, 100)),
      `told of the receipt while it was down: ${toldOf(before).length} of 50\n${explainHost()}`).toBe(true)

    // and all of them wait there again, and are told of the next receipt
    expect(yield* Effect.promise(() => waitFor(async () => ((await listenerWaiting(host)) === real + 50 ? true : undefined), 60_000, 100)), explainHost()).toBe(true)
    const middle = Math.max(...nodes.map((n) => n.seen!))
    yield* Effect.promise(() => webNewThread({ repository: world.served }, alice, { title: "after it is back", text: "another receipt" }))
    expect(yield* Effect.promise(() => waitFor(() => (toldOf(middle).length === 50 ? true : undefined), 30_000, 100)),
      `told of the receipt after the restart: ${toldOf(middle).length} of 50\n${explainHost()}`).toBe(true)
    expect(nodes.reduce((n, node) => n + node.failures, 0)).toBe(0)
  }).pipe(Effect.scoped), 300_000)

  it.live("a node user without Read is told nothing and not held; a forged cookie signs in nobody", () => Effect.gen(function*() {
    listener ??= yield* Effect.promise(() => startListener(host, world.served))
    // Read only where given: a signed-in user holds nobody's and anonymous's capabilities too (Fossil's default gives nobody o)
    yield* Effect.promise(() => addUsers(world.served, [], [{ login: "nobody", capabilities: "" }, { login: "anonymous", capabilities: "" }]))
    const [blind] = yield* Effect.promise(() => addNodeUsers(world.served, "blind", 1, "i"))
    const session = yield* Effect.promise(() => webLogin(world.url, blind!.login, blind!.password))
    const lab2 = yield* Effect.promise(() => webLogin(world.url, cloneUsers.lab2.login, cloneUsers.lab2.password))
    const address = `http://127.0.0.1:${host.port}/${Object.keys(listener!.state.repositories)[0]}/receipt`
    const ask = (cookie: string, body: object) =>
      Effect.promise(async () => {
        const began = Date.now()
        const response = await fetch(address, { method: "POST", headers: { Cookie: cookie, "Content-Type": "application/json" }, body: JSON.stringify(body) })
        return { status: response.status, answer: await response.json() as { stopped: { reason: string }; output?: Record<string, unknown> }, ms: Date.now() - began }
      })
    // lab2 (o) is told the newest number and what arrived
    const told = yield* ask(lab2.cookie, { newer_than: 0, wait: 0, arrived: true })
    expect(told.answer.output?.["newest"]).toBeGreaterThan(0)
    expect((told.answer.output?.["arrived"] as { receipts: Array<unknown> }).receipts.length).toBeGreaterThan(0)
    const newest = told.answer.output!["newest"] as number
    // the user without Read: no number, nothing arrived, and not held (a question lab2 would wait 5 s on)
    for (const body of [{ newer_than: 0, wait: 0, arrived: true }, { newer_than: newest, wait: 5, arrived: true }]) {
      const blindAnswer = yield* ask(session.cookie, body)
      expect(blindAnswer.status).toBe(200)
      expect(blindAnswer.answer).toEqual({ tool: "receipt", operations: [], stopped: { reason: "completed" }, output: { receipts: [] } })
      expect(blindAnswer.ms).toBeLessThan(4000)
    }
    // a cookie of the right name with lab2's login and a made-up hash is nobody, who holds nothing here
    const [name] = lab2.cookie.split("=")
    const forged = yield* ask(`${name}=${encodeURIComponent(`0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF01/x/${cloneUsers.lab2.login}`)}`, { newer_than: 0, wait: 0, arrived: true })
    expect(forged.answer.output).toEqual({ receipts: [] })
    // and lab2's own question is held while nothing arrives
    const held = yield* ask(lab2.cookie, { newer_than: newest, wait: 2, arrived: true })
    expect(held.answer.output?.["newest"]).toBe(newest)
    expect(held.ms).toBeGreaterThanOrEqual(1900)
  }), 120_000)
})
