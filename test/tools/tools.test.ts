import { afterAll, beforeAll, describe, expect, it, vi } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Path from "node:path"
import * as FossilRepository from "../../layers/FossilRepository.js"
import type { RepositoryService } from "../../services/Repository.js"
import { runFossil } from "../../src/fossil/Command.js"
import { readMessage, writeMessage } from "../../src/protocol/Envelope.js"
import { cloneAs, fossil } from "../support/fossilServer.js"
import { type Answer, makeToolsWorld, throughEveryEntryPoint, type ToolsWorld, users, wanda } from "./world.js"

// Each tool through all three entry points (the CLI, the CGI in a real fossil server, MCP over
// stdio): the same answers and refusals, dry runs that write nothing, and writes checked by
// reading the served repository and its receipts.

vi.setConfig({ testTimeout: 90_000 })

let world: ToolsWorld
let patterns: Http.Server
let patternUrl: string
let talk: string // alice's thread, to reply in
let ticket: string // alice's ticket

const repo = <A, E>(f: (r: RepositoryService) => Effect.Effect<A, E>) =>
  Effect.scoped(Effect.flatMap(FossilRepository.make({ path: world.repository }), f))

const writeRun = (run: object, options: { as?: string; to?: string } = {}) =>
  repo((r) => r.post({ user: options.as ?? "alice", title: "a run", text: writeMessage({ ocx: 2, to: options.to ?? "lab", run }) }).pipe(Effect.map((w) => w.hash)))

const runFields = (extra: object = {}) => ({
  clone: world.serverCode,
  objective: "a test run",
  process: { user: "builder", command: ["true"] },
  ...extra
})

const refused = (answers: ReadonlyArray<Answer>, words: string | RegExp) => {
  for (const answer of answers) {
    expect(answer.stopped.reason).toBe("refused")
    expect(answer.stopped.message).toMatch(words)
  }
}

beforeAll(async () => {
  world = await makeToolsWorld()
  talk = await Effect.runPromise(repo((r) => r.post({ user: "alice", title: "talk", text: "Talk here." }).pipe(Effect.map((w) => w.hash))))
  ticket = await Effect.runPromise(repo((r) => r.ticketChange({ user: "alice", fields: { title: "a ticket", icomment: "A ticket." } }).pipe(Effect.map((w) => w.ticket))))
  patterns = Http.createServer((request, response) => {
    const body = request.url === "/claude.md"
      ? "A session that answers each post.\n\n```json\n{\"process\": {\"command\": [\"claude\"], \"env\": {\"A\": \"1\"}}, \"limits\": {\"wall\": \"1m\"}}\n```\n"
      : request.url === "/none.md" ? "no block here\n" : undefined
    response.writeHead(body === undefined ? 404 : 200, { "content-type": "text/markdown" })
    response.end(body ?? "not found")
  })
  await new Promise<void>((resolve) => patterns.listen(0, "127.0.0.1", resolve))
  const address = patterns.address() as { port: number }
  patternUrl = `http://127.0.0.1:${address.port}`
}, 120_000)

afterAll(async () => {
  await new Promise((resolve) => patterns?.close(resolve))
  await world?.close()
})

