import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runFossil } from "../../src/fossil/Command.js"
import { seedBuildRun, seedSessionRun } from "../../src/demo/SeedExamples.js"
import { writeMessage } from "../../src/protocol/Envelope.js"
import { hook } from "../../src/tools/hook.js"
import { fossil, webLogin, webNewThread, webReply, type WebSession } from "../support/fossilServer.js"
import { users } from "../support/nodeWorld.js"
import { closeHookWorld, type HookWorld, makeHookedWorld, waitFor } from "./hookWorld.js"

// Seed 000 2.19's two runs, posted through the forum's web form exactly as the seed writes them,
// with only the words in capitals made concrete for this host: the node user (LAB-USER and
// SERVER-HOOK-USER are both this host's node, lab), the server-code, the process users, the
// agent's sign-in directory and its program. Nothing else is added, not even /bin, /lib64 or a
// limit: on a merged-/usr host (Debian 12) the sandbox gets the host's links into /usr itself.

let world: HookWorld
let alice: WebSession
let agentHome: string
beforeAll(async () => {
  const made = await makeHookedWorld()
  world = made.world
  expect(made.installed.stopped).toEqual({ reason: "completed" })
  // the agent's clone step clones from the server's URL, which the node learns when it is installed
  const withUrl = await world.call(hook, { node: users.node.login, root: world.root, serverUrl: world.server.url })
  expect(withUrl.stopped).toEqual({ reason: "completed" })
  alice = await webLogin(world.server.url, users.admin.login, users.admin.password)
  // trunk gains what the build example makes: `make -C TREE image` writes out/board.img
  const checkout = Path.join(world.dir, "checkout")
  Fs.writeFileSync(Path.join(checkout, "Makefile"), "image:\n\tmkdir -p out && echo board > out/board.img\n")
  for (const args of [["add", "Makefile"], ["commit", "-m", "the board's image", "--user-override", users.admin.login]]) {
    const r = await runFossil(args, { user: users.admin.login, cwd: checkout })
    if (r.code !== 0) throw new Error(`fossil ${args.join(" ")}: ${r.stderr}${r.stdout}`)
  }
  agentHome = Path.join(world.dir, "agent-sign-in")
  Fs.mkdirSync(agentHome, { mode: 0o755 })
}, 90_000)
afterAll(() => closeHookWorld(world))

const post = (title: string, message: object) =>
  webNewThread(world.server, alice, { title, text: writeMessage(message as never, "As 2.19 writes it.") })

describe("2.19's two runs, as the seed writes them", () => {
  it("the build: exited 0, a ci verdict on the check-in it built, the image published", async () => {
    const run = await post("Build trunk for the lab board", {
      ocx: 2,
      to: users.node.login,
      run: seedBuildRun({ serverCode: world.serverCode, buildUser: users.builder.login })
    })
    const replies = await world.waitEnded(run, 90_000)
    expect(replies.map((m) => [m.kind, m.sender])).toEqual([["started", "lab"], ["ended", "lab"]])
    expect(replies[1]!.content).toEqual({ outcome: "exited", exit: 0 })
    const started = replies[0]!.content as { values: Record<string, string> }
    const checkin = started.values.checkin!
    const tags = await waitFor(async () => {
      const raw = await fossil(["tag", "list", "--raw", checkin, "-R", world.repository])
      return raw.split("\n").find((l) => l.startsWith("ci=")) ?? undefined
    }, 90_000)
    expect(tags).toBe(`ci=pass: exit 0 (against ${run})`)
    const files = await waitFor(async () => {
      const listed = await fossil(["uv", "list", "-R", world.repository])
      return listed.includes("builds/board.img") ? listed : undefined
    }, 90_000)
    expect(files).toContain("builds/board.img")
  }, 240_000)

  it("the agent's session: started with its workspace and password, one process per post it hears, stopped by a stop", async () => {
    const run = await post("Talk about the parser", {
      ocx: 2,
      to: users.node.login,
      run: seedSessionRun({
        serverCode: world.serverCode,
        agentSignIn: agentHome,
        agentUser: users.runner.login,
        // the agent: reads its run and the post it is started for, and answers it
        agentCommand: ["sh", "-c", "read -r run; read -r post; ls Makefile; echo \"answered: $post\""],
        personUser: users.admin.login
      })
    })
    await world.waitFor("the run is answered started", async () => ((await world.replies(run)).some((m) => m.kind === "started") ? true : undefined), { ms: 90_000, run })
    const started = (await world.replies(run)).find((m) => m.kind === "started")!
    expect(started.sender).toBe("lab")
    const values = (started.content as { values: Record<string, string> }).values
    expect(Object.keys(values)).toEqual(expect.arrayContaining(["workspace", "password"]))
    expect((started.content as { limits: unknown }).limits).toEqual({ wall: "8h" })

    const question = await webReply(world.server, alice, { to: run, text: "Does the parser take tabs?" })
    // the process started for the post read its run and the post, and ran in the run's checkout
    const stdout = Path.join(values.workspace!, "stdout.log")
    const answered = await waitFor(async () => {
      const text = Fs.existsSync(stdout) ? Fs.readFileSync(stdout, "utf8") : ""
      return text.includes("answered:") ? text : undefined
    }, 90_000)
    expect(answered).toContain(question)
    expect(answered).toContain("Makefile")

    await world.reply(users.admin.login, run, writeMessage({ ocx: 2, re: run, stop: {} }, "Stop."))
    const replies = await world.waitEnded(run, 90_000)
    expect(replies.filter((m) => m.kind === "ended").map((m) => m.content)).toEqual([{ outcome: "stopped" }])
  }, 240_000)
})
