import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { hook } from "../../src/tools/hook.js"
import { unhook } from "../../src/tools/unhook.js"
import type { DoctorOutput } from "../../src/tools/doctor.js"
import { webLogin } from "../support/fossilServer.js"
import { users } from "../support/nodeWorld.js"
import { closeHookWorld, makeHookWorld, type HookWorld } from "./hookWorld.js"
import { startSupervisor, stopSupervisor, supervisorInfo, type RunningSupervisor } from "./supervisorWorld.js"

// ocx2 doctor (issue 40), as an operator runs it on the server's host: the installed program
// ROOT/current/ocx2, a real fossil server serving the release's pages from its extension root, the
// node's hook and supervisor as installed, real bubblewrap sandboxes. A healthy node is all ok with
// exit 0; each broken piece fails its own check, with its fix, and exits 1, and the others hold.

let world: HookWorld
let supervisor: RunningSupervisor | undefined
beforeAll(async () => {
  // Fossil's default backoffice, no poller: fast mode is off, so the supervisor is what picks runs up
  world = await makeHookWorld({ fastHooks: false, pages: true })
  const installed = await world.call(hook, { node: users.node.login, root: world.root, serverUrl: world.server.url })
  expect(installed.stopped).toEqual({ reason: "completed" })
  supervisor = await startSupervisor(world)
}, 120_000)
afterAll(async () => {
  await stopSupervisor(supervisor)
  await closeHookWorld(world)
})

const ocx2 = () => Path.join(world.root, "current", "ocx2")
const doctor = (...args: ReadonlyArray<string>) =>
  ChildProcess.spawnSync(ocx2(), ["--repository", world.repository, "--user", users.admin.login, "doctor", ...args], { encoding: "utf8", timeout: 120_000 })
const findings = (): { readonly status: number | null; readonly output: DoctorOutput } => {
  const r = doctor("--json")
  return { status: r.status, output: JSON.parse(r.stdout).output as DoctorOutput }
}
const failing = (output: DoctorOutput) => output.findings.filter((f) => !f.ok).map((f) => f.check)
const finding = (output: DoctorOutput, check: string) => output.findings.find((f) => f.check === check)

const checks = ["server", "pages", "hook", "hook's last run", "supervisor", "release's Node", "limits", "stream", "node user", "room"]

