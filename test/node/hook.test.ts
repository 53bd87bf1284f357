import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import { composeForumPost } from "../../src/fossil/Artifact.js"
import { type HookLogEntry, lastHookLogEntry } from "../../src/root/HookFiles.js"
import { writeMessage } from "../../src/protocol/Envelope.js"
import { status } from "../../src/tools/status.js"
import { cloneAs, pushArtifacts, webLogin, webNewThread, type WebSession } from "../support/fossilServer.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { waitFor, signedInHookedWorld, type HookWorld } from "./hookWorld.js"

// The hook end to end: a real fossil server in fast mode runs ROOT/ocx2-hook on each receipt;
// runs are posted as people post them (the web form, a push from a clone) and the node answers.

let world: HookWorld
let alice: WebSession
let mallory: WebSession
signedInHookedWorld(async (made, signedIn) => {
  world = made
  alice = signedIn
  mallory = await webLogin(world.server.url, users.stranger.login, users.stranger.password)
})

const post = (session: WebSession, run: object, title = "a run") =>
  webNewThread(world.server, session, { title, text: world.runText(run) })

const hookLogEntries = (): ReadonlyArray<HookLogEntry> =>
  Fs.readFileSync(Path.join(world.root, "node", "hook.log"), "utf8").trim().split("\n").map((line) => JSON.parse(line) as HookLogEntry)

const kinds = (replies: ReadonlyArray<{ kind: string; sender: string | undefined }>) => replies.map((m) => [m.kind, m.sender])

describe("the hook on the server", () => {
  it("a run posted through the web form gets one started and one ended (exited 0) from the node user", async () => {
    const began = Date.now()
    const run = await post(alice, shellRun(world, "echo hello"))
    const replies = await world.waitEnded(run, 90_000)
    const took = Date.now() - began
    expect(kinds(replies)).toEqual([["started", "lab"], ["ended", "lab"]])
    expect(replies[1]!.content).toEqual({ outcome: "exited", exit: 0 })
    expect(took).toBeLessThan(20_000)
    const last = lastHookLogEntry(Path.join(world.root, "node", "hook.log"))
    expect(last?.repository).toBe(Fs.realpathSync(world.repository))
    // the receipts of the node's own replies wake ROOT/ocx2-hook too; its cheap question answers
    // them without loading the round (nothing else is posted meanwhile, so no round takes them)
    for (const reply of replies) {
      const entry = await waitFor(() => hookLogEntries().find((e) => e.given.some((line) => line.startsWith(reply.hash))), 30_000)
      expect(entry?.did, `${reply.kind} ${reply.hash}`).toEqual([expect.stringMatching(/(^|arrived, )none a run for lab, a stop or a publish: nothing to decide$|^nothing arrived after the cursor$/)])
    }
  }, 180_000)

  it("a run pushed from a clone gets one started and one ended", async () => {
    const clone = await cloneAs(world.server.url, users.admin.login, users.admin.password, Path.join(world.dir, "alice.fossil"))
    const artifact = composeForumPost({ date: new Date(), user: users.admin.login, title: "a pushed run", text: world.runText(shellRun(world, "true")) })
    await pushArtifacts(clone, users.admin.login, [artifact])
    const replies = await world.waitEnded(artifact.hash, 90_000)
    expect(kinds(replies)).toEqual([["started", "lab"], ["ended", "lab"]])
    expect(replies[1]!.content).toEqual({ outcome: "exited", exit: 0 })
    // the hook was given the pushed artifact
    const log = Fs.readFileSync(Path.join(world.root, "node", "hook.log"), "utf8")
    expect(log).toContain(artifact.hash)
  }, 180_000)

  it("refuses an unknown key, a sender without the capability, and a path in ROOT/care, each ended refused with its note", async () => {
    const unknown = await post(alice, { ...shellRun(world, "true"), node: "lab" })
    const stranger = await post(mallory, shellRun(world, "true"))
    const care = await post(alice, shellRun(world, "true", {}, {
      sandbox: { ...shellRun(world, "").sandbox, read_only: ["/usr", `${world.root}/care`] }
    }))
    const notes = await Promise.all([unknown, stranger, care].map(async (run) => {
      const replies = await world.waitEnded(run, 90_000)
      expect(kinds(replies)).toEqual([["ended", "lab"]])
      const content = replies[0]!.content as { outcome: string; note: string }
      expect(content.outcome).toBe("refused")
      return content.note
    }))
    expect(notes[0]).toMatch(/^refusal 2: node/)
    expect(notes[1]).toMatch(/^refusal 1: .*mallory/)
    expect(notes[2]).toMatch(/^refusal 7: .*care/)
  }, 180_000)

  it("a stop posted by alice ends a running process stopped; a stop by mallory is ignored", async () => {
    const long = await post(alice, shellRun(world, "echo up > $$workspace$$/up; sleep 60"))
    // of another process user: a node keeps one run per process user in its care
    const short = await post(alice, shellRun(world, "echo up > $$workspace$$/up; sleep 4", { user: users.runner.login }))
    for (const run of [long, short]) {
      await world.waitFor("the run's process writes up in its workspace", () => (Fs.existsSync(Path.join(world.root, "work", run, "up")) ? true : undefined), { ms: 30_000, run })
    }
    await world.reply(users.stranger.login, short, writeMessage({ ocx: 2, re: short, stop: {} }, "stop, says mallory"))
    await world.reply(users.admin.login, long, writeMessage({ ocx: 2, re: long, stop: {} }, "stop, says alice"))
    const stopped = await world.waitEnded(long, 90_000)
    expect(stopped.filter((m) => m.kind !== "stop").map((m) => [m.kind, m.content])).toEqual([["started", expect.anything()], ["ended", { outcome: "stopped" }]])
    const ignored = await world.waitEnded(short, 90_000)
    expect(ignored.filter((m) => m.kind !== "stop").map((m) => [m.kind, m.content]))
      .toEqual([["started", expect.anything()], ["ended", { outcome: "exited", exit: 0 }]])
    const log = Fs.readFileSync(Path.join(world.root, "node", "hook.log"), "utf8")
    expect(log).toMatch(/does not count \(its sender holds neither admin nor setup\): ignored/)
  }, 180_000)

  it("status shows the hook installed, fast mode, the node, and the hook's last run", async () => {
    const answer = await world.call(status, { root: world.root }, { as: users.stranger.login })
    expect(answer.stopped.reason).toBe("completed")
    const output = answer.output!
    expect(output.caller).toEqual({ user: "mallory", capabilities: expect.stringContaining("o") })
    expect(output.hook?.state).toBe("installed")
    expect(output.backoffice?.mode).toBe("fast")
    expect(output.backoffice?.pollers.length).toBeGreaterThan(0)
    expect(output.node).toBe("lab")
    expect(output.lastRun?.did.length).toBeGreaterThan(0)
    expect(output.otherHooks).toEqual([])
  }, 90_000)
})
