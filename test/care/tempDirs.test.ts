// The sweep of temporary directories left by killed processes (src/care/TempDirs.ts): only a
// directory of ours, named with a pid that is gone, is removed.
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { makeTempDir, sweepTempDirs } from "../../src/care/TempDirs.js"

const tmp = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-sweep-test-"))
afterAll(() => Fs.rmSync(tmp, { recursive: true, force: true }))

/** the pid of a process that has ended */
const deadPid = (): number => {
  const r = ChildProcess.spawnSync("sh", ["-c", "echo $$"], { encoding: "utf8" })
  return Number(r.stdout.trim())
}

describe("temporary directories of killed processes", () => {
  it("a directory is named with its maker's pid", () => {
    const dir = makeTempDir("ocx2-write-")
    try {
      expect(Path.basename(dir)).toMatch(new RegExp(`^ocx2-write-${process.pid}-[A-Za-z0-9]{6}$`))
      expect(Path.dirname(dir)).toBe(Os.tmpdir())
    } finally {
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("removes those whose maker is gone, and keeps a live maker's, a name without a pid, a link and a file", () => {
    const gone = deadPid()
    const live = ChildProcess.spawn("sleep", ["60"], { stdio: "ignore" })
    try {
      const names = {
        deadWrite: `ocx2-write-${gone}-aB3xYz`,
        deadRehearsal: `ocx2-rehearsal-${gone}-Qw9eRt`,
        liveWrite: `ocx2-write-${live.pid}-aB3xYz`,
        mine: `ocx2-rehearsal-${process.pid}-zzzzzz`,
        noPid: "ocx2-write-2Mt6W5",
        link: `ocx2-write-${gone}-linkln`,
        file: `ocx2-rehearsal-${gone}-fileee`,
        other: `something-${gone}-aB3xYz`
      }
      for (const name of [names.deadWrite, names.deadRehearsal, names.liveWrite, names.mine, names.noPid, names.other]) {
        Fs.mkdirSync(Path.join(tmp, name, "care"), { recursive: true })
        Fs.writeFileSync(Path.join(tmp, name, "write.bundle"), "x")
      }
      const target = Path.join(tmp, "kept-target")
      Fs.mkdirSync(target)
      Fs.symlinkSync(target, Path.join(tmp, names.link))
      Fs.writeFileSync(Path.join(tmp, names.file), "x")

      expect([...sweepTempDirs(tmp)].sort()).toEqual([Path.join(tmp, names.deadRehearsal), Path.join(tmp, names.deadWrite)].sort())
      expect(Fs.readdirSync(tmp).sort()).toEqual(["kept-target", names.file, names.link, names.liveWrite, names.mine, names.noPid, names.other].sort())
      // nothing left to sweep a second time
      expect(sweepTempDirs(tmp)).toEqual([])
    } finally {
      live.kill("SIGKILL")
    }
  })

  it("a temporary directory that cannot be read sweeps nothing", () => {
    expect(sweepTempDirs(Path.join(tmp, "absent"))).toEqual([])
  })
})
