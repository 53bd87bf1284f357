import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { Repository } from "../../services/Repository.js"
import { composeForumPost } from "../../src/fossil/Artifact.js"
import { writeBundle } from "../../src/fossil/Bundle.js"
import { runFossil } from "../../src/fossil/Command.js"
import { writeMessage } from "../../src/protocol/Envelope.js"
import { fossil, makeTempDir, pushArtifacts, webLogin, webNewThread, webReply } from "../support/fossilServer.js"
import { sandbox } from "../support/nodeWorld.js"
import { askSpare } from "../../src/pickup/SpareClient.js"
import {
  closeCloneWorld, cloneUsers, type CloneWorld, makeCloneWorld, type NodeAnswer, postRun as postRunOn, repliesOf, runNode, servedRepository,
  waitForKind as waitForRunKind
} from "./cloneWorld.js"
import { eventually } from "../support/world.js"
import { pidsNaming, waitFor } from "./hookWorld.js"

// A node on another host (test/node/cloneWorld.ts): `ocx2 node` run as its timer would run it,
// real watchers and real bubblewrap. Everything is read back from the served repository, with
// each sender as the server received it.

const users = cloneUsers

let world: CloneWorld

beforeAll(async () => {
  world = await makeCloneWorld("ocx2-clone-")
}, 90_000)

afterAll(() => closeCloneWorld(world))

type Answer = NodeAnswer

/** `ocx2 --json --repository CLONE node URL FILE ...` as the timer runs it: the release's own program, its root by default. */
const node = (args: ReadonlyArray<string> = [], passwords = world.passwords) => runNode(world, args, passwords)

const served = <A, E>(f: (r: typeof Repository.Service) => Effect.Effect<A, E>) => servedRepository(world, f)
const replies = (run: string) => repliesOf(world, run)
const waitForKind = (run: string, kind: string, ms?: number) => waitForRunKind(world, run, kind, ms)
const postRun = (script: string, process: object = {}) => postRunOn(world, script, process)

