import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { DoctorOutput } from "../../src/tools/doctor.js"
import { closeCloneWorld, cloneUsers, type CloneWorld, makeCloneWorld, runNode } from "./cloneWorld.js"

// ocx2 doctor on a clone's host (issue 40): `ocx2 doctor --repository CLONE` checks the node
// `ocx2 node` registered for the clone (ROOT/node/clones.json): it signs in to the server with the
// passwords file as the clone's node user, and checks the pages, the limits and the room as on the
// server's host. A real fossil server serving the OCX CGI, a real clone made as lab2.

let world: CloneWorld
beforeAll(async () => {
  world = await makeCloneWorld("ocx2-doctor-clone-")
  expect((await runNode(world, ["--check"])).stopped).toEqual({ reason: "completed" })
}, 180_000)
afterAll(() => closeCloneWorld(world))

const doctor = () => {
  const r = ChildProcess.spawnSync(process.execPath, [Path.join(world.root, "current", "ocx2"), "--json", "--repository", world.clone, "doctor"], {
    encoding: "utf8", timeout: 120_000, env: { ...process.env, USER: "root" }
  })
  const answer = JSON.parse(r.stdout) as { output?: DoctorOutput; stopped: { reason: string; message?: string } }
  return { status: r.status, answer, output: answer.output! }
}
const finding = (output: DoctorOutput, check: string) => output.findings.find((f) => f.check === check)

describe("ocx2 doctor on a clone's host", () => {
  it("finds the clone's node healthy, its password signing in to the server, exit 0", () => {
    const { status, answer, output } = doctor()
    expect(answer.stopped, JSON.stringify(answer)).toEqual({ reason: "completed" })
    expect(output.findings.filter((f) => !f.ok)).toEqual([])
    expect(status).toBe(0)
    expect(output.role).toBe("clone")
    expect(output.node).toBe(cloneUsers.lab2.login)
    expect(output.findings.map((f) => f.check)).toEqual(["server", "pages", "supervisor", "release's Node", "limits", "stream", "clone password", "node user", "room"])
    expect(finding(output, "clone password")?.words).toBe(`${Fs.realpathSync(world.passwords)} signs in to ${world.url.replace(/\/+$/, "")} as ${cloneUsers.lab2.login}`)
    expect(finding(output, "node user")?.words).toContain("neither admin nor setup")
  }, 180_000)

  it("FAILs a password the server does not take, with the fix, exit 1", () => {
    const kept = Fs.readFileSync(world.passwords, "utf8")
    Fs.writeFileSync(world.passwords, JSON.stringify({ user: cloneUsers.lab2.login, password: "not-the-password" }))
    try {
      const { status, output } = doctor()
      expect(status).toBe(1)
      expect(output.findings.filter((f) => !f.ok).map((f) => f.check)).toEqual(["clone password"])
      expect(finding(output, "clone password")?.words).toContain(`signing in to ${world.url.replace(/\/+$/, "")} as ${cloneUsers.lab2.login}`)
      expect(finding(output, "clone password")?.fix).toContain(`fossil user password ${cloneUsers.lab2.login}`)
    } finally {
      Fs.writeFileSync(world.passwords, kept)
    }
    expect(doctor().status).toBe(0)
  }, 180_000)
})