describe("create", () => {
  it.live("refuses, the same way everywhere and writing nothing: a user without admin or setup, a bad argument, two places, a run a node would refuse", () => Effect.gen(function*() {
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "mallory", tool: "create", input: { title: "t", node: "lab", objective: "x" } })),
      "create needs Fossil's admin (a) or setup (s) capability")
    // a run for a node user the repository does not have would wait for ever (issue 40)
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "create", input: { title: "t", node: "ghost", objective: "x", user: "builder", fields: { process: { command: ["true"] } } } })),
      /^no user ghost in the served repository .*: a run's to names the node user that will run it/)
    // fields is an object: given as a string in JSON (the web's JSON body, MCP), it is one; on the
    // command line the text is JSON that does not parse, and the answer says where (issue 40)
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "create", input: { title: "t", node: "lab", fields: "not json" }, via: ["cgi", "mcp"] })),
      /^bad argument: fields: expected .*a JSON object.*, not "not json"$/)
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "create", input: { title: "t", node: "lab", fields: "not json" }, via: ["cli"] })),
      /^bad argument: fields: not JSON at line 1, column 2 \(position 1\): /)
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "create", input: { title: "t", ticket, node: "lab", objective: "x" } })),
      "give exactly one of title")
    // again writes anew a run the repository holds (the run page's Run again, issue 40): a name holding none is refused, naming it
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "create", input: { again: "0123456789abcdef" } })),
      /0123456789abcdef/)
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "create", input: { again: "0123456789abcdef", pattern: "run/x" } })),
      "again and pattern are each the first layer of the run's fields: give one of them")
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "create", input: { title: "t", node: "lab", objective: "x", user: "lab", fields: { process: { command: ["true"] } } } })),
      "a node would refuse this run as written: refusal 4: process.user (lab) is the run's to")
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "create", input: { title: "t", node: "lab", objective: "x", user: "builder", fields: { node: "lab", process: { command: ["true"] } } } })),
      /refusal 2: node/)
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "create", input: { title: "t", node: "lab", user: "builder", fields: { process: { command: ["true"] } } } })),
      /refusal 2: objective/)
  }))

  it.live("a dry run checks and says what it would write, and writes nothing", () => Effect.gen(function*() {
    const [answer] = yield* Effect.promise(() => throughEveryEntryPoint(world, {
      login: "alice", tool: "create", dryRun: true,
      input: { title: "t", node: "lab", objective: "x", user: "builder", fields: { process: { command: ["true"] } } }
    }))
    expect(answer!.stopped.reason).toBe("dry_run")
    expect(answer!.operations.at(-1)).toEqual({ op: "write", detail: `a new thread "t" as alice, holding a run for lab`, done: false })
    expect(answer!.output).toEqual({
      to: "lab", place: "new thread",
      message: { ocx: 2, to: "lab", run: { clone: world.serverCode, objective: "x", process: { user: "builder", command: ["true"] } } }
    })
  }))

  it.live("again writes a run anew where it is, its fields and node read from the record: a reply to it in its thread, a change to its ticket (issue 40)", () => Effect.gen(function*() {
    const inThread = yield* writeRun(runFields({ objective: "first in a thread" }))
    const onTicket = yield* repo((r) => r.ticketChange({ user: "alice", ticket, fields: { icomment: writeMessage({ ocx: 2, to: "lab", run: runFields({ objective: "first on a ticket" }) }) } }).pipe(Effect.map((w) => w.hash)))
    const threads = yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "create", dryRun: true, input: { again: inThread.slice(0, 12) } }))
    for (const answer of threads) {
      expect(answer.stopped.reason, JSON.stringify(answer.stopped)).toBe("dry_run")
      expect(answer.output).toMatchObject({ to: "lab", place: "reply", thread: inThread, again: inThread, message: { ocx: 2, to: "lab", run: runFields({ objective: "first in a thread" }) } })
    }
    // the layers over it as ever: objective said otherwise
    const tickets = yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "create", dryRun: true, input: { again: onTicket, objective: "again, said otherwise" } }))
    for (const answer of tickets) {
      expect(answer.stopped.reason, JSON.stringify(answer.stopped)).toBe("dry_run")
      expect(answer.output).toMatchObject({ to: "lab", place: "ticket", ticket, again: onTicket, message: { run: runFields({ objective: "again, said otherwise" }) } })
    }
  }))

  it.live("writes a run as the caller in a new thread, a reply and a ticket change, each received from the caller", () => Effect.gen(function*() {
    const places = [{ title: "a run" }, { to: talk.slice(0, 10) }, { ticket: ticket.slice(0, 8) }]
    for (const place of places) {
      const answers = yield* Effect.promise(() => throughEveryEntryPoint(world, {
        login: "alice", tool: "create", writes: true,
        input: { ...place, node: "lab", objective: "build it", user: "builder", fields: { process: { command: ["make"] } } }
      }))
      for (const answer of answers) {
        expect(answer.stopped).toEqual({ reason: "completed" })
        const run = answer.output.run as string
        const receipt = yield* repo((r) => r.artifact(run).pipe(Effect.zipRight(r.readAfter({ rcvid: 0, rid: 0 }, 100000))))
        const item = receipt.items.find((i) => i.hash === run)!
        expect(item.sender).toBe("alice")
        const reading = readMessage((item as { text: string }).text)
        expect(reading._tag === "Message" && reading.block).toEqual({
          ocx: 2, to: "lab", run: { clone: world.serverCode, objective: "build it", process: { user: "builder", command: ["make"] } }
        })
      }
      if ("to" in place) expect(answers.map((a) => a.output.thread)).toEqual([talk, talk, talk])
      if ("ticket" in place) expect(answers.map((a) => a.output.ticket)).toEqual([ticket, ticket, ticket])
    }
  }))

  it.live("layers a pattern fetched without signing in, the fields named, and fields: objects merge, other values replace", () => Effect.gen(function*() {
    const [answer] = yield* Effect.promise(() => throughEveryEntryPoint(world, {
      login: "alice", tool: "create", dryRun: true,
      input: { pattern: `${patternUrl}/claude.md`, title: "talk", node: "lab", objective: "Answer.", user: "builder", fields: { process: { env: { B: "2" } }, limits: { wall: "2m" } } }
    }))
    expect(answer!.output.message.run).toEqual({
      clone: world.serverCode,
      process: { command: ["claude"], env: { A: "1", B: "2" }, user: "builder" },
      limits: { wall: "2m" },
      objective: "Answer."
    })
    expect(answer!.output.pattern).toBe(`${patternUrl}/claude.md`)
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "create", input: { pattern: `${patternUrl}/none.md`, title: "t", node: "lab" } })),
      "holds no fenced json block")
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "create", input: { pattern: `${patternUrl}/gone.md`, title: "t", node: "lab" } })),
      "answered HTTP 404")
  }))

  it.live("reads a wiki page run/NAME of the served repository only as the newest version a user holding admin or setup wrote", () => Effect.gen(function*() {
    const page = (fields: object) => `A test pattern.\n\n\`\`\`json\n${JSON.stringify(fields)}\n\`\`\`\n`
    const wiki = async (user: string, name: string, fields: object, verb: "create" | "commit") => {
      const file = Path.join(world.dir, `${name.replace("/", "-")}.md`)
      Fs.writeFileSync(file, page(fields))
      const r = await runFossil(["wiki", verb, name, file, "--mimetype", "text/x-markdown", "-R", world.repository], { user })
      if (r.code !== 0) throw new Error(r.stderr + r.stdout)
    }
    yield* Effect.promise(() => wiki("alice", "run/claude", { process: { command: ["claude"] } }, "create"))
    // builder holds check-in alone: Fossil takes a wiki version from him, create passes it by
    yield* Effect.promise(() => wiki("builder", "run/claude", { process: { command: ["sh", "-c", "evil"] } }, "commit"))
    yield* Effect.promise(() => wiki("builder", "run/builders", { process: { command: ["sh"] } }, "create"))
    // the server records the URL it is reached at as it serves a page
    yield* Effect.promise(() => fetch(`${world.base}wiki?name=run/claude`).then((r) => r.arrayBuffer()))
    for (const pattern of ["run/claude", `${world.base}wiki?name=run/claude`, `${world.base}wiki/run/claude`]) {
      const [answer] = yield* Effect.promise(() => throughEveryEntryPoint(world, {
        login: "alice", tool: "create", dryRun: true,
        input: { pattern, title: "talk", node: "lab", objective: "Answer.", user: "builder" }
      }))
      expect(answer!.stopped.reason).toBe("dry_run")
      expect(answer!.output.message.run.process).toEqual({ command: ["claude"], user: "builder" })
      expect(answer!.output.pattern).toBe("wiki/run/claude")
      expect(answer!.output.pattern_version).toMatch(/^[0-9a-f]{64} by alice$/)
      expect(answer!.operations[0]!.detail).toContain("(1 newer version by users without admin or setup passed by)")
    }
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "create", input: { pattern: "run/builders", title: "t", node: "lab" } })),
      "no version of that wiki page of the served repository was written by a user holding admin or setup (1 newer version")
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "create", input: { pattern: `${world.base}doc/trunk/PLAN.md`, title: "t", node: "lab" } })),
      "is a page of the served repository but not one of its wiki pages")
  }))
})