/** An artifact put straight into the clone (as lab2), not pushed: the server has not received it. */
const intoClone = async (artifact: ReturnType<typeof composeForumPost>) => {
  const bundleDir = makeTempDir("ocx2-bundle-")
  try {
    const projectCode = (await fossil(["sql", "-R", world.clone, "SELECT value FROM config WHERE name='project-code'"])).trim().replace(/'/g, "")
    writeBundle(Path.join(bundleDir, "b.bundle"), projectCode, [artifact])
    await fossil(["bundle", "import", Path.join(bundleDir, "b.bundle"), "--publish", "-R", world.clone], "lab2")
  } finally {
    Fs.rmSync(bundleDir, { recursive: true, force: true })
  }
}

const decisionOf = (answer: Answer, run: string) => answer.output?.runs.find((r) => r.run === run)?.action

describe("ocx2 node, a node on another host", () => {
  it.live("refuses a passwords file that others may read, and does nothing", () => Effect.gen(function*() {
    const open = Path.join(Path.dirname(world.passwords), "open-passwords.json")
    Fs.writeFileSync(open, Fs.readFileSync(world.passwords), { mode: 0o644 })
    Fs.chmodSync(open, 0o644)
    const answer = yield* Effect.promise(() => node(["--check"], open))
    expect(answer.stopped.reason).toBe("refused")
    expect(answer.stopped.message).toContain("mode 0644")
    expect(answer.stopped.message).toContain("nothing was done")
    expect(answer.code).toBe(1)
    expect(Fs.existsSync(Path.join(world.root, "node"))).toBe(false)
    // a file holding run users' passwords (version 1's "runs") is refused too
    Fs.writeFileSync(open, JSON.stringify({ user: "lab2", password: "lab2-pw", runs: { builder: "x" } }), { mode: 0o600 })
    Fs.chmodSync(open, 0o600)
    const runs = yield* Effect.promise(() => node(["--check"], open))
    expect(runs.stopped.message).toContain("version 2 keeps no process user's password")
  }), 90_000)

  it.live("starts: a dry run says what it would do and does nothing; then --check sets the node's cursor", () => Effect.gen(function*() {
    const dry = yield* Effect.promise(() => node(["--check", "--dry-run"]))
    expect(dry.stopped.reason).toBe("dry_run")
    expect(dry.operations.filter((o) => !o.done).map((o) => o.op)).toEqual(["register", "pull", "cursor", "boot"])
    expect(Fs.existsSync(Path.join(world.root, "node"))).toBe(false)

    const started = yield* Effect.promise(() => node(["--check"]))
    expect(started.stopped).toEqual({ reason: "completed" })
    expect(started.output).toMatchObject({ check: true, why: "asked with --check", runs: [] })
    const files = Fs.readdirSync(Path.join(world.root, "node"))
    expect(files.some((f) => /^cursor-[0-9a-f]{12}-lab2\.json$/.test(f))).toBe(true)
    const registered = JSON.parse(Fs.readFileSync(Path.join(world.root, "node", "clones.json"), "utf8"))
    expect(registered.clones[world.clone]).toMatchObject({ user: "lab2", passwordsFile: world.passwords, serverUrl: world.url })
    expect(registered.clones[world.clone].bootId).toMatch(/^[0-9a-f-]{36}$/)
  }), 90_000)

  it.live("runs a run posted on the server: one started and one ended, both from lab2, kept logs and the verdict", () => Effect.gen(function*() {
    const run = yield* Effect.promise(() => postRun("cat tree/hello.txt; echo to-stderr >&2; exit 3", { cwd: "$$workspace$$", verdict: true }))
    // what a dry run would do with what the clone holds once pulled (a dry run pulls nothing)
    yield* Effect.promise(() => runFossil(["pull", "-R", world.clone], { user: "root" }))
    const dry = yield* Effect.promise(() => node(["--dry-run"]))
    expect(decisionOf(dry, run)).toBe("handed to a watcher, which starts it")
    expect(dry.operations.find((o) => o.op === "hand off")).toMatchObject({ done: false })
    expect(Fs.existsSync(Path.join(world.root, "care", `${run}.lock`))).toBe(false)

    const answer = yield* Effect.promise(() => node())
    expect(answer.output?.check).toBe(false)
    expect(decisionOf(answer, run)).toBe("handed to a watcher, which starts it")
    yield* waitForKind(run, "ended")
    // the kept logs and the verdict follow ended
    const keptAndVerdict = Effect.all([served((r) => r.thread(run)), served((r) => r.tags(world.trunk))]).pipe(Effect.map(([thread, tags]) =>
      thread.some((p) => p.text.startsWith("The process exited 3")) &&
      tags.history.some((t) => t.tags.some((s) => s.name === "ci" && s.value?.endsWith(`(against ${run})`) === true))))
    expect(yield* eventually(keptAndVerdict, (both) => both, 15_000)).toBe(true)
    const messages = yield* replies(run)
    expect(messages.map((m) => [m.kind, m.sender])).toEqual([["started", "lab2"], ["ended", "lab2"]])
    expect(messages[1]!.content).toEqual({ outcome: "exited", exit: 3 })
    const thread = yield* served((r) => r.thread(run))
    const kept = thread.find((p) => p.text.startsWith("The process exited 3"))
    expect(kept?.sender).toBe("lab2")
    expect(kept?.text).toContain("hello from trunk")
    expect(kept?.text).toContain("to-stderr")
    const tags = yield* served((r) => r.tags(world.trunk))
    const verdict = tags.history.find((t) => t.tags.some((s) => s.name === "ci"))
    expect(verdict?.sender).toBe("lab2")
    expect(verdict?.tags.find((s) => s.name === "ci")?.value).toBe(`fail: exit 3 (against ${run})`)
    // the next call finds nothing new for it: the run is not decided twice
    const again = yield* Effect.promise(() => node())
    expect(decisionOf(again, run)).toBeUndefined()
  }), 180_000)

  it.live("refuses a run written straight into the clone and pushed by lab2 (refusal 1: the run's to sent it)", () => Effect.gen(function*() {
    const text = writeMessage({
      ocx: 2, to: "lab2",
      run: { clone: world.cloneCode, objective: "sneaked in", sandbox: sandbox(), process: { user: "builder", command: ["true"] } }
    })
    const artifact = composeForumPost({ user: "alice", date: new Date(), title: "a run from the clone", text })
    // in the clone, not yet pushed: the server has not said who sent it, so it waits for a later call
    yield* Effect.promise(() => intoClone(artifact))
    const waiting = yield* Effect.promise(() => node())
    expect(decisionOf(waiting, artifact.hash)).toBe("the server has not said who sent the run: decided again at the next call")
    yield* Effect.promise(() => pushArtifacts(world.clone, "lab2", [artifact]))
    const answer = yield* Effect.promise(() => node())
    expect(decisionOf(answer, artifact.hash)).toMatch(/^refused, refusal 1: .*lab2/)
    const messages = yield* waitForKind(artifact.hash, "ended")
    expect(messages.map((m) => [m.kind, m.sender])).toEqual([["ended", "lab2"]])
    expect(messages[0]!.content).toMatchObject({ outcome: "refused", note: expect.stringContaining("lab2") })
  }), 180_000)

  it.live("refuses, once, a run for lab2 whose clone is missing or malformed (refusal 2 naming clone)", () => Effect.gen(function*() {
    const session = yield* Effect.promise(() => webLogin(world.url, users.alice.login, users.alice.password))
    const runs: Array<string> = []
    for (const clone of [undefined, "not-a-server-code"]) {
      const run = {
        ...(clone === undefined ? {} : { clone }),
        objective: "a run for lab2, badly addressed",
        sandbox: sandbox(),
        process: { user: users.builder.login, command: ["true"] }
      }
      runs.push(yield* Effect.promise(() => webNewThread({ repository: world.served }, session, {
        title: "a badly addressed run",
        text: writeMessage({ ocx: 2, to: users.lab2.login, run }, "A run for the lab, its clone missing or malformed.")
      })))
    }
    const answer = yield* Effect.promise(() => node())
    for (const run of runs) expect(decisionOf(answer, run)).toMatch(/^refused, refusal 2: clone/)
    for (const run of runs) {
      const messages = yield* waitForKind(run, "ended")
      expect(messages.map((m) => [m.kind, m.sender])).toEqual([["ended", "lab2"]])
      expect(messages[0]!.content).toMatchObject({ outcome: "refused", note: expect.stringMatching(/^refusal 2: clone/) })
    }
    // once: the next calls, and one that reads every open run, answer none again
    yield* Effect.promise(() => node())
    yield* Effect.promise(() => node(["--check"]))
    for (const run of runs) expect((yield* replies(run)).map((m) => m.kind)).toEqual(["ended"])
  }), 180_000)

  it.live("ends a running process stopped when a stop is posted on the server; the next call delivers it", () => Effect.gen(function*() {
    // the runs before left a spare watcher on the clone's host: it takes this one
    const spare = yield* Effect.promise(() => waitFor(async () => {
      const answer = await askSpare(world.root, { ping: true })
      return answer !== undefined && "spare" in answer ? answer.spare : undefined
    }, 20_000))
    expect(spare).toBeDefined()
    const run = yield* Effect.promise(() => postRun("sleep 60"))
    yield* Effect.promise(() => node())
    yield* waitForKind(run, "started")
    expect(Fs.readFileSync(Path.join(world.root, "care", `${run}.log`), "utf8")).toContain(`in care: spare ${spare} took the run`)
    const session = yield* Effect.promise(() => webLogin(world.url, users.alice.login, users.alice.password))
    yield* Effect.promise(() => webReply({ repository: world.served }, session, { to: run, text: writeMessage({ ocx: 2, re: run, stop: {} }, "Stop it.") }))
    const answer = yield* Effect.promise(() => node())
    expect(decisionOf(answer, run)).toBe("a stop counts: told its watcher to end its process")
    const messages = yield* waitForKind(run, "ended")
    expect(messages.map((m) => [m.kind, m.sender])).toEqual([["started", "lab2"], ["stop", "alice"], ["ended", "lab2"]])
    expect(messages[2]!.content).toEqual({ outcome: "stopped" })
  }), 180_000)

  it.live("answers lost, once, a run whose watcher was killed, when the node starts again with --check", () => Effect.gen(function*() {
    const run = yield* Effect.promise(() => postRun("sleep 60"))
    yield* Effect.promise(() => node())
    const log = Path.join(world.root, "care", `${run}.log`)
    yield* Effect.promise(() => waitFor(() => (Fs.existsSync(log) && Fs.readFileSync(log, "utf8").includes("launched:") ? true : undefined), 30_000, 100))
    const watchers = pidsNaming(run).filter((pid) => {
      try {
        return Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("ocx2-watcher")
      } catch {
        return false
      }
    })
    expect(watchers.length).toBe(1)
    process.kill(watchers[0]!, "SIGKILL")
    // the watcher gone (its process, sleeping in its sandbox, is no part of what the node asks)
    expect(yield* Effect.promise(() => waitFor(() => (Fs.existsSync(`/proc/${watchers[0]}`) ? undefined : true), 10_000, 20))).toBe(true)
    const answer = yield* Effect.promise(() => node(["--check"]))
    expect(answer.output?.why).toBe("asked with --check")
    expect(decisionOf(answer, run)).toMatch(/^answered lost/)
    // its process, left running by its watcher, was ended first
    expect(yield* Effect.promise(() => waitFor(() => (pidsNaming(run).length === 0 ? true : undefined), 10_000, 50)), `what still names the run: ${pidsNaming(run).join(" ")}`).toBe(true)
    // a call after the host restarted (another boot id) is the node starting, asked or not; the run has ended
    const clones = Path.join(world.root, "node", "clones.json")
    const registered = JSON.parse(Fs.readFileSync(clones, "utf8"))
    registered.clones[world.clone].bootId = "00000000-0000-0000-0000-000000000000"
    Fs.writeFileSync(clones, JSON.stringify(registered))
    const again = yield* Effect.promise(() => node())
    expect(again.output).toMatchObject({ check: true, why: "the host restarted since the node last started: it starts again" })
    expect(decisionOf(again, run)).toBeUndefined() // ended: nothing to check
    const messages = yield* replies(run)
    expect(messages.map((m) => [m.kind, m.sender])).toEqual([["started", "lab2"], ["ended", "lab2"]])
    expect(messages[1]!.content).toMatchObject({ outcome: "lost" })
  }), 90_000)

  it.live("publishes a run's files from the clone's host once lab2 holds y, and again from the kept workspace when alice asks", () => Effect.gen(function*() {
    const uv = (name: string) => fossil(["uv", "cat", name, "-R", world.served]).catch(() => undefined)
    yield* Effect.promise(() => fossil(["user", "capabilities", "lab2", "oiy", "-R", world.served]))
    // lab2 holds y only for this case, whatever its end
    yield* Effect.gen(function*() {
      const run = yield* Effect.promise(() => postRun("echo first > $$workspace$$/out.txt; echo launched >> $$workspace$$/launches", {
        unversioned_files: [{ at: "$$workspace$$/out.txt", as: "builds/clone.txt" }]
      }))
      yield* Effect.promise(() => node())
      yield* waitForKind(run, "ended")
      expect(yield* Effect.promise(() => waitFor(async () => ((await uv("builds/clone.txt")) === "first\n" ? true : undefined), 15_000))).toBe(true)
      const workspace = Path.join(world.root, "work", run)
      Fs.writeFileSync(Path.join(workspace, "out.txt"), "second\n")
      const session = yield* Effect.promise(() => webLogin(world.url, users.alice.login, users.alice.password))
      yield* Effect.promise(() => webReply({ repository: world.served }, session, { to: run, text: writeMessage({ ocx: 2, re: run, publish: {} }, "Publish it again.") }))
      const answer = yield* Effect.promise(() => node())
      expect(decisionOf(answer, run)).toMatch(/^published again: builds\/clone\.txt \([0-9a-f]+\)/)
      expect(yield* Effect.promise(() => uv("builds/clone.txt"))).toBe("second\n")
      expect(Fs.readFileSync(Path.join(workspace, "launches"), "utf8")).toBe("launched\n")
      const messages = yield* replies(run)
      expect(messages.filter((m) => m.kind === "started" || m.kind === "ended").map((m) => [m.kind, m.sender])).toEqual([["started", "lab2"], ["ended", "lab2"]])
    }).pipe(Effect.ensuring(Effect.promise(() => fossil(["user", "capabilities", "lab2", "oi", "-R", world.served]))))
  }), 180_000)

  it.live("a version sent again within the same second is kept by the server (its time orders it after the first)", () => Effect.gen(function*() {
    const uv = (name: string) => fossil(["uv", "cat", name, "-R", world.served]).catch(() => undefined)
    yield* Effect.promise(() => fossil(["user", "capabilities", "lab2", "oiy", "-R", world.served]))
    // lab2 holds y only for this case, whatever its end
    yield* Effect.gen(function*() {
      const sha3 = (text: string) => Crypto.createHash("sha3-256").update(text).digest("hex")
      // the second version's hash is the smaller: at the same time Fossil would keep the first
      let second = 0
      while (sha3(`second ${second}\n`) > sha3("first\n")) second++
      const put = (name: string, content: string) =>
        Effect.scoped(Effect.flatMap(
          FossilRepository.make({ path: world.clone, server: { url: world.url, passwords: { lab2: users.lab2.password } } }),
          (r) => r.putUnversioned({ user: "lab2", name, content })
        ))
      let sameSecond = false
      for (let attempt = 0; attempt < 4 && !sameSecond; attempt++) {
        const name = `builds/again-${attempt}.txt`
        // at the start of a second, so both are sent within it
        yield* Effect.sleep(1000 - (Date.now() % 1000) + 5)
        const began = Math.floor(Date.now() / 1000)
        yield* put(name, "first\n")
        const written = yield* put(name, `second ${second}\n`)
        sameSecond = Math.floor(Date.now() / 1000) === began
        expect(written.hash).toBe(sha3(`second ${second}\n`))
        expect(yield* Effect.promise(() => uv(name))).toBe(`second ${second}\n`)
      }
      expect(sameSecond).toBe(true)
    }).pipe(Effect.ensuring(Effect.promise(() => fossil(["user", "capabilities", "lab2", "oi", "-R", world.served]))))
  }), 120_000)

  it.live("gives a session what each call's pull brought, in the server's order, stopping at an artifact whose sender the server has not said", () => Effect.gen(function*() {
    const lines = (run: string): ReadonlyArray<Record<string, unknown>> => {
      try {
        return Fs.readFileSync(Path.join(world.root, "work", run, "lines"), "utf8").trim().split("\n").filter((l) => l !== "").map((l) => JSON.parse(l))
      } catch {
        return []
      }
    }
    const run = yield* Effect.promise(() => postRun("while IFS= read -r line; do printf '%s\\n' \"$line\" >> $$workspace$$/lines; done", { session: true, hears: ["*"] }))
    yield* Effect.promise(() => node())
    yield* waitForKind(run, "started")
    expect(yield* Effect.promise(() => waitFor(() => (lines(run).length === 1 ? true : undefined), 20_000))).toBe(true)
    const session = yield* Effect.promise(() => webLogin(world.url, users.alice.login, users.alice.password))
    const before = yield* Effect.promise(() => webReply({ repository: world.served }, session, { to: run, text: "the first post" }))
    yield* Effect.promise(() => node())
    expect(yield* Effect.promise(() => waitFor(() => (lines(run).length === 2 ? true : undefined), 20_000))).toBe(true)

    // a reply in the clone the server has not received: the next pull's arrivals wait behind it
    yield* Effect.promise(() => runFossil(["pull", "-R", world.clone], { user: "root" }))
    const local = composeForumPost({ user: "lab2", date: new Date(), root: run, replyTo: run, text: "written in the clone" })
    yield* Effect.promise(() => intoClone(local))
    const after = yield* Effect.promise(() => webReply({ repository: world.served }, session, { to: run, text: "the second post" }))
    yield* Effect.promise(() => node())
    yield* Effect.sleep(1500)
    expect(lines(run).length).toBe(2)
    // once pushed, the server says lab2 sent it (the clone's own user: not given), and what waited behind it is given
    yield* Effect.promise(() => pushArtifacts(world.clone, "lab2", [local]))
    yield* Effect.promise(() => node())
    expect(yield* Effect.promise(() => waitFor(() => (lines(run).length === 3 ? true : undefined), 20_000))).toBe(true)
    yield* Effect.sleep(1000)
    expect(lines(run).slice(1)).toEqual([
      { post: before, from: "alice", text: "the first post" },
      { post: after, from: "alice", text: "the second post" }
    ])
    yield* Effect.promise(() => webReply({ repository: world.served }, session, { to: run, text: writeMessage({ ocx: 2, re: run, stop: {} }, "Stop it.") }))
    yield* Effect.promise(() => node())
    const messages = yield* waitForKind(run, "ended")
    expect(messages.filter((m) => m.kind === "ended").map((m) => m.content)).toEqual([{ outcome: "stopped" }])
  }), 180_000)
})
