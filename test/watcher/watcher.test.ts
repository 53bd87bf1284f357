import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { readMessage } from "../../src/protocol/Envelope.js"
import { fossil, webLogin, webPage } from "../support/fossilServer.js"
import { makeNodeWorld, shellRun, users, type NodeWorld } from "../support/nodeWorld.js"

// The watcher end to end: a real fossil server for the record, real bubblewrap for the process.

let world: NodeWorld
beforeAll(async () => {
  world = await makeNodeWorld()
}, 120_000)
afterAll(async () => {
  await world?.close()
})

const messages = async (run: string) =>
  (await world.thread(run)).flatMap((post) => {
    const reading = readMessage(post.text)
    return reading._tag === "Message" && reading.re === run ? [{ ...reading, sender: post.sender, hash: post.hash }] : []
  })

describe("the watcher", () => {
  it("runs a build: one started and one ended from the node user, kept logs, the verdict and the published file", async () => {
    const run = await world.post(shellRun(world,
      "read line; echo \"$line\" > $0/first-line; cat tree/hello.txt; make -C tree image; echo to-stderr >&2; exit 3",
      {
        command: ["sh", "-c", "cd $$workspace$$ && read line && echo \"$line\" > first-line && cat tree/hello.txt && make -C tree image && cp tree/out/board.img board.img && echo to-stderr >&2 && exit 3"],
        verdict: true,
        unversioned_files: [{ at: "$$workspace$$/board.img", as: "builds/board.img" }]
      }))
    const exit = await world.watch(run)
    expect(exit.code).toBe(0)
    const replies = await messages(run)
    expect(replies.map((m) => [m.kind, m.sender])).toEqual([["started", users.node.login], ["ended", users.node.login]])
    expect(replies[1]!.content).toEqual({ outcome: "exited", exit: 3 })
    const started = replies[0]!.content as { values: Record<string, string> }
    const workspace = Path.join(world.root, "work", run)
    expect(started.values).toEqual({ workspace, tree: Path.join(workspace, "tree"), checkin: world.trunk })

    const thread = await world.thread(run)
    const kept = thread.find((p) => p.text.startsWith("The process exited 3"))!
    expect(kept.sender).toBe(users.node.login)
    expect(kept.text).toContain("to-stderr")
    expect(kept.text).toContain("hello from trunk") // stdout is kept on failure
    expect(readMessage(kept.text)._tag).toBe("NoMessage")

    // the process got its first line, ran as uid 1000 and wrote its logs in the workspace
    expect(JSON.parse(Fs.readFileSync(Path.join(workspace, "first-line"), "utf8"))).toEqual({ run, objective: "a test run" })
    expect(Fs.statSync(Path.join(workspace, "first-line")).uid).toBe(1000)
    expect(Fs.readFileSync(Path.join(workspace, "stderr.log"), "utf8")).toBe("to-stderr\n")

    // the verdict on the check-in, as the served repository holds it
    const tags = await fossil(["tag", "list", "--raw", world.trunk, "-R", world.repository])
    expect(tags).toContain(`ci=fail: exit 3 (against ${run})`)
    // the unversioned file, and the reply naming it
    expect(await fossil(["uv", "cat", "builds/board.img", "-R", world.repository])).toBe("board\n")
    expect(thread.some((p) => p.text.includes("builds/board.img: 6 bytes, hash"))).toBe(true)
    // ended, the kept logs and the verdict arrived in one write: one receipt, so one hold of the served file
    const receiptOf = async (where: string) =>
      (await fossil(["sql", "-R", world.repository, `SELECT rcvid FROM blob WHERE ${where}`])).trim()
    const endedReceipt = await receiptOf(`uuid='${replies[1]!.hash}'`)
    expect(endedReceipt).toMatch(/^\d+$/)
    expect(await receiptOf(`uuid='${kept.hash}'`)).toBe(endedReceipt)
    expect(await receiptOf(`rid=(SELECT srcid FROM tagxref JOIN tag USING(tagid) WHERE tagname='ci' AND rid=(SELECT rid FROM blob WHERE uuid='${world.trunk}'))`)).toBe(endedReceipt)
    expect(await receiptOf(`uuid='${replies[0]!.hash}'`)).not.toBe(endedReceipt)
    // Fossil's own page shows the ended reply
    const session = await webLogin(world.server.url, users.admin.login, users.admin.password)
    const page = await webPage(`${world.server.url}forumpost/${replies[1]!.hash}`, session)
    expect(page.status).toBe(200)
    expect(page.text).toMatch(/outcome(&quot;|")\s*:\s*(&quot;|")exited/)
  }, 120_000)

  it("answers a run with an unknown key ended refused, naming the key, and launches nothing", async () => {
    const run = await world.post({ ...shellRun(world, "touch $$workspace$$/launched"), node: "lab" })
    await world.watch(run)
    const replies = await messages(run)
    expect(replies.map((m) => m.kind)).toEqual(["ended"])
    expect(replies[0]!.content).toEqual({ outcome: "refused", note: expect.stringContaining("node") })
    expect(replies[0]!.sender).toBe(users.node.login)
  }, 90_000)

  it("answers a run from a user without the capability refused (refusal 1)", async () => {
    const run = await world.post(shellRun(world, "true"), { as: users.stranger.login })
    await world.watch(run)
    const replies = await messages(run)
    expect(replies.map((m) => m.kind)).toEqual(["ended"])
    expect((replies[0]!.content as { note: string }).note).toMatch(/^refusal 1: .*mallory/)
  }, 90_000)

  it("refuses a run that binds the care directory (refusal 7)", async () => {
    const run = await world.post(shellRun(world, "true", {}, {
      sandbox: { ...shellRun(world, "").sandbox, read_only: ["/usr", `${world.root}/care`] }
    }))
    await world.watch(run)
    const replies = await messages(run)
    expect(replies.map((m) => m.kind)).toEqual(["ended"])
    expect((replies[0]!.content as { note: string }).note).toMatch(/^refusal 7: .*care/)
  }, 90_000)

  it("a stop in the run's inbox ends its running process stopped", async () => {
    const run = await world.post(shellRun(world, "echo up > $$workspace$$/up; sleep 60"))
    const watching = world.watch(run)
    const up = Path.join(world.root, "work", run, "up")
    for (let i = 0; i < 200 && !Fs.existsSync(up); i++) await new Promise((r) => setTimeout(r, 50))
    Fs.appendFileSync(Path.join(world.root, "care", `${run}.inbox`), `${JSON.stringify({ stop: "test" })}\n`)
    await watching
    const replies = await messages(run)
    expect(replies.map((m) => [m.kind, m.content])).toEqual([["started", expect.anything()], ["ended", { outcome: "stopped" }]])
  }, 120_000)

  it("a second watcher for a run in care does nothing, and a watcher for an ended run writes nothing", async () => {
    const run = await world.post(shellRun(world, "sleep 2"))
    const first = world.watch(run)
    await new Promise((r) => setTimeout(r, 700))
    await world.watch(run)
    await first
    await world.watch(run)
    const replies = await messages(run)
    expect(replies.map((m) => m.kind)).toEqual(["started", "ended"])
  }, 120_000)

  it("a process past its wall limit is ended budget, naming wall", async () => {
    const run = await world.post(shellRun(world, "sleep 30", {}, { limits: { wall: "2s" } }))
    await world.watch(run)
    const replies = await messages(run)
    expect(replies.map((m) => [m.kind, m.content])).toEqual([["started", expect.anything()], ["ended", { outcome: "budget", note: "wall" }]])
  }, 120_000)

  it("a memory limit on a host that cannot provide it is refused (refusal 6)", async () => {
    // the host's measured capabilities, as the watcher caches them, say: no memory controller
    const cache = Path.join(world.root, "node", "capabilities.json")
    Fs.mkdirSync(Path.dirname(cache), { recursive: true })
    Fs.writeFileSync(cache, JSON.stringify({
      sandbox: true, wall: true, cpu: true, file_size: true, processes: true, memory: false,
      notes: ["memory: no cgroup memory controller here"]
    }))
    try {
      const run = await world.post(shellRun(world, "true", {}, { limits: { wall: "1m", memory: "64M" } }))
      await world.watch(run)
      const replies = await messages(run)
      expect(replies.map((m) => [m.kind, m.content])).toEqual([
        ["ended", { outcome: "refused", note: "refusal 6: limits.memory: this host cannot provide it" }]
      ])
    } finally {
      Fs.rmSync(cache, { force: true })
    }
  }, 90_000)

  it("a memory limit where the host provides it ends a memory hog budget, naming memory", async () => {
    const run = await world.post(shellRun(world, "", {
      command: ["python3", "-c", "x = []\nwhile True: x.append(bytearray(8 << 20))"]
    }, { limits: { wall: "1m", memory: "64M" } }))
    await world.watch(run)
    const replies = await messages(run)
    expect(replies.map((m) => [m.kind, m.content])).toEqual([["started", expect.anything()], ["ended", { outcome: "budget", note: "memory" }]])
  }, 120_000)
})