describe("stop", () => {
  it.live("refuses a user without admin or setup, a post holding no run, and an ended run; a dry run writes nothing", () => Effect.gen(function*() {
    const run = yield* writeRun(runFields())
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "builder", tool: "stop", input: { run } })), "stop needs Fossil's admin (a) or setup (s) capability")
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "stop", input: { run: talk } })), `${talk} holds no run`)
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "stop", input: { run: "zz" } })), /^bad argument|not a hash/)
    const [dry] = yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "stop", input: { run: run.slice(0, 12) }, dryRun: true }))
    expect(dry!.stopped.reason).toBe("dry_run")
    expect(dry!.output).toEqual({ run, to: "lab", thread: run })
    expect(dry!.operations.at(-1)).toEqual({ op: "write", detail: `a reply to ${run} in its thread as alice: a stop of the run`, done: false })
    const ended = yield* writeRun(runFields())
    yield* repo((r) => r.reply({ user: "lab", to: ended, text: writeMessage({ ocx: 2, re: ended, ended: { outcome: "exited", exit: 0 } }) }))
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "stop", input: { run: ended } })), `the run ${ended} has ended (exited`)
  }))

  it.live("writes the stop as the caller where the run is: in its thread, or on its ticket", () => Effect.gen(function*() {
    for (const onTicket of [false, true]) {
      const runs: Array<string> = []
      const answers = yield* Effect.promise(() => throughEveryEntryPoint(world, {
        login: "alice", tool: "stop", writes: true,
        // the world calls for each entry point's input as a promise
        input: async () => {
          const run = onTicket
            ? await Effect.runPromise(repo((r) => r.ticketChange({ user: "alice", ticket, fields: { icomment: writeMessage({ ocx: 2, to: "lab", run: runFields() }) } }).pipe(Effect.map((w) => w.hash))))
            : await Effect.runPromise(writeRun(runFields()))
          runs.push(run)
          return { run }
        }
      }))
      for (const [i, answer] of answers.entries()) {
        expect(answer.stopped).toEqual({ reason: "completed" })
        const stop = answer.output.stop as string
        const items = (yield* repo((r) => r.readAfter({ rcvid: 0, rid: 0 }, 100000))).items
        const item = items.find((x) => x.hash === stop) as { sender?: string; text: string; _tag: string }
        expect(item._tag).toBe(onTicket ? "TicketChange" : "Post")
        expect(item.sender).toBe("alice")
        const reading = readMessage(item.text)
        expect(reading._tag === "Message" && reading.block).toEqual({ ocx: 2, re: runs[i], stop: {} })
      }
    }
  }))
})

