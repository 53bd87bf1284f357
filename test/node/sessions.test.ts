import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { Repository } from "../../services/Repository.js"
import { cursorFileOf, writeCursor } from "../../src/root/HookFiles.js"
import { writeMessage } from "../../src/protocol/Envelope.js"
import { run as runTool } from "../../src/tools/run.js"
import { status } from "../../src/tools/status.js"
import { addUsers, cloneAs, fossil, webEdit, webEditTicket, webLogin, webNewThread, webNewTicket, webReply, type WebSession } from "../support/fossilServer.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { eventually } from "../support/world.js"
import { closeHookWorld, makeHookedWorld, waitFor, type HookWorld } from "./hookWorld.js"

// Sessions end to end (2.10, 2.11, 2.13; the second example of 2.19 made concrete): a real fossil
// server in fast mode calls the hook on each receipt; the node's rounds append what a session is
// given to its inbox, and its watcher gives each line to the process, which writes it to a file.
// The cases run side by side, each session with a process user of its own (a node keeps one run per
// process user): most of their time is the server's poller's second before a reply reaches a round,
// which they then wait out together, and a round reads what arrived for all of them at once.

let world: HookWorld
let alice: WebSession
let rita: WebSession
let mallory: WebSession
beforeAll(async () => {
  const made = await makeHookedWorld()
  world = made.world
  expect(made.installed.stopped).toEqual({ reason: "completed" })
  alice = await webLogin(world.server.url, users.admin.login, users.admin.password)
  rita = await webLogin(world.server.url, users.runner.login, users.runner.password)
  mallory = await webLogin(world.server.url, users.stranger.login, users.stranger.password)
  await addUsers(world.repository, Object.values(processUsers).map((login) => ({ login, capabilities: "oi", password: `${login}-pw` })))
  // Fossil makes the forum's table with the repository's first post: the cases' first posts at once
  // would race to make it
  await webNewThread(world.server, alice, { title: "the forum", text: "A first post, before the cases' own." })
}, 120_000)
afterAll(() => closeHookWorld(world))

/** each case's session runs as a process user of its own, so that the cases run at once */
const processUsers = {
  feed: "session-feed", ticket: "session-ticket", manual: "session-manual", terminal: "session-terminal", start: "session-start"
} as const

/** Each line the process reads, appended to $$workspace$$/lines. */
const recordLines = "while IFS= read -r line; do printf '%s\\n' \"$line\" >> $$workspace$$/lines; done"

const sessionRun = (script: string, process: object) =>
  shellRun(world, script, { session: true, hears: [users.admin.login, users.runner.login], ...process })

const linesOf = (run: string): ReadonlyArray<Record<string, unknown>> => {
  try {
    return Fs.readFileSync(Path.join(world.root, "work", run, "lines"), "utf8").trim().split("\n").filter((l) => l !== "").map((l) => JSON.parse(l))
  } catch {
    return []
  }
}

const waitLines = (run: string, count: number, ms = 60_000) =>
  Effect.promise(() => waitFor(() => (linesOf(run).length >= count ? linesOf(run) : undefined), ms)).pipe(Effect.map((lines) => lines ?? linesOf(run)))

const reply = (as: WebSession, to: string, text: string) => webReply(world.server, as, { to, text })

const endedOf = (run: string) =>
  Effect.promise(() => world.waitEnded(run, 90_000)).pipe(Effect.map((replies) => replies.filter((m) => m.kind === "ended").map((m) => m.content)))

