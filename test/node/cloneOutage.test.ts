import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "@effect/vitest"
import { runFossil } from "../../src/fossil/Command.js"
import { handOff } from "../../src/pickup/HandOff.js"
import { readOutbox } from "../../src/watcher/Outbox.js"
import { fossil, restartServer, type RunningServer } from "../support/fossilServer.js"
import {
  closeCloneWorld, cloneUsers, type CloneWorld, makeCloneWorld, type NodeAnswer, postRun as postRunOn, repliesOf, runNode, servedRepository,
  waitForKind as waitForRunKind
} from "./cloneWorld.js"
import { eventually } from "../support/world.js"
import { pidsNaming, waitFor } from "./hookWorld.js"

// A node on another host while its server goes down and comes back (issue 13): the server is a
// real `fossil server` (the OCX CGI in its extension root), stopped and served again on the same
// port as a service manager restarts it; the clone's host runs `ocx2 node` as its timer does, with
// real watchers and bubblewrap. Every report a watcher has to send is kept in ROOT/care/RUN.outbox
// and sent once the server takes it again: each run ends with exactly one started and one ended,
// its real outcome, and its kept logs.

const users = cloneUsers

let world: CloneWorld
/** the process users of (b) and (c), beside builder's (a) */
const processUsers = ["builder-b", "builder-c"] as const
/** the server running now: the world's first, then each one restarted */
let server: RunningServer | undefined

beforeAll(async () => {
  world = await makeCloneWorld("ocx2-clone-outage-")
  server = world.server
  // lab2 may publish unversioned files: they are reports too, kept until the server takes them
  await fossil(["user", "capabilities", "lab2", "oiy", "-R", world.served])
  // process users of their own for the runs that share one outage: a process user's runs run one at a time
  for (const user of processUsers) {
    await fossil(["user", "new", user, `${user}@example.com`, `${user}-pw`, "-R", world.served])
    await fossil(["user", "capabilities", user, "oi", "-R", world.served])
  }
}, 90_000)

afterAll(() => closeCloneWorld(world, server))

/** The server goes down: its process group ended, the port closed. */
const serverDown = async () => {
  await server!.stop()
  server = undefined
  await expect(fetch(world.url + "robots.txt", { signal: AbortSignal.timeout(1000) })).rejects.toThrow()
}

/** The server comes back on the same port, as its service manager restarts it. */
const serverUp = async () => {
  server = await restartServer(world.served, world.port, { extroot: world.extroot })
  expect(server.url).toBe(world.url)
}

type Answer = NodeAnswer

/** `ocx2 --json --repository CLONE node URL FILE ...` as the timer runs it. */
const node = (args: ReadonlyArray<string> = []) => runNode(world, args)

/** The run's thread as the served repository holds it (read from its file: the server may be down). */
const threadOf = (run: string) => servedRepository(world, (r) => r.thread(run))
const replies = (run: string) => repliesOf(world, run)
const waitForKind = (run: string, kind: string, ms = 90_000) => waitForRunKind(world, run, kind, ms, 200)

/** The ci verdicts against the run on trunk, with each sender as the server received it. */
const verdictsOf = (run: string) =>
  servedRepository(world, (r) => r.tags(world.trunk)).pipe(Effect.map((tags) => tags.history.flatMap((h) =>
    h.tags.filter((t) => t.name === "ci" && (t.value ?? "").includes(run)).map((t) => ({ value: t.value, sender: h.sender })))))

const keptLogsOf = (run: string) => threadOf(run).pipe(Effect.map((thread) => thread.filter((p) => p.text.startsWith("The process exited"))))
const publicationRepliesOf = (run: string) => threadOf(run).pipe(Effect.map((thread) => thread.filter((p) => p.text.startsWith("Unversioned files:"))))
const uv = (name: string) => fossil(["uv", "cat", name, "-R", world.served]).catch(() => undefined)
/** a file the process writes, published as `as` */
const publishing = (as: string) => ({ unversioned_files: [{ at: "$$workspace$$/out.txt", as }] })