// post is not offered on the web (people post in Fossil's own forum page, seed 001): the CLI and MCP
const postVia = ["cli", "mcp"] as const

describe("post", () => {
  it.live("is refused on the web, naming where it is offered, and writes nothing", () => Effect.gen(function*() {
    const before = world.state()
    const answer = yield* Effect.promise(() => world.call("cgi", "builder", "post", { to: talk, text: "hello" }))
    expect(answer).toEqual({
      tool: "post", operations: [],
      stopped: { reason: "refused", message: "post is not offered by the OCX web page: on the web, post in Fossil's own forum page; it is offered by the command line (ocx2) and MCP" }
    })
    expect(world.state()).toBe(before)
  }))

  it.live("refuses a user without check-in, a text holding an OCX message, a name that is nothing; a dry run writes nothing", () => Effect.gen(function*() {
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { via: postVia, login: "wanda", tool: "post", input: { to: talk, text: "hello" } })), "post needs Fossil's Check-In capability (i)")
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { via: postVia, login: "builder", tool: "post", input: { to: talk, text: "look:\n\n```json\n{\"ocx\": 2, \"re\": \"x\", \"stop\": {}}\n```\n" } })),
      "post writes plain posts, and this text holds an OCX message")
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { via: postVia, login: "builder", tool: "post", input: { to: "abcdef0123", text: "hello" } })), "no forum post or ticket named abcdef0123")
    const [dry] = yield* Effect.promise(() => throughEveryEntryPoint(world, { via: postVia, login: "builder", tool: "post", input: { to: talk.slice(0, 8), text: "hello" }, dryRun: true }))
    expect(dry!.output).toEqual({ place: "reply", to: talk, thread: talk, as: "builder", pushed: false })
  }))

  it.live("on the served host writes a reply or a ticket change as the caller", () => Effect.gen(function*() {
    for (const to of [talk.slice(0, 10), ticket.slice(0, 10)]) {
      const answers = yield* Effect.promise(() => throughEveryEntryPoint(world, { via: postVia, login: "builder", tool: "post", writes: true, input: { to, text: "A plain post." } }))
      for (const answer of answers) {
        expect(answer.stopped).toEqual({ reason: "completed" })
        const items = (yield* repo((r) => r.readAfter({ rcvid: 0, rid: 0 }, 100000))).items
        const item = items.find((x) => x.hash === answer.output.post) as { sender?: string; text: string }
        expect(item).toMatchObject({ sender: "builder", text: "A plain post." })
      }
    }
  }))

  it.live("from a clone pushes as the user the clone remembers; a push the server refuses is reported", () => Effect.gen(function*() {
    const clone = yield* Effect.promise(() => cloneAs(world.base, "builder", users.builder.password, Path.join(world.dir, "builder.fossil")))
    for (const via of ["cli", "mcp"] as const) {
      const answer = yield* Effect.promise(() => world.call(via, "builder", "post", { to: talk.slice(0, 10), text: `From ${via}.` }, { repository: clone }))
      expect(answer.stopped).toEqual({ reason: "completed" })
      expect(answer.output).toMatchObject({ place: "reply", to: talk, thread: talk, as: "builder", pushed: true })
      const receipts = yield* Effect.promise(() => world.call("cli", "alice", "receipt", { artifacts: [answer.output.post] }))
      expect(receipts.output.receipts[0]).toMatchObject({ received: true, sender: "builder" })
    }
    // another user named on the clone holds what the clone gives them: a clone of a user without admin holds no other user
    const other = yield* Effect.promise(() => world.call("mcp", "mallory", "post", { to: talk, text: "x" }, { repository: clone }))
    expect(other.stopped.message).toBe("post needs Fossil's Check-In capability (i): without it, post in Fossil's own forum page")
    // given check-in in the clone, they are still not the user the clone pushes as
    yield* Effect.promise(() => fossil(["user", "new", "mallory", "mallory@example.com", "x", "-R", clone]))
    yield* Effect.promise(() => fossil(["user", "capabilities", "mallory", "i", "-R", clone]))
    for (const via of ["cli", "mcp"] as const) {
      const again = yield* Effect.promise(() => world.call(via, "mallory", "post", { to: talk, text: "x" }, { repository: clone }))
      expect(again.stopped.message).toBe(`the clone ${clone} pushes as builder, the user it remembers, not as mallory`)
    }
    // wanda may clone (nobody's g) but not push: her clone lists her as setup, the server says no
    const wandaClone = yield* Effect.promise(() => cloneAs(world.base, "wanda", wanda.password, Path.join(world.dir, "wanda.fossil")))
    const before = world.state()
    const refusedPush = yield* Effect.promise(() => world.call("cli", "wanda", "post", { to: talk, text: "x" }, { repository: wandaClone }))
    expect(refusedPush.stopped.reason).toBe("refused")
    expect(refusedPush.stopped.message).toMatch(/refused the push as wanda: .*not authorized to write/)
    expect(world.state()).toBe(before)
    // two clones, six calls through the shipped programs and three pushes: 20 s on a quiet 2-core machine, past 30 s under the suite's load
  }), 90_000)
})

