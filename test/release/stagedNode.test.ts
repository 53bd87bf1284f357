import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { maxFirstLine, namingNode, nodeMismatch, stagedNodeProblem, thisNode } from "../../src/release/StagedNode.js"
import { lastHookLogEntry } from "../../src/root/HookFiles.js"
import { hook } from "../../src/tools/hook.js"
import { users } from "../support/nodeWorld.js"
import { closeHookWorld, dist, makeHookWorld, type HookWorld } from "../node/hookWorld.js"

// A release names the Node it was staged with (release.json; its programs' first line names that
// Node's path). On a host whose Node was upgraded in place, the release runs on another ABI and its
// first native addon fails with a NODE_MODULE_VERSION message; the hook and the supervisor now say
// plainly what happened and what mends it. Another Node is simulated by the release.json of another
// ABI: what the check compares, and all it can see.

const dirs: Array<string> = []
afterEach(() => {
  for (const dir of dirs.splice(0)) Fs.rmSync(dir, { recursive: true, force: true })
})

const releaseWith = (node: object | undefined) => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-stagednode-"))
  dirs.push(dir)
  Fs.writeFileSync(Path.join(dir, "release.json"), JSON.stringify({ name: "0123456789ab", ...(node === undefined ? {} : { node }) }))
  return dir
}

const otherNode = { version: "v99.1.0", modules: "999", execPath: "/usr/bin/node" }

describe("the Node a release was staged with", () => {
  it("is this one: nothing to say; a release that records none: nothing to say", () => {
    expect(nodeMismatch(releaseWith(thisNode()))).toBeUndefined()
    expect(nodeMismatch(releaseWith(undefined))).toBeUndefined()
  })

  it("of another ABI: says which was staged, which runs, and to restage", () => {
    const running = thisNode()
    const words = nodeMismatch(releaseWith(otherNode))!
    expect(words).toContain(`was staged with Node 99 (v99.1.0), this host has ${running.version.replace(/^v/, "").split(".")[0]} (${running.version})`)
    expect(words).toContain(`(ABI 999, not ${running.modules}): restage the release with this host's Node`)
  })

  it("gone from the host: its programs cannot start, and status from another Node says so", () => {
    expect(stagedNodeProblem(releaseWith({ ...otherNode, execPath: "/nonexistent/bin/node" })))
      .toBe("the release " + Path.basename(dirs.at(-1)!) + " was staged with Node v99.1.0 at /nonexistent/bin/node, which is gone: its programs cannot start; restage the release with this host's Node (docs/operations.md, \"After a Node upgrade\")")
    expect(stagedNodeProblem(releaseWith(thisNode()))).toBeUndefined()
  })
})

let world: HookWorld
beforeAll(async () => {
  world = await makeHookWorld({ fastHooks: false })
  const installed = await world.call(hook, { node: users.node.login, root: world.root })
  expect(installed.stopped).toEqual({ reason: "completed" })
}, 120_000)
afterAll(async () => {
  await closeHookWorld(world)
})

describe("a release whose Node changed under it, as installed", () => {
  it("the hook says so in its log, and the supervisor on its standard error and log, exiting 1", () => {
    const release = Fs.realpathSync(Path.join(world.root, "current"))
    Fs.writeFileSync(Path.join(release, "release.json"), JSON.stringify({ name: Path.basename(release), node: otherNode }))
    try {
      const log = Path.join(world.root, "node", "hook.log")
      const ran = ChildProcess.spawnSync(Path.join(world.root, "ocx2-hook"), ["--log", log, world.repository], { input: "", cwd: "/", env: {} })
      expect(ran.status).toBe(0)
      expect(lastHookLogEntry(log)?.did).toEqual([expect.stringMatching(/^the release \w+ was staged with Node 99 \(v99\.1\.0\), this host has \d+ .*: restage the release with this host's Node/)])
      const supervise = ChildProcess.spawnSync(Path.join(world.root, "current", "ocx2-supervise"), ["--node", users.node.login, "--root", world.root], { cwd: "/", env: {}, encoding: "utf8", timeout: 60_000 })
      expect(supervise.status, supervise.stderr).toBe(1)
      expect(supervise.stderr).toMatch(/^ocx2 supervise: the release \w+ was staged with Node 99 \(v99\.1\.0\)/)
      // both ran on the Node the release names (the one running these tests), though their
      // environment is bare: the supervisor's first line takes options (env -S), and a bare PATH
      // finds the host's own Node (an older one where bin/setup brought .node/)
      const running = `this host has ${process.version.replace(/^v/, "").split(".")[0]} (${process.version}) at ${Fs.realpathSync(process.execPath)}`
      expect(lastHookLogEntry(log)?.did?.[0]).toContain(running)
      expect(supervise.stderr).toContain(running)
    } finally {
      Fs.rmSync(Path.join(release, "release.json"), { force: true })
    }
  }, 120_000)
})

describe("status from a checkout, when the active release's Node is gone from the host", () => {
  it("names the Node the release needs and that its programs cannot start", () => {
    const release = Fs.realpathSync(Path.join(world.root, "current"))
    Fs.writeFileSync(Path.join(release, "release.json"), JSON.stringify({ name: Path.basename(release), node: { ...otherNode, execPath: "/nonexistent/bin/node" } }))
    try {
      const status = ChildProcess.spawnSync(process.execPath, [Path.join(dist, "ocx2.mjs"), "--json", "--repository", world.repository, "status", "--root", world.root], { encoding: "utf8", timeout: 60_000 })
      expect(status.status, status.stderr).toBe(0)
      expect(JSON.parse(status.stdout).output.warnings).toContain(
        `the release ${Path.basename(release)} was staged with Node v99.1.0 at /nonexistent/bin/node, which is gone: its programs cannot start; restage the release with this host's Node (docs/operations.md, "After a Node upgrade")`
      )
    } finally {
      Fs.rmSync(Path.join(release, "release.json"), { force: true })
    }
  }, 120_000)
})


describe("a staged program's first line", () => {
  it("names the staging Node, keeps the environment before it, and refuses a line the kernel would not read whole", () => {
    expect(namingNode("#!/usr/bin/env node\nx\n", "/opt/node/bin/node")).toBe("#!/opt/node/bin/node\nx\n")
    expect(namingNode("#!/usr/bin/env -S A=1 B=2 node --no-opt\nx\n", "/opt/node/bin/node"))
      .toBe("#!/usr/bin/env -S A=1 B=2 /opt/node/bin/node --no-opt\nx\n")
    const long = `/${"n".repeat(maxFirstLine)}/node`
    expect(() => namingNode("#!/usr/bin/env -S A=1 node --no-opt\nx\n", long)).toThrow(/past the 255 the kernel reads/)
  })
})
