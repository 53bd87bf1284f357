import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { Repository } from "../../services/Repository.js"
import { readMessage, writeMessage } from "../../src/protocol/Envelope.js"
import { supervisorFilesOf } from "../../src/node/SupervisorFiles.js"
import { webLogin, webNewThread } from "../support/fossilServer.js"
import { sandbox } from "../support/nodeWorld.js"
import { closeCloneWorld, cloneUsers, type CloneWorld, makeCloneWorld, runNode, useThisBuild } from "./cloneWorld.js"
import { dist, waitFor } from "./hookWorld.js"

// The supervisor on a clone's host: `ocx2 supervise --node lab2`, the release's program (this
// checkout's build), pulling on a short cycle in place of the node's timer. A run posted on the
// server through the web form is started on the clone's host with no `ocx2 node` call.

let world: CloneWorld
let supervisor: ChildProcess.ChildProcess | undefined
beforeAll(async () => {
  world = await makeCloneWorld("ocx2-clonesup-")
  // the clone's host runs this checkout's build, the round's bundle (which the supervisor is) beside ocx2
  useThisBuild(world, dist)
  expect((await runNode(world, ["--check"])).stopped).toEqual({ reason: "completed" })
}, 120_000)
afterAll(async () => {
  if (supervisor !== undefined && supervisor.exitCode === null) {
    const exited = new Promise((r) => supervisor!.once("exit", r))
    supervisor.kill("SIGTERM")
    await exited
  }
  await closeCloneWorld(world)
})

const replies = async (run: string) =>
  (await Effect.runPromise(Effect.scoped(Effect.flatMap(FossilRepository.make({ path: world.served }), (r: typeof Repository.Service) => r.thread(run)))))
    .flatMap((p) => {
      const reading = readMessage(p.text)
      return reading._tag === "Message" && reading.re === run ? [{ kind: reading.kind, sender: p.sender }] : []
    })

describe("the supervisor on a clone's host", () => {
  it("pulls on a short cycle: a run posted on the server is started and ended with no ocx2 node call", async () => {
    const log = supervisorFilesOf(world.root, world.clone, cloneUsers.lab2.login).log
    supervisor = ChildProcess.spawn(process.execPath, [Path.join(world.root, "current", "ocx2"), "supervise", "--node", cloneUsers.lab2.login, "--root", world.root], {
      env: { ...process.env, USER: "root" }, stdio: "ignore", detached: true
    })
    expect(await waitFor(() => (Fs.existsSync(log) && Fs.readFileSync(log, "utf8").includes("the node on") ? true : undefined), 60_000, 100)).toBe(true)
    const session = await webLogin(world.url, cloneUsers.alice.login, cloneUsers.alice.password)
    const run = await webNewThread({ repository: world.served }, session, {
      title: "a run for lab2",
      text: writeMessage({
        ocx: 2, to: cloneUsers.lab2.login,
        run: {
          clone: world.cloneCode,
          objective: "a run for lab2",
          workspace: [{ step: "directory", at: "$$root$$/work/$$run$$" }],
          sandbox: sandbox(),
          limits: { wall: "2m" },
          process: { user: cloneUsers.builder.login, command: ["sh", "-c", "true"], env: { PATH: "/usr/bin:/bin" } }
        }
      }, "A run for the lab's board.")
    })
    const ended = await waitFor(async () => {
      const r = await replies(run)
      return r.some((m) => m.kind === "ended") ? r : undefined
    }, 60_000, 200)
    expect(ended?.map((m) => [m.kind, m.sender])).toEqual([["started", "lab2"], ["ended", "lab2"]])
    expect(Fs.readFileSync(log, "utf8")).toContain(`${run}: handed to a watcher`)
  }, 120_000)
})