describe("audit", () => {
  it.live("refuses a user without check-in, one's own check-in, a bad verdict; a dry run writes nothing", () => Effect.gen(function*() {
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "wanda", tool: "audit", input: { checkin: "trunk", verdict: "pass", note: "ok", against: "PLAN.md" } })),
      "audit needs Fossil's Check-In capability (i)")
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "alice", tool: "audit", input: { checkin: "trunk", verdict: "pass", note: "ok", against: "PLAN.md" } })),
      "nobody audits their own check-in")
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "builder", tool: "audit", input: { checkin: "trunk", verdict: "maybe", note: "ok", against: "PLAN.md" } })),
      /^bad argument: verdict must be one of pass or fail, not "maybe"$/)
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "builder", tool: "audit", input: { checkin: "nosuchbranch", verdict: "pass", note: "ok", against: "PLAN.md" } })),
      "no check-in named nosuchbranch")
    const [dry] = yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "builder", tool: "audit", input: { checkin: "trunk", verdict: "pass", note: "reads well", against: "PLAN.md" }, dryRun: true }))
    expect(dry!.output).toEqual({ checkin: world.trunk, value: "pass: reads well (against PLAN.md)", as: "builder", pushed: false, verdicts: [] })
  }))

  it.live("tags the check-in (by branch, prefix or hash) as the caller, read back from the served repository; a later verdict replaces the earlier", () => Effect.gen(function*() {
    const names = { cli: "trunk", cgi: world.trunk.slice(0, 10), mcp: world.trunk }
    const answers = yield* Effect.promise(() => throughEveryEntryPoint(world, {
      login: "builder", tool: "audit", writes: true,
      input: (via) => ({ checkin: names[via], verdict: "pass", note: "reads\nwell", against: "PLAN.md" })
    }))
    for (const answer of answers) {
      expect(answer.stopped).toEqual({ reason: "completed" })
      expect(answer.output).toMatchObject({ checkin: world.trunk, value: "pass: reads well (against PLAN.md)", as: "builder", pushed: false })
      expect(answer.output.verdicts).toEqual([{ sender: "builder", pass: true, reason: "reads well", against: "PLAN.md" }])
      const receipts = yield* Effect.promise(() => world.call("cli", "alice", "receipt", { artifacts: [answer.output.tag] }))
      expect(receipts.output.receipts[0]).toMatchObject({ received: true, sender: "builder" })
    }
    const later = yield* Effect.promise(() => world.call("cgi", "builder", "audit", { checkin: "trunk", verdict: "fail", note: "missing a test", against: "PLAN.md" }))
    expect(later.output.verdicts).toEqual([{ sender: "builder", pass: false, reason: "missing a test", against: "PLAN.md" }])
    const another = yield* Effect.promise(() => world.call("mcp", "mallory", "audit", { checkin: "trunk", verdict: "pass", note: "fine", against: "PLAN.md" }))
    expect(another.output.verdicts).toEqual([
      { sender: "builder", pass: false, reason: "missing a test", against: "PLAN.md" },
      { sender: "mallory", pass: true, reason: "fine", against: "PLAN.md" }
    ])
  }))
})

