import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { removeTree } from "../../src/demo/RemoveTree.js"
import { waitFor } from "../support/world.js"

// the demo's or a world's directory is removed while processes it started may still write into it
// (CI once failed a whole file on ENOTEMPTY, and once the demo: a hook made its log again while
// Node's rmSync retried only the last rmdir)

const alive = (child: ChildProcess.ChildProcess) => child.exitCode === null && child.signalCode === null

const started = async (child: ChildProcess.ChildProcess, mark: string) =>
  expect(await waitFor(() => (Fs.existsSync(mark) ? true : undefined), 10_000, 20), `${mark} is made`).toBe(true)

describe("removeTree", () => {
  it("removes a directory that a process naming it writes into without a pause, and ends that process", async () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-remove-"))
    for (let i = 0; i < 200; i++) Fs.writeFileSync(Path.join(dir, `f${i}`), "x")
    const writer = ChildProcess.spawn("sh", ["-c", `while :; do mkdir -p ${dir}/again; touch ${dir}/again/file; done`], { cwd: "/", stdio: "ignore" })
    await started(writer, Path.join(dir, "again", "file"))
    await removeTree(dir)
    expect(Fs.existsSync(dir)).toBe(false)
    expect(await waitFor(() => (alive(writer) ? undefined : true), 5_000, 20)).toBe(true)
  })

  it("ends a process that names no path of it but works in it, or holds one of its files open", async () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-remove-"))
    Fs.mkdirSync(Path.join(dir, "sub"))
    const inside = ChildProcess.spawn("sh", ["-c", "touch here; exec sleep 60"], { cwd: Path.join(dir, "sub"), stdio: "ignore" })
    const holder = ChildProcess.spawn("sh", ["-c", 'exec 3>"$HELD"; touch "$HELD.made"; exec sleep 60'], {
      cwd: "/", stdio: "ignore", env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HELD: Path.join(dir, "held") }
    })
    await started(inside, Path.join(dir, "sub", "here"))
    await started(holder, Path.join(dir, "held.made"))
    await removeTree(dir)
    expect(Fs.existsSync(dir)).toBe(false)
    expect(await waitFor(() => (alive(inside) || alive(holder) ? undefined : true), 5_000, 20)).toBe(true)
  })
})