/** A run posted on the server through the forum's web form by alice. */
const postRun = (script: string, process: object = {}) =>
  postRunOn(world, script, process, { objective: "a run for lab2 while its server comes and goes", wall: "3m" })

/** A process that ends only when the test says so (a file `go` in its workspace), printing to both streams. */
const gated = (exit: number) =>
  `echo built ${exit} > $$workspace$$/out.txt; while [ ! -e $$workspace$$/go ]; do sleep 0.1; done; cat tree/hello.txt; echo the-end >&2; exit ${exit}`

const careLog = (run: string) => {
  try {
    return Fs.readFileSync(Path.join(world.root, "care", `${run}.log`), "utf8")
  } catch {
    return ""
  }
}
const logSays = (run: string, text: string | RegExp, ms = 30_000) =>
  waitFor(() => ((typeof text === "string" ? careLog(run).includes(text) : text.test(careLog(run))) ? true : undefined), ms, 100)

/** Counts the lines of the watcher's log saying the server did not answer `what`. */
const downTries = (run: string, what: string) =>
  careLog(run).split("\n").filter((l) => l.includes(`${what}`) && l.includes("the server does not answer")).length

const letGo = (run: string) => Fs.writeFileSync(Path.join(world.root, "work", run, "go"), "")

const watcherOfRun = (run: string) =>
  pidsNaming(run).filter((pid) => {
    try {
      return Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("ocx2-watcher")
    } catch {
      return false
    }
  })

const decisionOf = (answer: Answer, run: string) => answer.output?.runs.find((r) => r.run === run)?.action

