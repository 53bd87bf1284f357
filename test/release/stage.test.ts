import { execFile, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { accept } from "../../src/tools/accept.js"
import { stage } from "../../src/tools/stage.js"
import { call, commit, control, linkOf, listing, makeFakeCheckout, planOf, tempDir } from "./fakeCheckout.js"

let base: string
let checkout: string
beforeAll(() => {
  base = tempDir("ocx2-stage-")
  checkout = makeFakeCheckout(base)
})
afterAll(() => Fs.rmSync(base, { recursive: true, force: true }))

const freshRoot = () => Fs.mkdtempSync(Path.join(base, "root-"))

describe("stage", { timeout: 60_000 }, () => {
  it("checks, builds, copies, smokes and offers the checkout as next", async () => {
    const root = freshRoot()
    const name = commit(checkout, "first release")
    const answer = await call(stage, { checkout, root })
    expect(answer.stopped).toEqual({ reason: "completed" })
    expect(answer.operations.map((o) => o.op)).toEqual(["checkout", "plan", "gate", "build", "copy", "smoke", "place", "link"])
    expect(answer.operations.every((o) => o.done)).toBe(true)
    expect(answer.output).toMatchObject({ root, staged: name, next: name, vcs: "git", modified: false, programs: ["ocx2", "ocx2-hook"] })
    expect(answer.output?.checkin).toMatch(new RegExp(`^${name}[0-9a-f]{28}$`))
    expect(answer.output?.current).toBeUndefined()

    const release = Path.join(root, "staged", name)
    expect(linkOf(root, "next")).toBe(`staged/${name}`)
    expect(Fs.readFileSync(Path.join(root, "staged", "gate.log"), "utf8")).toMatch(/gate: first check passed\ngate: all checks passed\n[\s\S]*gate ended: exit status 0/)
    expect(Fs.readFileSync(Path.join(root, "staged", "build.log"), "utf8")).toContain("build: bundled")
    // smoked twice from / with no environment, the second time with the code cache the first wrote
    expect(Fs.readFileSync(Path.join(root, "staged", "smoke.log"), "utf8")).toContain("smoke (the first run): answered as the list tool answers")
    expect(Fs.readFileSync(Path.join(root, "staged", "smoke.log"), "utf8")).toContain("smoke (the second run): answered as the list tool answers")
    for (const program of ["ocx2", "ocx2-hook"]) {
      expect(Fs.statSync(Path.join(release, program)).mode & 0o111).toBe(0o111)
      // the Node that staged it, by its real path: Fossil runs an extension's program with no PATH
      expect(Fs.readFileSync(Path.join(release, program), "utf8").startsWith(`#!${Fs.realpathSync(process.execPath)}\n`)).toBe(true)
    }
    expect(JSON.parse(Fs.readFileSync(Path.join(release, "package.json"), "utf8")).type).toBe("module")
    expect(JSON.parse(Fs.readFileSync(Path.join(release, "release.json"), "utf8"))).toMatchObject({
      name, vcs: "git",
      // the Node its programs' first line names, so a host whose Node changed says so (StagedNode.ts)
      node: { version: process.version, modules: process.versions.modules, execPath: Fs.realpathSync(process.execPath) }
    })
    // the runtime packages, without the native sources, build intermediates and install-time tools
    const modules = Path.join(release, "node_modules")
    expect(Fs.readdirSync(modules).sort()).toEqual(["better-sqlite3", "bindings", "file-uri-to-path"])
    expect(Fs.readdirSync(Path.join(modules, "better-sqlite3")).sort()).toEqual(["binding.gyp", "build", "lib", "package.json"])
    expect(Fs.readdirSync(Path.join(modules, "better-sqlite3", "build", "Release"))).toEqual(["better_sqlite3.node"])
    // the staged copy runs on its own, from anywhere, loading its packages from beside it
    const { stdout } = await promisify(execFile)(Path.join(release, "ocx2"), ["--json", "list"], { cwd: "/" })
    expect(JSON.parse(stdout)).toMatchObject({ tool: "list", stopped: { reason: "completed" } })
    expect(Fs.existsSync(Path.join(root, "staged", `${name}.partial`))).toBe(false)
  })

  it("a dry run changes nothing and logs exactly what the real call then does", async () => {
    const root = freshRoot()
    const name = commit(checkout, "dry run")
    const before = listing(root)
    const dry = await call(stage, { checkout, root }, { dryRun: true })
    expect(dry.stopped).toEqual({ reason: "dry_run" })
    expect(listing(root)).toEqual(before)
    expect(dry.operations.filter((o) => !o.done).map((o) => o.op)).toEqual(["gate", "build", "copy", "smoke", "place", "link"])
    expect(dry.output).toMatchObject({ staged: name, next: name })
    expect(dry.output?.programs).toBeUndefined()
    const real = await call(stage, { checkout, root })
    expect(real.stopped).toEqual({ reason: "completed" })
    expect(planOf(real)).toEqual(planOf(dry))
  })

  it("writes the gate's output into gate.log as it runs, and holds the root meanwhile", async () => {
    const root = freshRoot()
    commit(checkout, "a waiting gate")
    control(checkout, "gate-waits", true)
    try {
      const staging = call(stage, { checkout, root })
      const log = Path.join(root, "staged", "gate.log")
      const deadline = Date.now() + 15_000
      while (!(Fs.existsSync(log) && Fs.readFileSync(log, "utf8").includes("gate: first check passed"))) {
        if (Date.now() > deadline) throw new Error("gate.log never showed the gate's first line while it ran")
        await new Promise((r) => setTimeout(r, 25))
      }
      // the gate is still running: its first line is in the log, its last is not
      expect(Fs.readFileSync(log, "utf8")).not.toContain("all checks passed")
      const busy = await call(accept, { root })
      expect(busy.stopped.reason).toBe("refused")
      expect(busy.stopped.message).toContain("another stage, accept or rollback is changing this root")
      control(checkout, "gate-go", true)
      const answer = await staging
      expect(answer.stopped).toEqual({ reason: "completed" })
      expect(Fs.readFileSync(log, "utf8")).toContain("gate: all checks passed")
    } finally {
      control(checkout, "gate-waits", false)
      control(checkout, "gate-go", false)
    }
  })

  it("a failing gate leaves next as it was and says where its log is", async () => {
    const root = freshRoot()
    const good = commit(checkout, "good")
    expect((await call(stage, { checkout, root })).stopped.reason).toBe("completed")
    const bad = commit(checkout, "bad gate")
    control(checkout, "gate-fails", true)
    try {
      const answer = await call(stage, { checkout, root })
      expect(answer.stopped.reason).toBe("failed")
      expect(answer.stopped.message).toBe(`the gate failed (exit status 1); its log is ${Path.join(root, "staged", "gate.log")}`)
      expect(answer.operations.map((o) => o.op)).toEqual(["checkout", "plan"])
      expect(answer.output).toBeUndefined()
      expect(linkOf(root, "next")).toBe(`staged/${good}`)
      expect(Fs.existsSync(Path.join(root, "staged", bad))).toBe(false)
      expect(Fs.readFileSync(Path.join(root, "staged", "gate.log"), "utf8")).toContain("gate: second check FAILED")
    } finally {
      control(checkout, "gate-fails", false)
    }
  })

  it("a failing smoke leaves next as it was, removes the copy and says where its log is", async () => {
    const root = freshRoot()
    const good = commit(checkout, "good")
    expect((await call(stage, { checkout, root })).stopped.reason).toBe("completed")
    const bad = commit(checkout, "bad smoke")
    control(checkout, "bad-smoke", true)
    try {
      const answer = await call(stage, { checkout, root })
      expect(answer.stopped.reason).toBe("failed")
      expect(answer.stopped.message).toBe(
        `the smoke failed (its answer names the tool "echo", not "list"); its log is ${Path.join(root, "staged", "smoke.log")}`
      )
      expect(answer.operations.map((o) => o.op)).toEqual(["checkout", "plan", "gate", "build", "copy"])
      expect(linkOf(root, "next")).toBe(`staged/${good}`)
      expect(Fs.readdirSync(Path.join(root, "staged")).filter((f) => f.startsWith(bad))).toEqual([])
    } finally {
      control(checkout, "bad-smoke", false)
    }
  })

  it("restaging the next release replaces its copy; a served release is never replaced", async () => {
    const root = freshRoot()
    const name = commit(checkout, "served")
    expect((await call(stage, { checkout, root })).stopped.reason).toBe("completed")
    const again = await call(stage, { checkout, root })
    expect(again.stopped.reason).toBe("completed")
    expect(again.operations.find((o) => o.op === "place")?.detail).toContain("replacing the copy staged before")
    expect((await call(accept, { root })).stopped.reason).toBe("completed")
    const served = await call(stage, { checkout, root })
    expect(served.stopped).toEqual({
      reason: "refused",
      message: `${name} is served as current (${Path.join(root, "staged", name)}); a served release is never replaced`
    })
  })

  it("notes changes not checked in", async () => {
    const root = freshRoot()
    Fs.writeFileSync(Path.join(checkout, "uncommitted.txt"), "work in progress\n")
    try {
      const answer = await call(stage, { checkout, root }, { dryRun: true })
      expect(answer.output?.modified).toBe(true)
      expect(answer.operations[1]).toMatchObject({ op: "checkout", detail: expect.stringContaining("holds changes not checked in") })
    } finally {
      Fs.rmSync(Path.join(checkout, "uncommitted.txt"))
    }
  })

  it("stages a Fossil checkout under its check-in's name", async () => {
    const root = freshRoot()
    const env = { ...process.env, USER: "root" }
    const repository = Path.join(base, "fake.fossil")
    const fossilCheckout = Path.join(base, "fossil-checkout")
    const run = promisify(execFile)
    await run("fossil", ["init", repository], { env })
    Fs.mkdirSync(fossilCheckout)
    await run("fossil", ["open", repository], { cwd: fossilCheckout, env })
    for (const file of ["package.json", "gate.mjs", "build.mjs"]) Fs.copyFileSync(Path.join(checkout, file), Path.join(fossilCheckout, file))
    Fs.cpSync(Path.join(checkout, "node_modules"), Path.join(fossilCheckout, "node_modules"), { recursive: true })
    await run("fossil", ["add", "package.json", "gate.mjs", "build.mjs"], { cwd: fossilCheckout, env })
    await run("fossil", ["commit", "-m", "fake", "--no-warnings"], { cwd: fossilCheckout, env })
    const { stdout } = await run("fossil", ["info"], { cwd: fossilCheckout, env })
    const hash = /^checkout:\s+([0-9a-f]+)/m.exec(stdout)![1]!
    const answer = await call(stage, { checkout: fossilCheckout, root })
    expect(answer.stopped).toEqual({ reason: "completed" })
    expect(answer.output).toMatchObject({ vcs: "fossil", checkin: hash, staged: hash.slice(0, 12) })
    expect(linkOf(root, "next")).toBe(`staged/${hash.slice(0, 12)}`)
  })

  it("refuses a directory that is no checkout, naming it", async () => {
    const root = freshRoot()
    const plain = Fs.mkdtempSync(Path.join(base, "plain-"))
    const answer = await call(stage, { checkout: plain, root })
    expect(answer.stopped).toEqual({ reason: "refused", message: `${plain} is neither a git nor a Fossil checkout` })
    expect(listing(root)).toEqual({})
  })

  it("refuses a root that does not exist", async () => {
    const missing = Path.join(base, "no-such-root")
    const answer = await call(stage, { checkout, root: missing })
    expect(answer.stopped).toEqual({ reason: "refused", message: `the release root ${missing} cannot be used: no such directory` })
    expect(Fs.existsSync(missing)).toBe(false)
  })
})

describe("stage on the command line", { timeout: 90_000 }, () => {
  // issue 40: stage printed nothing for minutes, then everything at once. The fake gate prints its
  // first line, then waits for a file this test makes only once that line has reached the CLI's
  // standard error: so the line came while the gate was still running.
  it("says each step and the gate's output as they happen; the answer stays JSON on stdout", async () => {
    const root = freshRoot()
    const repository = Path.join(base, "cli.fossil")
    if (!Fs.existsSync(repository)) await promisify(execFile)("fossil", ["init", repository], { env: { ...process.env, USER: "maintainer" } })
    const name = commit(checkout, "staged from the command line")
    control(checkout, "gate-waits", true)
    try {
      const program = Path.resolve(import.meta.dirname, "../../dist/ocx2.mjs")
      const child = spawn(process.execPath, [program, "--json", "--repository", repository, "--user", "maintainer", "stage", checkout, "--root", root], {
        stdio: ["ignore", "pipe", "pipe"]
      })
      let stdout = ""
      let stderr = ""
      child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c))
      const ended = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
      let exited = false
      void ended.then(() => (exited = true))
      const seen = new Promise<void>((resolve) => {
        child.stderr.setEncoding("utf8").on("data", (c: string) => {
          stderr += c
          if (stderr.includes("gate | gate: first check passed\n")) resolve()
        })
      })
      await Promise.race([seen, ended.then(() => {
        throw new Error(`the CLI ended without printing the gate's first line as it ran; stderr:\n${stderr}\nstdout:\n${stdout}`)
      })])
      // the gate is still running (it waits for gate-go): its last line has not come, nor the answer
      expect(exited).toBe(false)
      expect(stderr).toContain(`stage: gate: npm run -s gate in ${checkout}`)
      expect(stderr).not.toContain("all checks passed")
      expect(stdout).toBe("")
      control(checkout, "gate-go", true)
      expect(await ended).toBe(0)
      const lines = stderr.split("\n")
      const at = (text: string) => lines.findIndex((l) => l.includes(text))
      for (const step of ["gate", "build", "copy", "smoke", "place", "link"]) {
        expect(at(`stage: ${step}: `), step).toBeGreaterThanOrEqual(0)
        expect(at(`stage: ${step} done (`), step).toBeGreaterThan(at(`stage: ${step}: `))
      }
      expect(at("gate | gate: all checks passed")).toBeLessThan(at("stage: gate done ("))
      expect(at("build | build: bundled")).toBeGreaterThan(at("stage: build: "))
      console.log(`stage printed on standard error:\n${stderr}`)
      const answer = JSON.parse(stdout) as { stopped: unknown; output: { staged: string } }
      expect(answer.stopped).toEqual({ reason: "completed" })
      expect(answer.output.staged).toBe(name)
    } finally {
      control(checkout, "gate-waits", false)
      control(checkout, "gate-go", false)
    }
  })
})
