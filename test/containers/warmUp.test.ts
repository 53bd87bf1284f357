import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterEach, describe, expect, it, vi } from "vitest"
import { defaultCapabilities } from "../../src/containers/Capabilities.js"
import { warmUpRunPath } from "../../src/containers/WarmUp.js"

vi.setConfig({ testTimeout: 300_000 })

/**
 * The server's warm-up before it listens (src/containers/WarmUp.ts): one run of its own through
 * the whole path to the id and its stop, leaving nothing behind (its sockets' directory removed).
 */
const given = process.env.TMPDIR
afterEach(() => {
  if (given === undefined) delete process.env.TMPDIR
  else process.env.TMPDIR = given
})

describe("the warm-up", () => {
  it("serves one run of its own to its id and its end, and removes what it made", async () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-warm-test-"))
    // the warm-up's directory is made under TMPDIR: this test's own
    process.env.TMPDIR = dir
    try {
      expect(await warmUpRunPath(defaultCapabilities)).toBe(true)
      expect(Fs.readdirSync(dir)).toEqual([])
    } finally {
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
