import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { pollersOfKind } from "../../src/node/HookInstall.js"
import { waitFor } from "../support/world.js"

// The node's poller starts `flock ... fossil backoffice` every round: between fork and exec that
// child shows the poller's own command line. CI once counted two pollers after `hook --fast` ran
// twice. A poller here is a bash script of that name whose subshell is such a fork, held.

const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-pollerfork-"))
afterAll(() => Fs.rmSync(dir, { recursive: true, force: true }))

const sameCommandLine = (pid: number) => {
  const own = Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8")
  return Fs.readdirSync("/proc").filter((e) => /^\d+$/.test(e)).filter((e) => {
    try {
      return Fs.readFileSync(`/proc/${e}/cmdline`, "utf8") === own
    } catch {
      return false
    }
  })
}

describe("the pollers of a repository", () => {
  it("are the poller, not its child between fork and exec, which shows the same command line", async () => {
    const repository = Path.join(dir, "served.fossil")
    Fs.writeFileSync(repository, "")
    const script = Path.join(dir, "ocx2-hook")
    Fs.writeFileSync(script, "( while :; do sleep 1; done ) &\nwait\n")
    const poller = ChildProcess.spawn("bash", [script, "--poll", repository], { cwd: "/", stdio: "ignore" })
    try {
      expect(await waitFor(() => (sameCommandLine(poller.pid!).length === 2 ? true : undefined), 10_000, 20), "the poller and its fork").toBe(true)
      expect(pollersOfKind(repository)).toEqual([{ pid: poller.pid, kind: "node" }])
    } finally {
      Fs.readdirSync("/proc").filter((e) => /^\d+$/.test(e)).forEach((e) => {
        try {
          if (Fs.readFileSync(`/proc/${e}/cmdline`, "utf8").includes(script)) process.kill(Number(e), "SIGKILL")
        } catch {
          // gone
        }
      })
    }
  })
})