describe("receipt", () => {
  it.live("says who sent each artifact, with their capabilities and server order, or not received; and a user's capabilities", () => Effect.gen(function*() {
    const missing = "0".repeat(64)
    const [answer] = yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "builder", tool: "receipt", input: { artifacts: [world.trunk, missing], capabilities_of: "rita" } }))
    expect(answer!.stopped).toEqual({ reason: "completed" })
    expect(answer!.output.receipts[0]).toMatchObject({ hash: world.trunk, received: true, sender: "alice", capabilities: world.fullcap("alice") })
    expect(answer!.output.receipts[0].rcvid).toBeGreaterThan(0)
    expect(answer!.output.receipts[1]).toEqual({ hash: missing, received: false })
    expect(answer!.output.capabilities_of).toEqual({ user: "rita", capabilities: world.fullcap("rita") })
    // it changes nothing, so a dry run answers the same
    const [dry] = yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "builder", tool: "receipt", input: { artifacts: [world.trunk] }, dryRun: true }))
    expect(dry!.stopped.reason).toBe("dry_run")
    expect(dry!.output.receipts[0]).toMatchObject({ received: true, sender: "alice" })
  }))

  it.live("tells a caller without Read (o) nothing was received; refuses a hash that is not full and an empty question", () => Effect.gen(function*() {
    const [answer] = yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "wanda", tool: "receipt", input: { artifacts: [world.trunk], capabilities_of: "alice" } }))
    expect(answer!.output).toEqual({ receipts: [{ hash: world.trunk, received: false }], capabilities_of: { user: "alice" } })
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "builder", tool: "receipt", input: { artifacts: [world.trunk.slice(0, 12)] } })), "is not a full artifact hash")
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "builder", tool: "receipt", input: {} })), "give artifacts, capabilities-of or newer-than")
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "builder", tool: "receipt", input: { wait: 5 } })), "give newer-than N with it")
  }))

  it.live("says the newest receipt's number through every entry point, to a caller with Read (o) only", () => Effect.gen(function*() {
    const answers = yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "builder", tool: "receipt", input: { newer_than: 0, wait: 1 } }))
    for (const answer of answers) {
      expect(answer.stopped.reason).toBe("completed")
      expect(answer.output.newest).toBeGreaterThan(0)
    }
    const [hidden] = yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "wanda", tool: "receipt", input: { newer_than: 0 } }))
    expect(hidden!.output).toEqual({ receipts: [] })
  }))

  it.live("says with arrived what was received after newer-than: receipts from the server's table, the process users of the runs to the caller", () => Effect.gen(function*() {
    const [before] = yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "rita", tool: "receipt", input: { newer_than: 0 } }))
    const after = before!.output.newest as number
    // a run to rita (the caller) naming builder, a run to another node naming alice, a plain post
    const mine = yield* writeRun(runFields(), { to: "rita" })
    const other = yield* writeRun(runFields({ process: { user: "alice", command: ["true"] } }), { to: "lab" })
    const plain = yield* repo((r) => r.post({ user: "builder", title: "plain", text: "no run here" }).pipe(Effect.map((w) => w.hash)))
    const answers = yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "rita", tool: "receipt", input: { newer_than: after, arrived: true } }))
    for (const answer of answers) {
      expect(answer.stopped.reason).toBe("completed")
      const arrived = answer.output.arrived as { receipts: Array<{ hash: string; sender: string; rcvid: number; capabilities: string }>; process_users: unknown; complete: boolean }
      expect(arrived.complete).toBe(true)
      expect(arrived.receipts.map((r) => r.hash)).toEqual([mine, other, plain])
      expect(arrived.receipts.map((r) => r.sender)).toEqual(["alice", "alice", "builder"])
      expect(arrived.receipts[0]!.capabilities).toBe(world.fullcap("alice"))
      expect(arrived.receipts.every((r) => r.rcvid > after && r.rcvid <= (answer.output.newest as number))).toBe(true)
      expect(arrived.process_users).toEqual([{ user: "builder", capabilities: world.fullcap("builder") }])
    }
    // nothing newer: an empty arrived; a caller without Read is told nothing; arrived alone is refused
    const [same] = yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "rita", tool: "receipt", input: { newer_than: answers[0]!.output.newest as number, arrived: true } }))
    expect(same!.output.arrived).toEqual({ receipts: [], process_users: [], complete: true })
    const [hidden] = yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "wanda", tool: "receipt", input: { newer_than: after, arrived: true } }))
    expect(hidden!.output).toEqual({ receipts: [] })
    refused(yield* Effect.promise(() => throughEveryEntryPoint(world, { login: "rita", tool: "receipt", input: { arrived: true } })), "give newer-than N with it")
  }))
})