describe("ocx2 doctor", () => {
  it("finds a healthy node all ok, exit 0, through the installed program; its dry run lists the checks", () => {
    const text = doctor()
    console.log(text.stdout)
    expect(text.stderr).toBe("")
    expect(text.status).toBe(0)
    const lines = text.stdout.trimEnd().split("\n")
    expect(lines.at(-1)).toBe("every check holds")
    expect(lines.slice(0, -1).every((l) => l.startsWith("ok: ")), text.stdout).toBe(true)
    const { status, output } = findings()
    expect(status).toBe(0)
    expect(output.ok).toBe(true)
    expect(output.findings.map((f) => f.check)).toEqual(checks)
    expect(output.server).toBe(world.server.url.replace(/\/+$/, ""))
    expect(finding(output, "pages")?.words).toContain("/ext/ocx2-cgi answers 200 as HTML")
    expect(finding(output, "supervisor")?.words).toContain(`pid ${supervisor!.pid}`)
    // the probe names the cgroup version giving each limit it used
    expect(finding(output, "limits")?.words).toMatch(/^\/bin\/true exited 0 in a sandbox/)
    expect(finding(output, "limits")?.words).toMatch(/cgroup v[12]/)

    const dry = doctor("--dry-run")
    expect(dry.status).toBe(0)
    for (const check of checks) expect(dry.stdout).toContain(`would: check ${check}: `)
    expect(dry.stdout).not.toMatch(/^(ok|FAIL): /m)
  }, 180_000)

  it("is the web page's for setup users alone: they get the findings, others a refusal", async () => {
    const page = (cookie?: string) =>
      fetch(`${world.server.url.replace(/\/+$/, "")}/ext/ocx2-cgi/doctor?format=json`, cookie !== undefined ? { headers: { cookie } } : {})
        .then(async (r) => ({ status: r.status, answer: (await r.json()) as { output?: DoctorOutput; stopped: { reason: string; message?: string } } }))
    const alice = await webLogin(world.server.url, users.admin.login, users.admin.password)
    const setup = await page(alice.cookie)
    expect(setup.answer.stopped).toEqual({ reason: "completed" })
    expect(setup.answer.output?.root).toBe(Fs.realpathSync(world.root))
    expect(setup.answer.output?.findings.map((f) => f.check)).toEqual(checks)
    const builder = await webLogin(world.server.url, users.builder.login, users.builder.password)
    for (const other of [await page(builder.cookie), await page()]) {
      expect(other.answer.stopped).toEqual({ reason: "refused", message: "doctor needs Fossil's setup capability (s)" })
      expect(other.answer.output).toBeUndefined()
    }
  }, 180_000)

  it("FAILs release.json of another ABI, with the fix, exit 1", () => {
    const file = Path.join(world.root, "current", "release.json")
    Fs.writeFileSync(file, JSON.stringify({ node: { version: "v18.0.0", modules: "108", execPath: process.execPath } }))
    try {
      const { status, output } = findings()
      expect(status).toBe(1)
      expect(failing(output)).toEqual(["release's Node"])
      expect(finding(output, "release's Node")?.words).toContain("ABI 108, not")
      expect(finding(output, "release's Node")?.fix).toContain(`stage . --root ${world.root}`)
      const text = doctor()
      expect(text.status).toBe(1)
      expect(text.stdout).toMatch(/^FAIL: release's Node: .* — fix: .*accept --root/m)
    } finally {
      Fs.rmSync(file)
    }
    expect(findings().status).toBe(0)
  }, 180_000)

  it("FAILs limits when the node's measure finds no sandbox; a limit the host lacks is named, not failed", () => {
    // the node's own measure (ROOT/node/capabilities.json), what its launcher and refusal 6 go by
    const file = Path.join(world.root, "node", "capabilities.json")
    const measure = (caps: object) =>
      Fs.writeFileSync(file, JSON.stringify({ sandbox: true, wall: true, cpu: true, file_size: true, processes: true, memory: true, notes: [], ...caps }))
    try {
      measure({ sandbox: false, notes: ["sandbox: setpriv: setresuid failed"] })
      const { status, output } = findings()
      expect(status).toBe(1)
      expect(failing(output)).toEqual(["limits"])
      expect(finding(output, "limits")?.words).toBe("this host gives no sandbox: sandbox: setpriv: setresuid failed")
      expect(finding(output, "limits")?.fix).toContain("Delegate=yes")
      measure({ memory: false, notes: ["memory: no memory controller"] })
      const without = findings()
      expect(without.status).toBe(0)
      expect(finding(without.output, "limits")?.words).toMatch(/^\/bin\/true exited 0 in a sandbox under processes: cgroup v[12] pids; runs asking for memory \(not available: no memory controller\) are refused \(refusal 6\)$/)
    } finally {
      Fs.rmSync(file, { force: true })
    }
  }, 180_000)

  it("FAILs a node user holding setup, with the fix, exit 1", () => {
    const capabilities = (caps: string) =>
      ChildProcess.execFileSync("fossil", ["user", "capabilities", users.node.login, caps, "-R", world.repository], { encoding: "utf8" })
    capabilities("s")
    try {
      const { status, output } = findings()
      expect(status).toBe(1)
      expect(failing(output)).toEqual(["node user"])
      expect(finding(output, "node user")?.words).toContain("admin or setup")
      expect(finding(output, "node user")?.fix).toBe(`fossil user capabilities ${users.node.login} "" -R ${world.repository}`)
    } finally {
      capabilities("")
    }
    expect(findings().status).toBe(0)
  }, 180_000)

  it("FAILs a hook not installed, with the fix, exit 1", async () => {
    expect((await world.call(unhook, { root: world.root })).output?.removed.length).toBe(1)
    const { status, output } = findings()
    expect(status).toBe(1)
    expect(failing(output)).toEqual(["hook"])
    expect(finding(output, "hook")?.words).toContain("no after-receive hook runs ocx2-hook")
    expect(finding(output, "hook")?.fix).toContain(`hook --node ${users.node.login} --root ${world.root}`)
    expect((await world.call(hook, { root: world.root })).output?.hook).toBe("installed")
    expect(findings().status).toBe(0)
  }, 180_000)

  it("FAILs a hook whose last run failed, and a server that does not answer, each with its fix", () => {
    const log = Path.join(world.root, "node", "hook.log")
    const kept = Fs.readFileSync(log, "utf8")
    Fs.appendFileSync(log, `${JSON.stringify({ at: new Date().toISOString(), pid: 1, repository: world.repository, given: [], did: ["failed: database is locked"] })}\n`)
    try {
      const { status, output } = findings()
      expect(status).toBe(1)
      expect(failing(output)).toEqual(["hook's last run"])
      expect(finding(output, "hook's last run")?.words).toContain("failed: database is locked")
      expect(finding(output, "hook's last run")?.fix).toContain(`hook --node ${users.node.login} --root ${world.root} --check`)
    } finally {
      Fs.writeFileSync(log, kept)
    }
    // a port nothing listens on
    const r = doctor("--json", "--url", "http://127.0.0.1:9")
    expect(r.status).toBe(1)
    const down = JSON.parse(r.stdout).output as DoctorOutput
    expect(failing(down)).toEqual(["server", "pages"])
    expect(finding(down, "server")?.words).toContain("http://127.0.0.1:9/ does not answer")
    expect(finding(down, "server")?.fix).toContain("start the server")
  }, 180_000)

  it("FAILs stream settings the stream server would pass over; a running stream server is asked", async () => {
    const settings = Path.join(world.root, "settings", "stream")
    Fs.mkdirSync(Path.dirname(settings), { recursive: true })
    Fs.writeFileSync(settings, JSON.stringify({ port: "8091", url: "fossil.example.org" }))
    try {
      const { status, output } = findings()
      expect(status).toBe(1)
      expect(failing(output)).toEqual(["stream"])
      expect(finding(output, "stream")?.words).toContain('port "8091" is not a port number')
      expect(finding(output, "stream")?.words).toContain('url "fossil.example.org" is not an http or https URL')
      expect(finding(output, "stream")?.fix).toContain(settings)
    } finally {
      Fs.rmSync(settings)
    }
    // the stream server as a run page starts it
    const started = ChildProcess.spawn(process.execPath, [Path.join(world.root, "current", "ocx2-cgi"), "--stream-server"], { detached: true, stdio: "ignore" })
    started.unref()
    try {
      const state = await world.waitFor("the stream server's state file", () => {
        try {
          const s = JSON.parse(Fs.readFileSync(Path.join(world.root, "node", "stream.json"), "utf8")) as { pid: number; port: number }
          return s.pid === started.pid ? s : undefined
        } catch {
          return undefined
        }
      })
      const { status, output } = findings()
      expect(status).toBe(0)
      expect(finding(output, "stream")?.words).toContain(`it runs (pid ${state.pid}) and answers on 127.0.0.1:${state.port}`)
      // a url where browsers reach it that leads nowhere
      Fs.writeFileSync(settings, JSON.stringify({ url: "http://127.0.0.1:9" }))
      const proxied = findings()
      expect(proxied.status).toBe(1)
      expect(failing(proxied.output)).toEqual(["stream"])
      expect(finding(proxied.output, "stream")?.words).toContain(`answers on 127.0.0.1:${state.port}, but not at http://127.0.0.1:9, where the pages send browsers`)
      Fs.writeFileSync(settings, JSON.stringify({ url: `http://127.0.0.1:${state.port}` }))
      expect(finding(findings().output, "stream")?.words).toContain(`and at http://127.0.0.1:${state.port}`)
    } finally {
      Fs.rmSync(settings, { force: true })
      process.kill(started.pid!, "SIGTERM")
    }
  }, 180_000)

  it("FAILs a supervisor running another release than ROOT/current serves, with the fix, exit 1", async () => {
    // a supervisor started from a release the root does not serve (a release staged beside it) keeps running
    await stopSupervisor(supervisor)
    supervisor = undefined
    const served = Fs.realpathSync(Path.join(world.root, "current"))
    const other = Path.join(world.root, "staged", "bbbbbbbbbbbb")
    Fs.cpSync(served, other, { recursive: true, verbatimSymlinks: true })
    const child = ChildProcess.spawn(Path.join(other, "ocx2-supervise"), ["--node", users.node.login, "--root", world.root], { detached: true, stdio: "ignore" })
    const exited = new Promise((resolve) => child.once("exit", resolve))
    try {
      await world.waitFor("the other release's supervisor", () => supervisorInfo(world)?.pid === child.pid ? true : undefined)
      const { status, output } = findings()
      expect(status).toBe(1)
      expect(failing(output)).toEqual(["supervisor"])
      expect(finding(output, "supervisor")?.words).toBe(`the supervisor (pid ${child.pid}) runs ${other}, not the current release ${served}`)
      expect(finding(output, "supervisor")?.fix).toContain(`systemctl restart ocx2-supervise@${users.node.login}.service`)
    } finally {
      child.kill("SIGTERM")
      await exited
    }
    supervisor = await startSupervisor(world)
    expect(findings().status).toBe(0)
  }, 180_000)

  it("FAILs a supervisor absent while fast mode is off, with the fix, exit 1", async () => {
    await stopSupervisor(supervisor)
    supervisor = undefined
    const { status, output } = findings()
    expect(status).toBe(1)
    expect(failing(output)).toEqual(["supervisor"])
    expect(finding(output, "supervisor")?.words).toContain("no supervisor runs, and fast mode is off")
    expect(finding(output, "supervisor")?.fix).toContain(`ocx2-supervise@${users.node.login}.service`)

    // fast mode's poller in its place holds
    const fastened = await world.call(hook, { root: world.root, fast: true })
    expect(fastened.output?.backoffice.mode).toBe("fast")
    try {
      const fast = findings()
      expect(fast.status).toBe(0)
      expect(finding(fast.output, "supervisor")?.words).toContain("no supervisor runs; fast mode's poller does")
    } finally {
      // the poller this call started (its pid from the hook's answer), and no one else's
      for (const pid of fastened.output?.backoffice.pollers ?? []) {
        try {
          process.kill(pid, "SIGTERM")
        } catch { /* gone */ }
      }
    }
  }, 180_000)
})
