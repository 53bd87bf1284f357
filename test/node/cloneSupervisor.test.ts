import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { Repository } from "../../services/Repository.js"
import { readMessage, writeMessage } from "../../src/protocol/Envelope.js"
import { spareWaits } from "../../src/node/SpareClient.js"
import { supervisorFilesOf } from "../../src/node/SupervisorFiles.js"
import { restartServer, type RunningServer, webLogin, webNewThread } from "../support/fossilServer.js"
import { sandbox } from "../support/nodeWorld.js"
import { closeCloneWorld, cloneUsers, type CloneWorld, makeCloneWorld, runNode, useThisBuild } from "./cloneWorld.js"
import { dist, waitFor } from "./hookWorld.js"

// The supervisor on a clone's host: `ocx2 supervise --node lab2`, the release's program (this
// checkout's build), in place of the node's timer. It holds a question open at the server's OCX
// page (the receipt tool's newer-than and wait) and pulls when it is answered; with a page too old
// to hold it, it pulls every half second; a server that goes down is tried again until it is back.
// A run posted on the server through the web form is started on the clone's host with no `ocx2 node`
// call, the next one by the node's spare watcher.

let world: CloneWorld
let server: RunningServer | undefined
let supervisor: ChildProcess.ChildProcess | undefined
beforeAll(async () => {
  world = await makeCloneWorld("ocx2-clonesup-")
  // the clone's host runs this checkout's build, the round's bundle (which the supervisor is) beside ocx2
  useThisBuild(world, dist)
  server = world.server
  expect((await runNode(world, ["--check"])).stopped).toEqual({ reason: "completed" })
}, 120_000)

const stopSupervisor = async () => {
  if (supervisor !== undefined && supervisor.exitCode === null && supervisor.signalCode === null) {
    const exited = new Promise((r) => supervisor!.once("exit", r))
    supervisor.kill("SIGTERM")
    await exited
  }
  supervisor = undefined
}
afterAll(async () => {
  await stopSupervisor()
  await closeCloneWorld(world, server)
})

const log = () => supervisorFilesOf(world.root, world.clone, cloneUsers.lab2.login).log
const logText = () => (Fs.existsSync(log()) ? Fs.readFileSync(log(), "utf8") : "")

/** Starts the release's `ocx2 supervise` and waits for the node's start; what the log held before is passed by. */
const startSupervisor = async (args: ReadonlyArray<string> = []) => {
  const from = logText().length
  supervisor = ChildProcess.spawn(process.execPath, [Path.join(world.root, "current", "ocx2"), "supervise", "--node", cloneUsers.lab2.login, "--root", world.root, ...args], {
    env: { ...process.env, USER: "root" }, stdio: "ignore", detached: true
  })
  expect(await waitFor(() => (logText().slice(from).includes("the node on") ? true : undefined), 60_000, 100)).toBe(true)
  return from
}

/** A run for lab2 posted on the server through its web form; it is started and ended by lab2. */
const postRunAndSeeItEnd = async () => {
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
  expect(logText()).toContain(`${run}: handed to a watcher`)
  return run
}

/** The clone file's modification time once it stays the same for `everyMs` (each pull writes it), or undefined if it never does within `ms`. */
const clonePullsStop = (ms: number, everyMs: number) => {
  let last = -1
  return waitFor(() => {
    const now = Fs.statSync(world.clone).mtimeMs
    const still = now === last
    last = now
    return still ? now : undefined
  }, ms, everyMs)
}

const replies = async (run: string) =>
  (await Effect.runPromise(Effect.scoped(Effect.flatMap(FossilRepository.make({ path: world.served }), (r: typeof Repository.Service) => r.thread(run)))))
    .flatMap((p) => {
      const reading = readMessage(p.text)
      return reading._tag === "Message" && reading.re === run ? [{ kind: reading.kind, sender: p.sender }] : []
    })

describe("the supervisor on a clone's host", () => {
  it("pulls when the server's page says a receipt arrived, and not while nothing does: a run posted on the server is started and ended", async () => {
    const from = await startSupervisor()
    expect(logText().slice(from)).toContain("pulling when the server's OCX page says a receipt arrived")
    // idle, it holds its question at the server's page and pulls nothing (a short cycle would pull twice a second)
    expect(await clonePullsStop(30_000, 1500)).toBeDefined()
    await postRunAndSeeItEnd()
    // the node's spare waits on the clone's host too, and takes the next run
    expect(await waitFor(() => (spareWaits(world.root) ? true : undefined), 60_000, 200)).toBe(true)
    const next = await postRunAndSeeItEnd()
    expect(Fs.readFileSync(Path.join(world.root, "care", `${next}.log`), "utf8")).toMatch(/in care: spare \d+ took the run/)
    expect(logText().slice(from)).not.toContain("failed")
    await stopSupervisor()
  }, 240_000)

  it("pulls every half second from a server whose page cannot hold the question (an older release)", async () => {
    // the page of an older release: it knows no newer-than, and refuses it as any tool refuses an argument it does not take
    const page = Path.join(world.extroot, "ocx2-cgi")
    Fs.renameSync(page, `${page}-now`)
    Fs.writeFileSync(page, [
      "#!/bin/sh",
      "body=$(/usr/bin/head -c \"${CONTENT_LENGTH:-0}\")",
      "case \"$body\" in",
      `  *newer_than*) printf 'Status: 200 OK\\r\\nContent-Type: application/json; charset=utf-8\\r\\n\\r\\n%s' '${JSON.stringify({
        tool: "receipt", operations: [],
        stopped: { reason: "refused", message: "bad argument: newer_than: is unexpected, expected: \"artifacts\" | \"capabilities_of\"; wait: is unexpected, expected: \"artifacts\" | \"capabilities_of\"" }
      })}' ;;`,
      `  *) printf '%s' "$body" | exec ${page}-now ;;`,
      "esac",
      ""
    ].join("\n"), { mode: 0o755 })
    try {
      const from = await startSupervisor()
      expect(await waitFor(() => (logText().slice(from).includes("does not hold a question until a receipt arrives") ? true : undefined), 30_000, 100)).toBe(true)
      // it pulls on its short cycle: the clone is written again and again
      expect(await clonePullsStop(12_000, 3000)).toBeUndefined()
      await postRunAndSeeItEnd()
      await stopSupervisor()
    } finally {
      Fs.renameSync(`${page}-now`, page)
    }
  }, 180_000)

  it("tries a server that is down again, less and less often, and goes on once it is back", async () => {
    const from = await startSupervisor()
    await server!.stop()
    server = undefined
    expect(await waitFor(() => (/the round failed: .*tried again in \d+ ms/.test(logText().slice(from)) ? true : undefined), 60_000, 100)).toBe(true)
    server = await restartServer(world.served, world.port, { extroot: world.extroot })
    await postRunAndSeeItEnd()
    expect(supervisor!.exitCode).toBeNull()
    await stopSupervisor()
  }, 240_000)
})
