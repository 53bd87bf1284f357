// flock(2) through the addon (src/care/NativeFlock.ts) against the kernel's own locks: a lock it
// takes is the one util-linux `flock` and every other process see, and one they hold is busy to it;
// and the places that take the node's locks take them without a flock child when it is there.
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { createRequire, syncBuiltinESMExports } from "node:module"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import { make } from "../../layers/CareDirectoryFs.js"
import { flockNow } from "../../src/care/FlockNow.js"
import { nativeFlockLoaded, tryFlock } from "../../src/care/NativeFlock.js"
import { holdLock } from "../../src/fossil/WriteSpool.js"

const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-native-flock-"))
afterAll(() => Fs.rmSync(dir, { recursive: true, force: true }))

const open = (name: string) => Fs.openSync(Path.join(dir, name), Fs.constants.O_RDWR | Fs.constants.O_CREAT, 0o600)

/** util-linux flock tried on the file from a process of its own: 0 taken, 1 busy */
const flockChild = (name: string) => ChildProcess.spawnSync("flock", ["--exclusive", "--nonblock", Path.join(dir, name), "true"]).status

/** how many flock children this process started while `f` ran: spawn and spawnSync counted, the
 * ES module bindings of node:child_process brought in line with the counting ones */
const spawnsDuring = async <A>(f: () => Promise<A> | A): Promise<{ readonly value: A; readonly flocks: number }> => {
  const cp = createRequire(import.meta.url)("node:child_process") as { spawn: (...a: Array<any>) => unknown; spawnSync: (...a: Array<any>) => unknown }
  const [spawn, spawnSync] = [cp.spawn, cp.spawnSync]
  let flocks = 0
  const count = (command: unknown) => void (String(command).endsWith("flock") && flocks++)
  cp.spawn = (...args: Array<any>) => (count(args[0]), spawn(...args))
  cp.spawnSync = (...args: Array<any>) => (count(args[0]), spawnSync(...args))
  syncBuiltinESMExports()
  try {
    return { value: await f(), flocks }
  } finally {
    cp.spawn = spawn
    cp.spawnSync = spawnSync
    syncBuiltinESMExports()
  }
}

describe("flock(2) through the addon", () => {
  it("is built into dist/ and loads", () => {
    expect(Fs.existsSync(Path.join(import.meta.dirname, "..", "..", "dist", "ocx2-flock.node"))).toBe(true)
    expect(nativeFlockLoaded()).toBe(true)
  })

  it("takes the kernel's lock: busy to flock(1) and to another descriptor while held, free once its descriptor closes", () => {
    const a = open("a.lock")
    const b = open("a.lock")
    expect(tryFlock(a)).toBe("held")
    // the same open file description again: flock(2) says held, as it does to its holder
    expect(tryFlock(a)).toBe("held")
    expect(tryFlock(b)).toBe("busy")
    expect(flockChild("a.lock")).toBe(1)
    Fs.closeSync(a)
    expect(flockChild("a.lock")).toBe(0)
    expect(tryFlock(b)).toBe("held")
    Fs.closeSync(b)
  })

  it("finds a lock another process holds busy, and takes it once that process is gone", async () => {
    const holder = ChildProcess.spawn("flock", ["--no-fork", "--exclusive", Path.join(dir, "b.lock"), "sleep", "60"], { stdio: "ignore" })
    const fd = open("b.lock")
    try {
      const deadline = Date.now() + 60_000
      while (flockChild("b.lock") !== 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
      expect(tryFlock(fd)).toBe("busy")
      holder.kill("SIGKILL")
      await new Promise((r) => holder.once("exit", r))
      // the lock goes with the holder (flock --no-fork: the holder is sleep itself)
      expect(tryFlock(fd)).toBe("held")
    } finally {
      holder.kill("SIGKILL")
      Fs.closeSync(fd)
    }
  }, 90_000)

  it("names what went wrong on a descriptor that is not open", () => {
    const fd = open("c.lock")
    Fs.closeSync(fd)
    expect(tryFlock(fd)).toBe(`flock(2) on descriptor ${fd}: EBADF`)
  })

  it("the run's lock, flockNow and the write lock take a free lock with no flock child, and a busy one is still busy", async () => {
    const care = await Effect.runPromise(make({ root: dir }))
    const scope = await Effect.runPromise(Scope.make())
    const taken = await spawnsDuring(() => Effect.runPromise(Scope.extend(care.lockRun("r1"), scope)))
    expect(taken.flocks).toBe(0)
    expect(flockChild(Path.join("care", "r1.lock"))).toBe(1)
    await Effect.runPromise(Scope.close(scope, Exit.void))
    expect(flockChild(Path.join("care", "r1.lock"))).toBe(0)

    const fd = open("now.lock")
    expect(await spawnsDuring(() => flockNow(fd))).toEqual({ value: "held", flocks: 0 })
    const other = open("now.lock")
    expect(flockNow(other)).toBe("busy")
    Fs.closeSync(other)
    Fs.closeSync(fd)

    const write = await spawnsDuring(() => holdLock(Path.join(dir, "write.lock")))
    expect(write.flocks).toBe(0)
    expect(flockChild("write.lock")).toBe(1)
    write.value.release()
    // waiting for a busy write lock is flock(1)'s: it takes it once the holder lets it go
    const first = await holdLock(Path.join(dir, "write.lock"))
    const waiting = spawnsDuring(() => holdLock(Path.join(dir, "write.lock"), 60))
    setTimeout(() => first.release(), 200)
    const second = await waiting
    expect(second.flocks).toBe(1)
    second.value.release()
  }, 90_000)
})