describe.concurrent("a session fed what its thread is told", () => {
  it.live("gives heard posts in order once each, an edit, and a check-in on trunk; not others', its own, messages, or another branch's", () => Effect.gen(function*() {
    const run = yield* Effect.promise(() => webNewThread(world.server, alice, { title: "a session", text: world.runText(sessionRun(recordLines, { user: processUsers.feed, checkins: ["trunk"] })) }))
    const [first] = yield* waitLines(run, 1)
    expect(first).toEqual({ run, objective: "a test run" })
    // status shows the session in care, with its started
    const shown = yield* Effect.promise(() => world.call(status, { root: world.root }))
    const started = (yield* Effect.promise(() => world.replies(run))).find((m) => m.kind === "started")!.hash
    expect(shown.output?.care?.sessions).toContainEqual({ run, processUser: processUsers.feed, started })

    const one = yield* Effect.promise(() => reply(alice, run, "the first question"))
    yield* Effect.promise(() => reply(mallory, run, "mallory is not heard"))
    const two = yield* Effect.promise(() => reply(rita, run, "rita asks too"))
    yield* Effect.promise(() => reply(alice, run, `a message is never given\n\n\`\`\`json\n{"ocx": 3, "re": "${run}"}\n\`\`\`\n`))
    yield* Effect.promise(() => world.reply(processUsers.feed, run, "the session's own user writes this"))
    const edit = yield* Effect.promise(() => webEdit(world.server, alice, { of: one, text: "the first question, edited" }))
    // a post in another thread is not where the session is
    yield* Effect.promise(() => webNewThread(world.server, alice, { title: "elsewhere", text: "another thread" }))
    // a check-in on trunk, and one on another branch, pushed from alice's clone
    const clone = yield* Effect.promise(() => cloneAs(world.server.url, users.admin.login, users.admin.password, Path.join(world.dir, "session-clone.fossil")))
    const checkout = Path.join(world.dir, "session-checkout")
    Fs.mkdirSync(checkout)
    yield* Effect.promise(() => fossilIn(checkout, ["open", clone]))
    Fs.writeFileSync(Path.join(checkout, "more.txt"), "more\n")
    yield* Effect.promise(() => fossilIn(checkout, ["add", "more.txt"]))
    yield* Effect.promise(() => fossilIn(checkout, ["commit", "-m", "more on trunk", "--no-warnings"]))
    Fs.writeFileSync(Path.join(checkout, "more.txt"), "elsewhere\n")
    yield* Effect.promise(() => fossilIn(checkout, ["commit", "-m", "on a branch", "--branch", "side", "--no-warnings"]))
    yield* Effect.promise(() => fossilIn(checkout, ["push"]))
    const last = yield* Effect.promise(() => reply(alice, run, "the last question"))

    const lines = yield* waitLines(run, 6)
    yield* Effect.sleep(1000) // nothing more comes
    const given = linesOf(run)
    expect(given.length).toBe(6)
    expect(given[1]).toEqual({ post: one, from: users.admin.login, text: "the first question" })
    expect(given[2]).toEqual({ post: two, from: users.runner.login, text: "rita asks too" })
    expect(given[3]).toEqual({ post: edit, from: users.admin.login, text: "the first question, edited" })
    expect(given[4]).toMatchObject({ branch: "trunk", from: users.admin.login, comment: "more on trunk" })
    expect(given[4]!["checkin"]).toMatch(/^[0-9a-f]{40,64}$/)
    expect(given[5]).toEqual({ post: last, from: users.admin.login, text: "the last question" })
    expect(lines.length).toBe(6)
    const log = Fs.readFileSync(Path.join(world.root, "care", `${run}.log`), "utf8")
    expect(log.match(/gave /g)?.length).toBe(5)

    // a round that died after appending and before moving its cursor: the next reads the same
    // arrivals again, and gives none of them twice
    const hookLog = Path.join(world.root, "node", "hook.log")
    const roundsFrom = (at: number) => Fs.readFileSync(hookLog).subarray(at).toString("utf8").split("\n").flatMap((l) => {
      try {
        return [JSON.parse(l) as { from?: { rcvid: number; rid: number }; did?: Array<string> }]
      } catch {
        return [] // the line a round is writing now
      }
    })
    const firstDelivery = roundsFrom(0).find((r) => r.did?.some((d) => d.startsWith(`${run}: `) && / to its inbox$/.test(d)))
    expect(firstDelivery?.from).toBeDefined()
    // a round the server's poller started before the cursor was set back may move it on again when
    // it ends: set back until a round has read the run's arrivals again (the one run here, or one the
    // poller started meanwhile)
    let reread = false
    for (let attempt = 0; attempt < 5 && !reread; attempt++) {
      const at = Fs.statSync(hookLog).size
      writeCursor(cursorFileOf(world.root, world.repository, users.node.login), firstDelivery!.from!)
      yield* Effect.promise(() => new Promise((resolve) => ChildProcess.spawn(Path.join(world.root, "ocx2-hook"), ["--log", hookLog, world.repository], { stdio: "ignore" }).once("exit", resolve)))
      reread = roundsFrom(at).some((r) => r.did?.includes(`${run}: 0 deliveries to its inbox`) === true)
    }
    expect(reread, "a round read the run's arrivals again and appended none of them").toBe(true)
    yield* Effect.sleep(1000)
    expect(linesOf(run).length).toBe(6)

    yield* Effect.promise(() => world.reply(users.admin.login, run, writeMessage({ ocx: 2, re: run, stop: {} }, "Stop it.")))
    expect(yield* endedOf(run)).toEqual([{ outcome: "stopped" }])
    expect(Fs.existsSync(Path.join(world.root, "care", `${run}.session`))).toBe(false)
  }), 180_000)

  it.live("a session in a ticket is given the changes to its ticket by heard users", () => Effect.gen(function*() {
    const ticket = yield* Effect.promise(() => webNewTicket(alice, { title: "a session in a ticket", icomment: world.runText(sessionRun(recordLines, { user: processUsers.ticket })) }))
    const run = yield* Effect.promise(() => waitFor(async () => {
      const out = await fossil(["sql", "-R", world.repository, `SELECT b.uuid FROM ticketchng c JOIN blob b ON b.rid = c.tkt_rid JOIN ticket t ON t.tkt_id = c.tkt_id WHERE t.tkt_uuid = '${ticket}' ORDER BY c.tkt_rid LIMIT 1`])
      return out.trim().replace(/'/g, "") || undefined
    }, 10_000))
    expect(run).toMatch(/^[0-9a-f]{40,64}$/)
    yield* waitLines(run!, 1)
    yield* Effect.promise(() => webEditTicket(mallory, { ticket, icomment: "mallory is not heard" }))
    yield* Effect.promise(() => webEditTicket(rita, { ticket, icomment: "rita comments" }))
    const lines = yield* waitLines(run!, 2)
    yield* Effect.sleep(1000)
    expect(linesOf(run!).length).toBe(2)
    expect(lines[1]).toMatchObject({ ticket, from: users.runner.login, text: "rita comments" })
    expect(lines[1]!["change"]).toMatch(/^[0-9a-f]{40,64}$/)
    yield* Effect.promise(() => webEditTicket(alice, { ticket, icomment: writeMessage({ ocx: 2, re: run!, stop: {} }, "Stop it.") }))
    const careLog = Path.join(world.root, "care", `${run}.log`)
    expect(yield* Effect.promise(() => waitFor(() => (/wrote ended stopped/.test(Fs.readFileSync(careLog, "utf8")) ? true : undefined), 20_000))).toBe(true)
  }), 120_000)

  it.live("a manual session is given only what arrives after its started", () => Effect.gen(function*() {
    const run = yield* Effect.promise(() => webNewThread(world.server, alice, { title: "a manual session", text: world.runText(sessionRun(recordLines, { user: processUsers.manual, manual: true })) }))
    yield* Effect.sleep(500)
    yield* Effect.promise(() => reply(alice, run, "before it started"))
    yield* Effect.sleep(1000)
    const started = yield* Effect.promise(() => world.call(runTool, { run }))
    expect(started.stopped).toEqual({ reason: "completed" })
    yield* waitLines(run, 1)
    const after = yield* Effect.promise(() => reply(alice, run, "after it started"))
    const lines = yield* waitLines(run, 2)
    yield* Effect.sleep(1000)
    expect(linesOf(run)).toEqual([lines[0], { post: after, from: users.admin.login, text: "after it started" }])
    yield* Effect.promise(() => world.reply(users.admin.login, run, writeMessage({ ocx: 2, re: run, stop: {} }, "Stop it.")))
    expect(yield* endedOf(run)).toEqual([{ outcome: "stopped" }])
  }), 180_000)
})

describe.concurrent("a session on a terminal", () => {
  it.live("has its deliveries typed in, one line each", () => Effect.gen(function*() {
    const script = `stty -echo; ${recordLines}`
    const run = yield* Effect.promise(() => webNewThread(world.server, alice, { title: "a session on a terminal", text: world.runText(sessionRun(script, { user: processUsers.terminal, terminal: true })) }))
    const [first] = yield* waitLines(run, 1)
    expect(first).toEqual({ run, objective: "a test run" })
    const long = "a long line ".repeat(500).trim() // past what a terminal's line holds at once
    const one = yield* Effect.promise(() => reply(alice, run, long))
    const two = yield* Effect.promise(() => reply(rita, run, "and a short one"))
    const lines = yield* waitLines(run, 3)
    expect(lines.slice(1)).toEqual([
      { post: one, from: users.admin.login, text: long },
      { post: two, from: users.runner.login, text: "and a short one" }
    ])
    yield* Effect.promise(() => world.reply(users.admin.login, run, writeMessage({ ocx: 2, re: run, stop: {} }, "Stop it.")))
    expect(yield* endedOf(run)).toEqual([{ outcome: "stopped" }])
  }), 180_000)
})

describe.concurrent("deliveries: start", () => {
  it.live("runs nothing until a delivery, then one process per delivery, one at a time, each reading the first line and its own; a stop ends it stopped", () => Effect.gen(function*() {
    // each process records what it read and whether another was running at the same time
    const script = [
      "w=$$workspace$$; mkdir -p $w/got",
      "if ! mkdir $w/busy 2>/dev/null; then echo overlap >> $w/overlaps; fi",
      "n=$(ls $w/got | wc -l); cat > $w/got/$n.part; mv $w/got/$n.part $w/got/$n",
      "sleep 0.3; rmdir $w/busy; echo \"done $n\" >&2"
    ].join("; ")
    const run = yield* Effect.promise(() => webNewThread(world.server, alice, { title: "a session per post", text: world.runText(sessionRun(script, { user: processUsers.start, deliveries: "start" })) }))
    const got = Path.join(world.root, "work", run, "got")
    const files = () => (Fs.existsSync(got) ? Fs.readdirSync(got).filter((f) => !f.endsWith(".part")).length : 0)
    expect(yield* Effect.promise(() => waitFor(async () => ((await world.replies(run)).some((m) => m.kind === "started") ? true : undefined), 90_000))).toBe(true)
    yield* Effect.sleep(1000)
    expect(files()).toBe(0) // started, and nothing launched before a delivery
    const posts: Array<string> = []
    for (const text of ["one", "two", "three"]) posts.push(yield* Effect.promise(() => reply(alice, run, text)))
    yield* Effect.promise(() => waitFor(() => (files() >= 3 ? true : undefined), 30_000))
    yield* Effect.sleep(800)
    const read = [0, 1, 2].map((n) => Fs.readFileSync(Path.join(got, String(n)), "utf8").trim().split("\n").map((l) => JSON.parse(l)))
    for (const [i, text] of ["one", "two", "three"].entries()) {
      expect(read[i]).toEqual([{ run, objective: "a test run" }, { post: posts[i], from: users.admin.login, text }])
    }
    expect(Fs.existsSync(Path.join(world.root, "work", run, "overlaps"))).toBe(false)
    expect(files()).toBe(3)
    expect((yield* Effect.promise(() => world.replies(run))).filter((m) => m.kind === "ended")).toEqual([])
    // each process's kept logs: a reply of its own, and the log files rewritten for each
    const byNode = (thread: ReadonlyArray<{ readonly sender?: string | undefined; readonly text: string }>) =>
      thread.filter((p) => p.sender === users.node.login && /```stderr\ndone \d\n```/.test(p.text))
    const kept = byNode(yield* eventually(
      Effect.flatMap(Repository, (r) => r.thread(run)).pipe(Effect.provide(FossilRepository.layer({ path: world.repository }))),
      (thread) => byNode(thread).length >= 3,
      10_000
    ))
    expect(kept.map((p) => /done (\d)/.exec(p.text)![1])).toEqual(["0", "1", "2"])
    expect(Fs.readFileSync(Path.join(world.root, "work", run, "stderr.log"), "utf8")).toBe("done 2\n")
    yield* Effect.promise(() => world.reply(users.admin.login, run, writeMessage({ ocx: 2, re: run, stop: {} }, "Stop it.")))
    expect(yield* endedOf(run)).toEqual([{ outcome: "stopped" }])
  }), 180_000)
})

const fossilIn = async (cwd: string, args: ReadonlyArray<string>) => {
  const { runFossil } = await import("../../src/fossil/Command.js")
  const r = await runFossil(args, { user: users.admin.login, cwd })
  if (r.code !== 0) throw new Error(`fossil ${args.join(" ")}: ${r.stderr}${r.stdout}`)
  return r.stdout
}
