import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { make } from "../../layers/BwrapSandbox.js"
import { ownCgroupDir } from "../../src/sandbox/Cgroups.js"
import type { RunningProcess } from "../../services/SandboxLauncher.js"
import { decode, makeRoot, present, shellSpec } from "./support.js"

const { root, ws, care } = makeRoot("lifecycle")
afterAll(() => Fs.rmSync(root, { recursive: true, force: true }))
const launcher = make()

/** the launch's cgroups are named ocx2-<our pid>-…; none may outlive its launch */
const ourCgroups = () =>
  (["pids", "memory"] as const).flatMap((c) => {
    const dir = ownCgroupDir(c)
    return dir === undefined ? [] : Fs.readdirSync(dir).filter((n) => n.startsWith(`ocx2-${process.pid}-`))
  })

const waitForProcesses = (h: RunningProcess, atLeast: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 200; i++) {
      const pids = yield* h.processIds
      if (pids.length >= atLeast) return pids
      yield* Effect.sleep("20 millis")
    }
    return yield* Effect.die(`fewer than ${atLeast} processes appeared`)
  })

/** ps sees none of them, not even as zombies */
const psShows = (pids: ReadonlyArray<number>) =>
  ChildProcess.execFileSync("ps", ["-e", "-o", "pid=,stat="], { encoding: "utf8" })
    .split("\n").map((l) => l.trim().split(/\s+/)).filter((f) => pids.includes(Number(f[0])))

