import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { answerHtml } from "../../src/adapters/Html.js"
import { outputPages } from "../../src/adapters/OutputPages.js"
import { type DiskRoom, holdStartsBack, parseBytes } from "../../src/root/DiskRoom.js"
import { stopSpare } from "../../src/pickup/SpareClient.js"
import { hook } from "../../src/tools/hook.js"
import { status } from "../../src/tools/status.js"
import { watch } from "../../src/tools/watch.js"
import { webLogin, webNewThread, type WebSession } from "../support/fossilServer.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { endWatchers, makeReleaseRoot, makeWorld, pidsNaming, type World } from "../support/world.js"
import { startSupervisor, stopSupervisor, supervisorLog, type RunningSupervisor } from "./supervisorWorld.js"

// Issue 37, item 6: a full disk is not silent. ROOT is a small tmpfs of its own here, so that it can
// be made genuinely full (ENOSPC) or short of ROOT/settings/min-free-space. A run posted then is held
// back whole (no watcher, no lock, no `started`), status and its run page say why, and once there is
// room the node answers it (one started, one ended) with no new post: the hook's retrier
// (`ocx2-hook --again`) on a node without a supervisor, the supervisor's own timer on one with.

const MiB = 1024 * 1024

interface DiskWorld {
  readonly world: World
  readonly alice: WebSession
}

/** A world whose ROOT is a tmpfs of `mib` MiB, holding a release root and the node's hook. */
const diskWorld = async (prefix: string, mib: number, setting?: string): Promise<DiskWorld> => {
  const world = await makeWorld({ prefix, checkin: { "hello.txt": "hello from trunk\n" }, fastHooks: true })
  const mounted = ChildProcess.spawnSync("mount", ["-t", "tmpfs", "-o", `size=${mib}m,mode=755`, "tmpfs", world.root], { encoding: "utf8" })
  if (mounted.status !== 0) {
    await world.close()
    throw new Error(`mount tmpfs on ${world.root}: ${mounted.stderr}`)
  }
  makeReleaseRoot(world.root)
  if (setting !== undefined) setMinFree(world.root, setting)
  const installed = await world.call(hook, { node: users.node.login, root: world.root })
  expect(installed.stopped).toEqual({ reason: "completed" })
  return { world, alice: await webLogin(world.server.url, users.admin.login, users.admin.password) }
}

const closeDiskWorld = async (made: DiskWorld | undefined): Promise<void> => {
  if (made === undefined) return
  endWatchers(made.world.root)
  stopSpare(made.world.root)
  ChildProcess.spawnSync("umount", ["-l", made.world.root])
  await made.world.close()
}

const setMinFree = (root: string, value: string): void => {
  Fs.mkdirSync(Path.join(root, "settings"), { recursive: true })
  Fs.writeFileSync(Path.join(root, "settings", "min-free-space"), `${value}\n`)
}

/** Writes ROOT/filler until the filesystem refuses (ENOSPC): ROOT genuinely full. */
const fill = (root: string): string => {
  const file = Path.join(root, "filler")
  const fd = Fs.openSync(file, "w")
  try {
    for (const chunk of [Buffer.alloc(MiB, 1), Buffer.alloc(4096, 1), Buffer.alloc(1, 1)]) {
      for (;;) {
        try {
          Fs.writeSync(fd, chunk)
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code === "ENOSPC") break
          throw e
        }
      }
    }
  } finally {
    Fs.closeSync(fd)
  }
  return file
}

const post = (made: DiskWorld, title: string, script: string) =>
  webNewThread(made.world.server, made.alice, { title, text: made.world.runText(shellRun(made.world, script)) })

const statusOf = async (world: World) => (await world.call(status, { root: world.root }, { as: users.stranger.login })).output

/** What shows the run was never started, not even half way: no started, no watcher's lock, no workspace. */
const untouched = async (world: World, run: string) => {
  expect((await world.replies(run)).map((m) => m.kind)).toEqual([])
  expect(Fs.existsSync(Path.join(world.root, "care", `${run}.lock`))).toBe(false)
  expect(Fs.existsSync(Path.join(world.root, "work", run))).toBe(false)
}

/** The run answered exactly once: one started, one ended, exited 0. */
const answeredOnce = async (world: World, run: string) => {
  const replies = await world.waitEnded(run, 90_000)
  expect(replies.filter((m) => m.kind === "started")).toHaveLength(1)
  expect(replies.filter((m) => m.kind === "ended").map((m) => m.content)).toEqual([{ outcome: "exited", exit: 0 }])
}

/** The page and the answer of `ocx2 watch` for a waiting run on this host. */
const runPage = async (world: World, run: string) => {
  const answer = await world.call(watch, { run, root: world.root, seconds: 0 }, { as: users.admin.login })
  expect(answer.stopped).toEqual({ reason: "completed" })
  return { output: answer.output!, html: outputPages["watch"]!(answer.output, "/ext/ocx2-cgi", undefined) }
}

const retriers = (root: string) => pidsNaming(root).filter((pid) => {
  try {
    return Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes("--again")
  } catch {
    return false
  }
})

