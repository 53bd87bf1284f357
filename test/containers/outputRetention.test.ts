import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { pruneOutputs } from "../../src/containers/ProgramOutput.js"

// Every container's output used to stay under ROOT/output for good: each identity now keeps the
// newest containers' output, and what a dead server left unnamed goes after a day.

const dirs: Array<string> = []
afterEach(() => {
  for (const dir of dirs.splice(0)) Fs.rmSync(dir, { recursive: true, force: true })
})

const idOf = (n: number) => `${"a".repeat(40)}${String(n).padStart(3, "0")}`

describe("the program output an identity keeps", () => {
  it("is the newest containers' output; older ones and stale unnamed runs are removed", () => {
    const top = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-output-"))
    dirs.push(top)
    const now = Date.now()
    for (let n = 0; n < 8; n++) {
      const dir = Path.join(top, idOf(n))
      Fs.mkdirSync(dir)
      Fs.writeFileSync(Path.join(dir, "stdout"), `run ${n}\n`)
      // container n last written n minutes after the first
      const at = new Date(now - (8 - n) * 60_000)
      Fs.utimesSync(dir, at, at)
    }
    const stale = Path.join(top, ".run-0011223344556677")
    const fresh = Path.join(top, ".run-8899aabbccddeeff")
    Fs.mkdirSync(stale)
    Fs.mkdirSync(fresh)
    const dayAgo = new Date(now - 25 * 60 * 60 * 1000)
    Fs.utimesSync(stale, dayAgo, dayAgo)
    expect(pruneOutputs(top, 5, now)).toBe(4)
    expect(Fs.readdirSync(top).sort()).toEqual([".run-8899aabbccddeeff", ...[3, 4, 5, 6, 7].map(idOf)].sort())
    // what is kept is read as before
    expect(Fs.readFileSync(Path.join(top, idOf(7), "stdout"), "utf8")).toBe("run 7\n")
    expect(pruneOutputs(top, 5, now)).toBe(0)
  })

  it("a missing top removes nothing and throws nothing", () => {
    expect(pruneOutputs(Path.join(Os.tmpdir(), "ocx2-output-none-here"), 5)).toBe(0)
  })
})
