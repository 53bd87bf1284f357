import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import { project, runProgram } from "../shipped/shippedWorld.js"

// The README's first command runs the main job on an embedded default: bin/demo is the setup and
// then this program. Run here as bin/demo runs it after the setup, with --no-wait (as CI and a
// script would): the runs answered, the pages served, and no address printed of a server that
// is closed by the time a person reads it.

describe("the demo", () => {
  it("npm run demo names the demo program the README names", () => {
    const scripts = JSON.parse(Fs.readFileSync(Path.join(project, "package.json"), "utf8")).scripts as Record<string, string>
    expect(scripts.demo).toBe("bin/demo")
    expect(Fs.statSync(Path.join(project, "bin", "demo")).mode & 0o111).not.toBe(0)
  })

  it("--no-wait: both runs answered, the pages answer from the extension root, and no address of the closed server is printed", async () => {
    const ran = await runProgram(process.execPath, [Path.join(project, "dist", "ocx2-demo.mjs"), "--no-wait"], { cwd: project })
    expect(ran.code, ran.stderr).toBe(0)
    expect(ran.stdout).toContain("Ended: exited 0.")
    expect(ran.stdout).toContain("Ended: refused: refusal 2: node: a key version 2 does not define.")
    expect(ran.stdout).toMatch(/the verdict on trunk: +ci=pass/)
    expect(ran.stdout).toContain("builds/board.img")
    expect(ran.stdout).toContain("the OCX pages (ext/ocx2-cgi) answered HTTP 200")
    expect(ran.stdout).not.toMatch(/https?:\/\//)
  }, 180_000)
})
