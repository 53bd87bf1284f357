import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { ownCgroupDir } from "../../src/sandbox/Cgroups.js"
import { makeRoot, present, shellSpec } from "./support.js"

const { root, ws, care } = makeRoot("parent")
const bundle = Path.join(root, "launch-and-wait.mjs")
// the esbuild CLI, run to completion: its JS API keeps a service child that outlives the worker
beforeAll(() => {
  ChildProcess.execFileSync(Path.join(import.meta.dirname, "../../node_modules/.bin/esbuild"), [
    Path.join(import.meta.dirname, "../fixtures/sandbox/launch-and-wait.ts"),
    "--bundle", "--platform=node", "--format=esm", `--outfile=${bundle}`, "--log-level=warning"
  ])
})
afterAll(() => Fs.rmSync(root, { recursive: true, force: true }))

// The stand-in watcher runs under a python3 child subreaper, so that what its death
// orphans is reaped (PID 1 here does not reap) and the test leaves no zombie behind.
const subreaper = `
import ctypes, os, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
p = subprocess.Popen(sys.argv[1:], stdout=sys.stdout)
while True:
    try:
        os.wait()
    except ChildProcessError:
        sys.stdin.read()  # nothing left: wait until the test closes our stdin
        break
`

const watchAndKill = (endsWithParent: boolean) =>
  Effect.promise(async () => {
    const spec = shellSpec(ws, care, "sleep 100 & sleep 100", { sandbox: { ...shellSpec(ws, care, "").sandbox!, endsWithParent } })
    const reaper = ChildProcess.spawn("python3", ["-c", subreaper, process.execPath, bundle, JSON.stringify(spec)], {
      stdio: ["pipe", "pipe", "inherit"]
    })
    const line = await new Promise<string>((resolve) => reaper.stdout!.once("data", (b: Buffer) => resolve(b.toString())))
    const { watcher, pids } = JSON.parse(line) as { watcher: number; pids: Array<number> }
    process.kill(watcher, "SIGKILL")
    await new Promise((r) => setTimeout(r, 500))
    const survivors = present(pids)
    // clean up what survived, through the cgroups the dead watcher left
    for (const pid of survivors) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // ended meanwhile: the sandbox's init ended before it, and its namespace with it
      }
    }
    await new Promise((r) => setTimeout(r, 200))
    for (const c of ["pids", "memory"] as const) {
      const dir = ownCgroupDir(c)
      if (dir === undefined) continue
      for (const n of Fs.readdirSync(dir).filter((n) => n.startsWith(`ocx2-${watcher}-`))) Fs.rmdirSync(Path.join(dir, n))
    }
    const leftAfterCleanup = present(pids)
    reaper.stdin!.end()
    await new Promise((r) => reaper.once("exit", r))
    return { pids, survivors, leftAfterCleanup }
  })

describe("ends_with_parent, with a real watcher process SIGKILLed", () => {
  it.live("true: the sandbox ends with its watcher", () =>
    Effect.gen(function*() {
      const r = yield* watchAndKill(true)
      expect(r.pids.length).toBeGreaterThanOrEqual(4)
      expect(r.survivors).toEqual([])
    }))

  it.live("false: the sandbox outlives its watcher", () =>
    Effect.gen(function*() {
      const r = yield* watchAndKill(false)
      expect(r.survivors.length).toBe(r.pids.length)
      expect(r.leftAfterCleanup).toEqual([])
    }))
})