describe("the setting and the cut", () => {
  it("reads min-free-space as bytes or with a binary unit, and nothing else", () => {
    expect(["0", "4096", "512M", "2G", "2GiB", "1 kb", "x", "-1", "1.5G"].map(parseBytes))
      .toEqual([0, 4096, 512 * MiB, 2048 * MiB, 2048 * MiB, 1024, undefined, undefined, undefined])
  })

  it("cuts what a round read before its first run when the room is short, the cursor just before it", () => {
    const room = (state: DiskRoom["state"]): DiskRoom => ({ state, free: 0, size: 0, minFree: 0, words: "" })
    const m = (kind: string, rcvid: number, rid: number) => ({ kind, run: `r${rid}`, hash: `h${rid}`, rcvid, rid })
    const found = {
      messages: [m("stop", 3, 10), m("run", 4, 12), m("stop", 4, 13), m("run", 5, 14)],
      arrivals: [{ order: { rcvid: 3, rid: 10 } }, { order: { rcvid: 4, rid: 12 } }, { order: { rcvid: 5, rid: 14 } }],
      cursor: { rcvid: 5, rid: 20 }
    }
    expect(holdStartsBack(room("room"), found)).toMatchObject({ held: undefined, cursor: { rcvid: 5, rid: 20 } })
    for (const state of ["low", "full"] as const) {
      const cut = holdStartsBack(room(state), found)
      expect(cut.held).toBe("r12")
      expect(cut.messages.map((x) => x.rid)).toEqual([10])
      expect(cut.arrivals.map((a) => a.order.rid)).toEqual([10])
      expect(cut.cursor).toEqual({ rcvid: 4, rid: 11 })
    }
  })
})

describe("ROOT full, a node without a supervisor", () => {
  let made: DiskWorld | undefined
  beforeAll(async () => {
    // the threshold under the tmpfs's size, so that freeing the filler is room enough
    made = await diskWorld("ocx2-diskfull-", 48, "4M")
  }, 120_000)
  afterAll(() => closeDiskWorld(made))

  it("holds a run back whole and says so; once space is freed the run is answered once, with no new post", async () => {
    const { world } = made!
    const filler = fill(world.root)
    const full = await statusOf(world)
    expect(full?.disk).toMatchObject({ state: "full" })
    expect(full?.disk?.words).toContain("is full")

    const run = await post(made!, "a run on a full disk", "echo held then run")
    // the hook has read it and left it waiting: its retrier is on it (the hook's log cannot be written on a full disk)
    await world.waitFor("the hook's retrier (ocx2-hook --again)", () => (retriers(world.root).length > 0 ? true : undefined), { ms: 90_000, run })
    const said = await statusOf(world)
    expect(said?.disk).toMatchObject({ state: "full", waiting: true })
    expect(said?.disk?.words).toContain("A run waits for it now")
    // the status page: the same answer, as the web page shows it
    expect(answerHtml(await world.call(status, { root: world.root }, { as: users.stranger.login }))).toContain(`${world.root} is full`)
    await untouched(world, run)
    const page = await runPage(world, run)
    expect(page.output.summary.state).toBe("waiting")
    expect(page.output.held).toContain("is full")
    expect(page.html).toContain("Held back:")

    Fs.rmSync(filler)
    await answeredOnce(world, run)
    // what started it was the retrier's round, not a receipt
    const log = Fs.readFileSync(Path.join(world.root, "node", "hook.log"), "utf8").split("\n").filter((l) => l !== "")
      .map((l) => JSON.parse(l) as { did: ReadonlyArray<string> })
    expect(log.some((e) => e.did[0]?.startsWith("tried again by ocx2-hook --again") === true &&
      e.did.some((d) => d.startsWith(`${run}: handed to a watcher`)))).toBe(true)
    // the retrier ends once nothing waits
    await world.waitFor("the hook's retrier to end", () => (retriers(world.root).length === 0 ? true : undefined), { ms: 90_000, run })
    expect((await statusOf(world))?.disk).toMatchObject({ state: "room", waiting: false })
  }, 180_000)
})

describe("ROOT under min-free-space, a node with its supervisor", () => {
  let made: DiskWorld | undefined
  let supervisor: RunningSupervisor | undefined
  beforeAll(async () => {
    // no setting: the default 1 GiB is more than this ROOT holds
    made = await diskWorld("ocx2-diskfree-", 64)
    supervisor = await startSupervisor(made.world)
  }, 120_000)
  afterAll(async () => {
    await stopSupervisor(supervisor)
    await closeDiskWorld(made)
  })

  // any of its rounds' log entries, not the last round status shows: another round (the node's own
  // replies to an earlier run, say) may come after the one that held the run back (CI beside two
  // busy loops met exactly that)
  const heldLine = (world: World, run: string) =>
    supervisorLog(world).flatMap((l) => l.did).find((d) => d.startsWith(`${run}: held back`))
  const heldBySupervisor = (world: World, run: string) =>
    world.waitFor(`the supervisor's log line that ${run} is held back`, () => (heldLine(world, run) !== undefined ? true : undefined), { ms: 90_000, run })

  it("holds a run back below the setting and says why; lowering the setting starts it, raising it holds the next", async () => {
    const { world } = made!
    const run = await post(made!, "a run short of room", "echo held by the setting")
    expect(await heldBySupervisor(world, run)).toBe(true)
    const said = await statusOf(world)
    expect(said?.disk).toMatchObject({ state: "low", minFree: 1024 * MiB, waiting: true })
    expect(said?.disk?.words).toContain("min-free-space")
    expect(heldLine(world, run)).toContain("held back")
    await untouched(world, run)
    expect((await runPage(world, run)).output.held).toContain("min-free-space")

    setMinFree(world.root, "1M")
    await answeredOnce(world, run)
    expect((await statusOf(world))?.disk).toMatchObject({ state: "room", waiting: false })

    setMinFree(world.root, "1G")
    const next = await post(made!, "a second run short of room", "echo held again")
    expect(await heldBySupervisor(world, next)).toBe(true)
    await untouched(world, next)
    setMinFree(world.root, "0")
    await answeredOnce(world, next)
  }, 180_000)
})