describe("a launch's life: exit codes, stop, tails, logs, stdin", () => {
  it.live("exit codes, and 128+N for signal N", () =>
    Effect.gen(function*() {
      const [seven, term, kill, missing] = yield* Effect.all([
        launcher.run(shellSpec(ws, care, "exit 7")),
        launcher.run(shellSpec(ws, care, "kill -TERM $$")),
        launcher.run(shellSpec(ws, care, "kill -KILL $$")),
        launcher.run({ ...shellSpec(ws, care, ""), command: ["no-such-program-here"] })
      ], { concurrency: "unbounded" })
      expect(seven.ending).toEqual({ outcome: "exited", exit: 7 })
      expect(term.ending).toEqual({ outcome: "exited", exit: 143 })
      expect(kill.ending).toEqual({ outcome: "exited", exit: 137 })
      // a program without "/" is looked up on env's PATH inside the sandbox only
      expect(missing.ending).toEqual({ outcome: "exited", exit: 1 })
      expect(decode(missing.stderr.tail)).toMatch(/execvp no-such-program-here/)
    }))

  it.live("stop ends the whole tree, background and double-forked processes too, and leaves nothing behind", () =>
    Effect.gen(function*() {
      const { pids, result } = yield* Effect.scoped(
        Effect.gen(function*() {
          const h = yield* launcher.start(shellSpec(ws, care, "sleep 100 & sleep 101 & (sleep 102 &); setsid sleep 103 & sleep 104", {
            sandbox: { ...shellSpec(ws, care, "").sandbox!, endsWithParent: false }
          }))
          const pids = yield* waitForProcesses(h, 8)
          yield* h.stop
          const result = yield* h.result
          return { pids, result }
        })
      )
      expect(result.ending.outcome).toBe("stopped")
      expect(present(pids)).toEqual([])
      expect(psShows(pids)).toEqual([])
      expect(ourCgroups()).toEqual([])
    }))

  it.live("closing the scope stops a launch that still runs; wall ends the tree too", () =>
    Effect.gen(function*() {
      const pids = yield* Effect.scoped(
        Effect.gen(function*() {
          const h = yield* launcher.start(shellSpec(ws, care, "sleep 100 & sleep 100"))
          return yield* waitForProcesses(h, 4)
        })
      )
      expect(present(pids)).toEqual([])
      const wall = yield* Effect.scoped(
        Effect.gen(function*() {
          const h = yield* launcher.start(shellSpec(ws, care, "sleep 100 & sleep 100 & wait", { limits: { wallSeconds: 1 } }))
          const pids = yield* waitForProcesses(h, 5)
          return { pids, result: yield* h.result }
        })
      )
      expect(wall.result.ending).toMatchObject({ outcome: "budget", limit: "wall" })
      expect(present(wall.pids)).toEqual([])
      expect(ourCgroups()).toEqual([])
    }))

  it.live("kept tails are the exact last bytes, memory bounded; logs hold everything, only for a stream that printed", () =>
    Effect.gen(function*() {
      const logDir = Path.join(root, "logs-ws")
      Fs.mkdirSync(logDir)
      Fs.chownSync(logDir, 64123, 64124)
      const r = yield* launcher.run(shellSpec(logDir, care,
        "seq 1 200000; echo -n LAST-OUT; seq 1 50000 >&2; echo LAST-ERR >&2", {
          keep: { stdout: 100, stderr: 9 },
          logDir
        }))
      const expectedOut = `${Array.from({ length: 200000 }, (_, i) => i + 1).join("\n")}\nLAST-OUT`
      const expectedErr = `${Array.from({ length: 50000 }, (_, i) => i + 1).join("\n")}\nLAST-ERR\n`
      expect(r.ending).toEqual({ outcome: "exited", exit: 0 })
      expect(decode(r.stdout.tail)).toBe(expectedOut.slice(-100))
      expect(r.stdout.totalBytes).toBe(expectedOut.length)
      expect(decode(r.stderr.tail)).toBe("LAST-ERR\n")
      expect(r.stderr.totalBytes).toBe(expectedErr.length)
      expect(Fs.readFileSync(Path.join(logDir, "stdout.log"), "utf8")).toBe(expectedOut)
      expect(Fs.readFileSync(Path.join(logDir, "stderr.log"), "utf8")).toBe(expectedErr)
      expect(r.logs).toEqual({ stdout: Path.join(logDir, "stdout.log"), stderr: Path.join(logDir, "stderr.log") })

      // rewritten for each process; a stream that printed nothing leaves no log
      Fs.rmSync(Path.join(logDir, "stderr.log"))
      const quiet = yield* launcher.run(shellSpec(logDir, care, "echo again", { logDir }))
      expect(Fs.readFileSync(Path.join(logDir, "stdout.log"), "utf8")).toBe("again\n")
      expect(Fs.existsSync(Path.join(logDir, "stderr.log"))).toBe(false)
      expect(quiet.logs).toEqual({ stdout: Path.join(logDir, "stdout.log") })
    }))

  it.live("a log name the process pointed elsewhere with a link is replaced, never followed", () =>
    Effect.gen(function*() {
      const logDir = Path.join(root, "trap-ws")
      Fs.mkdirSync(logDir)
      Fs.chownSync(logDir, 64123, 64124)
      const target = Path.join(root, "host-file")
      Fs.writeFileSync(target, "host content")
      const r = yield* launcher.run(shellSpec(logDir, care, `ln -s ${target} stdout.log; echo printed`, { logDir }))
      expect(r.ending).toEqual({ outcome: "exited", exit: 0 })
      expect(Fs.readFileSync(target, "utf8")).toBe("host content")
      expect(Fs.lstatSync(Path.join(logDir, "stdout.log")).isFile()).toBe(true)
      expect(Fs.readFileSync(Path.join(logDir, "stdout.log"), "utf8")).toBe("printed\n")
    }))

  it.live("stdin: the first lines, then more while the caller keeps it open, then closed", () =>
    Effect.gen(function*() {
      const r = yield* Effect.scoped(
        Effect.gen(function*() {
          const h = yield* launcher.start(shellSpec(ws, care, "cat", { stdin: { lines: ['{"run":"r","objective":"o"}'], keepOpen: true } }))
          yield* h.writeLine('{"post":"p1"}')
          yield* h.closeStdin
          const result = yield* h.result
          const late = yield* h.writeLine("too late").pipe(Effect.flip)
          expect(late._tag).toBe("StdinClosed")
          return result
        })
      )
      expect(decode(r.stdout.tail)).toBe('{"run":"r","objective":"o"}\n{"post":"p1"}\n')
      // a process that never reads its stdin does not trouble the launcher
      const ignored = yield* launcher.run(shellSpec(ws, care, "exit 0", { stdin: { lines: ["x".repeat(1 << 20)], keepOpen: false } }))
      expect(ignored.ending).toEqual({ outcome: "exited", exit: 0 })
    }))

  it.live("unconfined: the host as OCX's account sees it, exactly env, its tree still ended", () =>
    Effect.gen(function*() {
      const r = yield* launcher.run({
        command: ["sh", "-c", "id -u; env; test -e /etc/passwd && echo host-files; sleep 100 & exit 3"],
        env: { PATH: "/usr/bin:/bin", ONLY: "this" },
        cwd: ws,
        limits: { wallSeconds: 10 },
        stdin: { lines: [], keepOpen: false },
        keep: { stdout: 4096, stderr: 4096 }
      })
      expect(r.ending).toEqual({ outcome: "exited", exit: 3 })
      const lines = decode(r.stdout.tail).trim().split("\n").sort()
      expect(lines).toEqual(["0", "ONLY=this", "PATH=/usr/bin:/bin", `PWD=${ws}`, "host-files"].sort())
      expect(ourCgroups()).toEqual([])
    }))
})