describe("a node on another host while its server is down", () => {
  // each case begins with the server up, whatever the one before left
  beforeEach(async () => {
    if (server === undefined) await serverUp()
  }, 90_000)

  it.live("starts", () => Effect.gen(function*() {
    const started = yield* Effect.promise(() => node(["--check"]))
    expect(started.stopped).toEqual({ reason: "completed" })
  }), 90_000)

  // One outage for three runs, each in another state when the server goes: (a) running, its process
  // ending while the server is down; (b) not yet started, handed to its watcher once the server is
  // gone; (c) running, its watcher killed while its reports wait. Each is checked as it would be alone.
  it.live("(a) the server down when the process exits: once it is back, one started, one ended with the real outcome, the kept logs and the published file; " +
    "(b) the server down before started: the watcher waits, launching nothing, and once it is back starts the run once and ends it once; " +
    "(c) the watcher killed while its reports wait for the server: once it is back, the timer's plain call sends them", () => Effect.gen(function*() {
    const a = yield* Effect.promise(() => postRun(gated(4), { cwd: "$$workspace$$", verdict: true, ...publishing("builds/outage-a.txt") }))
    const c = yield* Effect.promise(() => postRun(gated(7), { user: processUsers[1], cwd: "$$workspace$$", verdict: true, ...publishing("builds/outage-c.txt") }))
    const answer = yield* Effect.promise(() => node())
    expect(decisionOf(answer, a), "(a) handed").toBe("handed to a watcher, which starts it")
    expect(decisionOf(answer, c), "(c) handed").toBe("handed to a watcher, which starts it")
    for (const run of [a, c]) {
      yield* waitForKind(run, "started")
      yield* Effect.promise(() => logSays(run, "launched:"))
    }
    // (b) in the clone, not handed yet
    const b = yield* Effect.promise(() => postRun("cat tree/hello.txt; echo launched >> $$workspace$$/launches; echo the-end >&2; exit 0", { user: processUsers[0] }))
    yield* Effect.promise(() => runFossil(["pull", "-R", world.clone], { user: "root" }))

    yield* Effect.promise(() => serverDown())
    letGo(a)
    letGo(c)
    // (b) handed to its watcher as the node hands it, the server gone meanwhile
    handOff({ root: world.root, repository: world.clone, nodeUser: users.lab2.login, serverUrl: world.url, passwordsFile: world.passwords }, b, {
      watcherProgram: Path.join(world.root, "current", "ocx2-watcher")
    })
    // (c) its reports wait for the server; its watcher is killed
    expect(yield* Effect.promise(() => logSays(c, "the process ended: exited 7")), "(c) its process ended").toBe(true)
    expect(yield* Effect.promise(() => logSays(c, /sending ended .*the server does not answer/, 30_000)), "(c) its reports wait").toBe(true)
    const watchersOfC = watcherOfRun(c)
    expect(watchersOfC.length, "(c) one watcher").toBe(1)
    process.kill(watchersOfC[0]!, "SIGKILL")
    yield* Effect.promise(() => waitFor(() => (pidsNaming(c).length === 0 ? true : undefined), 10_000, 50))
    const leftByC = readOutbox(Path.join(world.root, "care"), c).unsent.map((r) => r.kind)
    // (b) until its third try to read the run has failed (1 and 2 s apart): it waits, it did not crash
    expect(yield* Effect.promise(() => waitFor(() => (downTries(b, "reading the run's record") >= 3 ? true : undefined), 30_000)), "(b) three tries").toBe(true)
    const whileDownB = {
      watchers: watcherOfRun(b).length, // it waits: it did not crash
      launched: Fs.existsSync(Path.join(world.root, "work", b, "launches")),
      replies: (yield* replies(b)).length
    }
    // (a) down longer than a watcher used to try (about 6 s): it keeps trying, holding the run, its reports
    // on disk; its fourth try failing (1, 2 and 4 s apart) says it has tried for 7 s
    expect(yield* Effect.promise(() => logSays(a, "the process ended: exited 4")), "(a) its process ended").toBe(true)
    expect(yield* Effect.promise(() => logSays(a, /sending ended .*the server does not answer.*tried again in 8 s/, 30_000)), "(a) its fourth try").toBe(true)
    const whileDownA = {
      outbox: readOutbox(Path.join(world.root, "care"), a).unsent.map((r) => r.kind),
      watchers: watcherOfRun(a).length,
      kinds: (yield* replies(a)).map((m) => m.kind)
    }

    yield* Effect.promise(() => serverUp())
    // (c) the timer's plain call sends what its watcher left
    const sent = yield* Effect.promise(() => node())
    expect(sent.output?.check).toBe(false)
    const messagesOfC = yield* replies(c)
    expect(messagesOfC.map((m) => [m.kind, m.sender]), "(c) replies").toEqual([["started", "lab2"], ["ended", "lab2"]])
    expect(messagesOfC[1]!.content).toEqual({ outcome: "exited", exit: 7 })
    expect(decisionOf(sent, c)).toMatch(
      /^sent what its watcher left in its outbox: ended [0-9a-f]{12} sent; a report [0-9a-f]{12} sent; the verdict [0-9a-f]{12} sent; the unversioned file builds\/outage-c\.txt published; the reply naming the published files [0-9a-f]{12} sent$/
    )
    expect(yield* Effect.promise(() => uv("builds/outage-c.txt"))).toBe("built 7\n")
    expect((yield* publicationRepliesOf(c)).map((p) => [p.sender, p.text.includes("builds/outage-c.txt: 8 bytes, hash")])).toEqual([["lab2", true]])
    expect(yield* verdictsOf(c)).toEqual([{ value: `fail: exit 7 (against ${c})`, sender: "lab2" }])
    const logsOfC = yield* keptLogsOf(c)
    expect(logsOfC.length).toBe(1)
    expect(logsOfC[0]!.sender).toBe("lab2")
    expect(logsOfC[0]!.text).toContain("The process exited 7")
    expect(leftByC, "(c) its outbox while down").toEqual(["unversioned", "publications", "ended", "report", "verdict"])
    expect(Fs.existsSync(Path.join(world.root, "care", `${c}.outbox`))).toBe(false)

    // (a) its watcher sends its reports itself
    const messages = yield* waitForKind(a, "ended", 90_000)
    expect(messages.map((m) => [m.kind, m.sender]), "(a) replies").toEqual([["started", "lab2"], ["ended", "lab2"]])
    expect(messages[1]!.content).toEqual({ outcome: "exited", exit: 4 })
    const logs = yield* eventually(keptLogsOf(a), (logs) => logs.length > 0, 15_000)
    expect(logs?.length).toBe(1)
    expect(logs![0]!.sender).toBe("lab2")
    expect(logs![0]!.text).toContain("The process exited 4")
    expect(logs![0]!.text).toContain("the-end")
    expect(logs![0]!.text).toContain("hello from trunk")
    expect((yield* eventually(verdictsOf(a), (verdicts) => verdicts.length > 0, 15_000)).length > 0).toBe(true)
    expect(yield* verdictsOf(a)).toEqual([{ value: `fail: exit 4 (against ${a})`, sender: "lab2" }])
    expect(whileDownA, "(a) while down").toEqual({ outbox: ["unversioned", "publications", "ended", "report", "verdict"], watchers: 1, kinds: ["started"] })
    // the file, and the reply naming it
    expect(yield* Effect.promise(() => waitFor(async () => ((await uv("builds/outage-a.txt")) === "built 4\n" ? true : undefined), 15_000))).toBe(true)
    const named = yield* eventually(publicationRepliesOf(a), (named) => named.length > 0, 15_000)
    expect(named?.map((p) => [p.sender, p.text.includes("builds/outage-a.txt: 8 bytes, hash")])).toEqual([["lab2", true]])
    expect(careLog(a)).toMatch(/sending ended .*the server does not answer.*tried again in 8 s/)
    // everything sent: the outbox is gone, and the watcher with it
    expect(yield* Effect.promise(() => waitFor(() => (Fs.existsSync(Path.join(world.root, "care", `${a}.outbox`)) ? undefined : true), 10_000))).toBe(true)
    expect(yield* Effect.promise(() => waitFor(() => (watcherOfRun(a).length === 0 ? true : undefined), 10_000))).toBe(true)

    // (b) once the server is back its watcher starts the run once and ends it once
    const messagesOfB = yield* waitForKind(b, "ended", 90_000)
    expect(messagesOfB.map((m) => [m.kind, m.sender]), "(b) replies").toEqual([["started", "lab2"], ["ended", "lab2"]])
    expect(messagesOfB[1]!.content).toEqual({ outcome: "exited", exit: 0 })
    expect(Fs.readFileSync(Path.join(world.root, "work", b, "launches"), "utf8")).toBe("launched\n")
    expect(whileDownB, "(b) while down").toEqual({ watchers: 1, launched: false, replies: 0 })
    expect(downTries(b, "reading the run's record")).toBeGreaterThanOrEqual(3)
    expect((yield* eventually(keptLogsOf(b), (logs) => logs.length === 1, 15_000)).length).toBe(1)

    // the timer's next calls find nothing to do for any of them; the node starting answers none again (not lost: each has its ended)
    const again = yield* Effect.promise(() => node())
    expect(decisionOf(again, a), "(a) again").toBeUndefined()
    expect(decisionOf(again, b) ?? "ended (exited): nothing to do", "(b) again").toBe("ended (exited): nothing to do")
    expect(decisionOf(again, c), "(c) again").toBeUndefined()
    const check = yield* Effect.promise(() => node(["--check"]))
    expect(decisionOf(check, c), "(c) at the node's start").toBeUndefined()
    for (const run of [a, b, c]) expect((yield* replies(run)).map((m) => m.kind), run).toEqual(["started", "ended"])
  }), 240_000)
})
