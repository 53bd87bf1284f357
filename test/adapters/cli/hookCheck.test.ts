import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { promisify } from "node:util"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { readHooks } from "../../../src/node/HookInstall.js"
import { hook } from "../../../src/tools/hook.js"
import { unhook } from "../../../src/tools/unhook.js"
import { users } from "../../support/nodeWorld.js"
import { closeHookWorld, makeHookWorld, type HookWorld } from "../../node/hookWorld.js"

// `ocx2 hook --node USER --check` (issue 11, defect 3): the node's start on the server's host,
// the restart recovery `node --check` is on a clone's, offered by the bundled program with
// ocx2's own options after the tool's name.

const program = Path.join(import.meta.dirname, "../../../dist/ocx2.mjs")
const ocx2 = async (...args: Array<string>) => {
  try {
    const { stdout, stderr } = await promisify(ChildProcess.execFile)("node", [program, ...args], { env: { ...process.env, USER: "root" } })
    return { code: 0, stdout, stderr }
  } catch (error: any) {
    return { code: error.code as number, stdout: error.stdout as string, stderr: error.stderr as string }
  }
}

let world: HookWorld
beforeAll(async () => {
  world = await makeHookWorld()
}, 120_000)
afterAll(() => closeHookWorld(world))

const check = (...more: Array<string>) =>
  ocx2("hook", "--node", users.node.login, "--check", "--root", world.root, "--repository", world.repository, "--user", users.admin.login, "--json", ...more)

describe("hook --node USER --check", () => {
  // real processes: the tool's calls and the bundled program
  it.live("without --node is refused, naming --node, and installs nothing", () =>
    Effect.gen(function*() {
      const refused = yield* Effect.promise(() => world.call(hook, { root: world.root, check: true }))
      expect(refused.stopped.reason).toBe("refused")
      expect(refused.stopped.message).toContain("name it with --node USER")
      expect(yield* readHooks(world.repository)).toEqual([])
      const cli = yield* Effect.promise(() => ocx2("hook", "--check", "--root", world.root, "--repository", world.repository, "--user", users.admin.login))
      expect(cli.code).toBe(1)
      expect(cli.stderr).toContain("hook: refused: hook --check is the node starting")
    }), 90_000)

  it("is the node's start whether or not the hook is installed, and says so", async () => {
    const first = await check()
    expect(first.stderr).toBe("")
    expect(first.code).toBe(0)
    const answer = JSON.parse(first.stdout)
    expect(answer.stopped).toEqual({ reason: "completed" })
    expect(answer.output).toMatchObject({ hook: "installed", node: users.node.login, check: true, runs: [] })
    expect(answer.output.why).toContain("asked with --check")
    expect(answer.operations.some((o: any) => o.op === "check" && o.detail.includes("every open run"))).toBe(true)

    const again = JSON.parse((await check()).stdout)
    expect(again.output).toMatchObject({ hook: "unchanged", check: true })
    expect(again.operations.filter((o: any) => o.op === "hook").map((o: any) => o.detail)).toEqual([
      expect.stringMatching(/^already installed/)
    ])
  }, 120_000)

  it.live("decides every open run for USER: a run written while no hook ran is among them", () =>
    Effect.gen(function*() {
      expect((yield* Effect.promise(() => world.call(unhook, { root: world.root }))).stopped.reason).toBe("completed")
      const created = yield* Effect.promise(() => ocx2(
        "--repository", world.repository, "--user", users.admin.login, "--json", "create", "--title", "written while the node was down",
        "--node", users.node.login, "--objective", "o", "--fields", JSON.stringify({ process: { user: users.builder.login, command: ["true"] } })
      ))
      const run = JSON.parse(created.stdout).output.run as string
      expect(run).toMatch(/^[0-9a-f]{40,64}$/)
      const dry = JSON.parse((yield* Effect.promise(() => check("--dry-run"))).stdout)
      expect(dry.stopped).toEqual({ reason: "dry_run" })
      expect(dry.output.check).toBe(true)
      expect(dry.output.runs.map((r: any) => r.run)).toEqual([run])
      expect(yield* readHooks(world.repository)).toEqual([])
    }), 120_000)
})

describe("a node without a server URL (issue 40)", () => {
  it("is warned of at hook and at status, naming refusal 8 and what mends it; with one, neither warns", async () => {
    // this world's repository has no email-url, and the hook is given no --server-url
    const installed = await ocx2("--repository", world.repository, "--user", users.admin.login, "hook", "--node", users.node.login, "--root", world.root)
    expect(installed.code).toBe(0)
    expect(installed.stdout).toMatch(/the node lab has no server URL: every run with a clone step will be refused \(refusal 8/)
    expect(installed.stdout).toContain(`hook --node lab --server-url URL`)
    const status = JSON.parse((await ocx2("--repository", world.repository, "--json", "status", "--root", world.root)).stdout)
    expect(status.output.warnings).toEqual([expect.stringMatching(/^the node lab has no server URL: .*refusal 8/)])
    expect(status.output.serverUrl).toBeUndefined()

    const url = "http://127.0.0.1:1/served"
    const given = JSON.parse((await ocx2("--repository", world.repository, "--user", users.admin.login, "--json", "hook", "--node", users.node.login, "--root", world.root, "--server-url", url)).stdout)
    expect(given.output).toMatchObject({ serverUrl: url })
    expect(given.output.warnings).toBeUndefined()
    const after = JSON.parse((await ocx2("--repository", world.repository, "--json", "status", "--root", world.root)).stdout)
    expect(after.output).toMatchObject({ node: "lab", serverUrl: url })
    expect(after.output.warnings).toBeUndefined()
  }, 120_000)
})
