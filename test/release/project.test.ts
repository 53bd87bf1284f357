import { execFile } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { promisify } from "node:util"
import { afterAll, describe, expect, it } from "vitest"
import { accept } from "../../src/tools/accept.js"
import { stage } from "../../src/tools/stage.js"
import { call, linkOf, tempDir } from "./fakeCheckout.js"

// Stages ocx2's own checkout: its real gate (tsc and the protocol tests), its real build, and
// the real better-sqlite3 addon copied beside the bundles. Slow by nature: it runs the gate.
const project = Path.resolve(import.meta.dirname, "../..")
const run = promisify(execFile)

let root: string | undefined
afterAll(() => {
  if (root !== undefined) Fs.rmSync(root, { recursive: true, force: true })
})

describe("ocx2's own checkout", () => {
  it("is gated, built, staged, smoked, accepted and served", async () => {
    root = tempDir("ocx2-project-release-")
    const answer = await call(stage, { checkout: project, root })
    const gateLog = Path.join(root, "staged", "gate.log")
    // a failing gate shows its log's end here, so the report says why
    const tail = Fs.existsSync(gateLog) ? Fs.readFileSync(gateLog, "utf8").split("\n").slice(-30).join("\n") : "(no gate.log)"
    expect(answer.stopped, tail).toEqual({ reason: "completed" })
    const name = answer.output!.staged
    const release = Path.join(root, "staged", name)
    expect(answer.output?.programs).toContain("ocx2")
    expect(Fs.readFileSync(gateLog, "utf8")).toMatch(/gate ended: exit status 0/)

    // the staged ocx2 answers from anywhere, and the real native addon loads from beside it
    const listed = await run(Path.join(release, "ocx2"), ["--json", "list"], { cwd: "/" })
    expect(JSON.parse(listed.stdout)).toMatchObject({ tool: "list", stopped: { reason: "completed" } })
    const sqlite = await run("node", [
      "--input-type=module",
      "-e",
      "import { createRequire } from 'node:module'; const require = createRequire(process.cwd() + '/ocx2'); " +
      "const Database = require('better-sqlite3'); console.log(new Database(':memory:').prepare('select 41 + 1 as x').get().x)"
    ], { cwd: release })
    expect(sqlite.stdout.trim()).toBe("42")
    // copied, not linked: the release stands on its own when the checkout moves on
    expect(Fs.realpathSync(Path.join(release, "node_modules", "better-sqlite3"))).toBe(Path.join(release, "node_modules", "better-sqlite3"))

    const accepted = await call(accept, { root })
    expect(accepted.stopped).toEqual({ reason: "completed" })
    expect(linkOf(root, "current")).toBe(`staged/${name}`)
    const served = await run(Path.join(root, "current", "ocx2"), ["--json", "list"], { cwd: "/" })
    expect(JSON.parse(served.stdout).tool).toBe("list")
  }, 300_000)
})
