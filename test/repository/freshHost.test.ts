/**
 * A host where fossil never ran: its first commands, two at once, each create the user's global
 * configuration, and one of them may fail "table global_config already exists" (two `fossil init`
 * started together from a shell failed so every time; from here, within ten rounds). A repository
 * made then is made all the same.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { createRepository, makeTempDir } from "../../src/demo/LocalServer.js"

describe("repositories made on a host where fossil never ran", () => {
  const dir = makeTempDir("ocx2-fresh-host-")
  afterAll(() => Fs.rmSync(dir, { recursive: true, force: true }))

  it("are made, two at once, while both fossils create the configuration", async () => {
    const home = process.env.HOME
    // HOME names the configuration of every fossil this file starts; no other file runs in this
    // worker meanwhile, and this file's one test is the only one running
    process.env.HOME = Path.join(dir, "home")
    Fs.mkdirSync(process.env.HOME)
    try {
      for (const round of [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]) {
        Fs.rmSync(Path.join(dir, "home"), { recursive: true, force: true })
        Fs.mkdirSync(Path.join(dir, "home"))
        const made = await Promise.all(["a", "b"].map((name) => createRepository(Path.join(dir, `${name}${round}.fossil`), [])))
        expect(made.every((path) => Fs.statSync(path).size > 0)).toBe(true)
      }
    } finally {
      if (home === undefined) delete process.env.HOME
      else process.env.HOME = home
    }
  }, 120_000)
})
