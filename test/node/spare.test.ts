import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import type { NodeConfig } from "../../src/root/NodeConfig.js"
import { askSpare, ensureSpare, handOffRun, spareStarting, stopSpare } from "../../src/pickup/SpareClient.js"
import { spareFiles, sparePid, spareSetting } from "../../src/care/SpareFiles.js"
import { parseNodeArgs } from "../../src/watcher/main.js"
import { webNewThread, type WebSession } from "../support/fossilServer.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { holdLock } from "../support/heldLock.js"
import { answerWithin, explain, makeReleaseRoot, pidsNaming, sleep, waitFor, signedInHookedWorld, type HookWorld } from "./hookWorld.js"

// The spare watcher (docs/architecture.md): a watcher started ahead of the next run, handed it
// by the hook (or anyone handing a run off) over ROOT/care/spare/socket. End to end on a served
// repository whose hook is installed from a release root, as a node runs.
//
// The cases share one world, but none counts on what a case before it left: each finds the spare
// it needs (waitingSpare starts one with a run when none waits), and a wait that runs out fails
// with what the node saw (world.waitFor, world.waitEnded), not on a pid a failed case never set.

let world: HookWorld
let alice: WebSession
signedInHookedWorld((made, signedIn) => {
  world = made
  alice = signedIn
})

const post = (run: object) => webNewThread(world.server, alice, { title: "a run", text: world.runText(run) })
const logOf = (run: string) => {
  try {
    return Fs.readFileSync(Path.join(world.root, "care", `${run}.log`), "utf8")
  } catch {
    return ""
  }
}
const tailOf = (file: string, lines = 30) => {
  try {
    return Fs.readFileSync(file, "utf8").split("\n").slice(-lines).join("\n")
  } catch {
    return `${file}: none`
  }
}
const alive = (pid: number) => Fs.existsSync(`/proc/${pid}`)
const counted = (replies: ReadonlyArray<{ kind: string }>) => replies.map((m) => m.kind)

/** the pid of the spare that answers now, if one does */
const spareNow = async (): Promise<number | undefined> => {
  const answer = await askSpare(world.root, { ping: true })
  return answer !== undefined && "spare" in answer ? answer.spare : undefined
}

/** the pid of the spare that answers, once one does; the test fails, saying what the node saw, when none does within `ms` */
const spareAnswering = (ms = answerWithin, run?: string): Promise<number> =>
  world.waitFor("a spare answers on ROOT/care/spare/socket", spareNow, { ms, ...(run === undefined ? {} : { run }) })

/**
 * The spare waiting for the node's next run: the one that answers, or, when none does (a case
 * before this one ended it, or failed before its run left one), the one a run's watcher leaves.
 */
const waitingSpare = async (): Promise<number> => {
  const waiting = await waitFor(spareNow, 2_000, 100)
  if (waiting !== undefined) return waiting
  const run = await post(shellRun({ serverCode: world.serverCode }, "true"))
  expect(counted(await world.waitEnded(run))).toEqual(["started", "ended"])
  return spareAnswering(answerWithin, run)
}

/** a spare other than `old` answers: the one started after `old` took a run or ended */
const expectNewSpare = async (old: number) => {
  const next = await spareAnswering()
  expect(next).toBeDefined()
  expect(next).not.toBe(old)
  return next!
}

/** one line sent as it is to the spare's socket; its answer line, parsed */
const sendRaw = (text: string) =>
  new Promise<unknown>((resolve, reject) => {
    const connection = Net.createConnection(spareFiles(world.root).socket)
    let answered = ""
    connection.on("connect", () => connection.write(text))
    connection.on("data", (chunk) => {
      answered += chunk.toString("utf8")
      if (answered.includes("\n")) resolve(JSON.parse(answered.slice(0, answered.indexOf("\n"))))
    })
    connection.on("error", reject)
    connection.on("close", () => resolve(undefined))
  })

/** the node the spare serves, as its own arguments say (what the hook hands off with) */
const spareNode = (pid: number): NodeConfig => {
  if (!Number.isInteger(pid) || !alive(pid)) throw new Error(`the spare ${pid} is not a live process\n${world.explain()}`)
  const argv = Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter((a) => a !== "")
  const node = parseNodeArgs(argv.slice(argv.indexOf("--spare") + 1))
  if (typeof node === "string") throw new Error(node)
  return node
}
const currentWatcher = () => Path.join(world.root, "current", "ocx2-watcher")

/** a run the hook leaves alone (manual) and a person's hand-off starts */
const manualRun = (script: string, user: string) =>
  post(shellRun({ serverCode: world.serverCode }, script, { manual: true, user }))

describe("the spare watcher", () => {
  it("the first run's watcher leaves a spare; the hook hands it the next run, which it watches once, named by the run", async () => {
    const first = await post(shellRun({ serverCode: world.serverCode }, "true"))
    expect(counted(await world.waitEnded(first))).toEqual(["started", "ended"])
    const spare = await spareAnswering()
    expect(spare).toBeDefined()

    const second = await post(shellRun({ serverCode: world.serverCode }, "sleep 2"))
    // when it is late: the run's log, and what the node's rounds and its care directory say
    const took = await world.waitFor(`the spare ${spare} takes the run`, () => (logOf(second).includes(`spare ${spare} took the run`) ? true : undefined), { every: 50, run: second })
    expect(took, `${logOf(second)}\n${tailOf(Path.join(world.root, "node", "hook.log"))}\ncare: ${Fs.readdirSync(Path.join(world.root, "care")).join(" ")}`).toBe(true)
    // while it watches, it is found by its run's hash as a started watcher is
    expect(pidsNaming(second)).toContain(spare)
    const replies = await world.waitEnded(second)
    expect(counted(replies)).toEqual(["started", "ended"])
    expect(replies[1]!.content).toEqual({ outcome: "exited", exit: 0 })
    // its last line, once ended and the rest are written
    const peak = await world.waitFor("the watcher's last line, its peak memory and CPU", () => /the watcher's peak memory: [\d.]+ MB; its CPU: [\d.]+ s \(user [\d.]+, system [\d.]+\)$/m.exec(logOf(second)) ?? undefined, { every: 50, run: second })
    expect(peak, logOf(second)).toBeDefined()

    // and a new spare waits for the run after
    await expectNewSpare(spare!)
  }, 300_000)

  it("declines another node's run and goes on waiting; the same run handed off twice at once is watched once", async () => {
    const spare = await waitingSpare()
    const node = spareNode(spare)
    const declined = await askSpare(world.root, {
      run: "0".repeat(64),
      personStart: false,
      program: currentWatcher(),
      node: ["--root", node.root, "--repository", node.repository, "--node", "someone-else"]
    })
    expect(declined).toEqual({ declined: "this spare serves another node" })
    expect(await askSpare(world.root, { ping: true })).toEqual({ spare })

    const run = await manualRun("echo once >> $$workspace$$/count; sleep 2", users.builder.login)
    const both = await Promise.all([
      handOffRun(node, run, { watcherProgram: currentWatcher(), personStart: true }),
      handOffRun(node, run, { watcherProgram: currentWatcher(), personStart: true })
    ])
    expect(both.filter((h) => h.warm)).toEqual([{ pid: spare, warm: true }])
    const replies = await world.waitEnded(run)
    expect(counted(replies)).toEqual(["started", "ended"])
    await world.waitFor("both hand-offs' watchers end", () => (both.every((h) => !alive(h.pid)) ? true : undefined), { run })
    expect(logOf(run)).toContain("another watcher holds the run")
    expect(Fs.readFileSync(Path.join(world.root, "work", run, "count"), "utf8")).toBe("once\n")
  }, 300_000)

  it("a killed spare's stale socket is no obstacle: the run goes to a started watcher, and a new spare takes the place", async () => {
    const spare = await waitingSpare()
    const node = spareNode(spare)
    process.kill(spare, "SIGKILL")
    await world.waitFor(`the killed spare ${spare} is gone`, () => (alive(spare) ? undefined : true), { every: 20 })
    expect(Fs.existsSync(spareFiles(world.root).socket)).toBe(true) // left behind

    const run = await manualRun("true", users.runner.login)
    const handed = await handOffRun(node, run, { watcherProgram: currentWatcher(), personStart: true })
    expect(handed.warm).toBe(false)
    expect(counted(await world.waitEnded(run))).toEqual(["started", "ended"])
    expect(logOf(run)).toContain(`in care: watcher ${handed.pid} holds the run`)
    await expectNewSpare(spare)
  }, 300_000)

  it("answers a malformed request with a decline naming what is wrong, and goes on waiting", async () => {
    const spare = await waitingSpare()
    const node = spareNode(spare)
    const nodeArgs = ["--root", node.root, "--repository", node.repository, "--node", node.nodeUser]
    expect(await sendRaw("{not json\n")).toEqual({ declined: "the request is not JSON" })
    for (const notObject of ["5", "null", "[1]", "\"run\""]) {
      expect(await sendRaw(`${notObject}\n`)).toEqual({ declined: "the request is not a JSON object" })
    }
    expect(await sendRaw("{}\n")).toEqual({ declined: "run is not a full artifact hash" })
    expect(await sendRaw(`${JSON.stringify({ run: "abc", node: nodeArgs, program: currentWatcher() })}\n`))
      .toEqual({ declined: "run is not a full artifact hash" })
    expect(await sendRaw(`${JSON.stringify({ run: "0".repeat(64), node: "--root /", program: currentWatcher() })}\n`))
      .toEqual({ declined: "node is not a list of arguments" })
    expect(await sendRaw(`${JSON.stringify({ run: "0".repeat(64), node: [...nodeArgs, "--bogus"], program: currentWatcher() })}\n`))
      .toMatchObject({ declined: expect.stringMatching(/^unknown argument "--bogus"/) })
    expect(await sendRaw(`${JSON.stringify({ run: "0".repeat(64), node: nodeArgs, program: 7 })}\n`)).toEqual({ declined: "program is not a path" })
    expect(await sendRaw("x".repeat(70 * 1024))).toEqual({ declined: "the request is longer than 65536 bytes" })
    // none of it took a run or ended the spare
    expect(await askSpare(world.root, { ping: true })).toEqual({ spare })
    expect(alive(spare)).toBe(true)
  }, 240_000)

  it("a switched release ends the spare of the old one; the run is watched by the new release's watcher", async () => {
    const spare = await waitingSpare()
    const next = Path.join(world.root, "staged", "ba9876543210")
    Fs.cpSync(Fs.realpathSync(Path.join(world.root, "current")), next, { recursive: true, verbatimSymlinks: true })
    const link = Path.join(world.root, "current.new")
    Fs.symlinkSync("staged/ba9876543210", link)
    Fs.renameSync(link, Path.join(world.root, "current"))

    const run = await post(shellRun({ serverCode: world.serverCode }, "true"))
    expect(counted(await world.waitEnded(run))).toEqual(["started", "ended"])
    expect(logOf(run)).toMatch(/in care: watcher \d+ holds the run/)
    await world.waitFor(`the old release's spare ${spare} ends`, () => (alive(spare) ? undefined : true), { every: 50, run })
    expect(alive(spare)).toBe(false)
    expect(Fs.readFileSync(spareFiles(world.root).log, "utf8")).toMatch(new RegExp(`spare ${spare}: ends: its program (is not the one|was rebuilt or switched)`))
    // the spare after it is the new release's
    const newer = await spareAnswering(answerWithin, run)
    const argv = Fs.readFileSync(`/proc/${newer}/cmdline`, "utf8").split("\0")
    // node, its options (HandOff.ts: watcherNodeFlags), then the program
    expect(Fs.realpathSync(argv.slice(1).find((a) => !a.startsWith("-"))!)).toBe(Path.join(next, "ocx2-watcher"))
  }, 300_000)

  it("ROOT/settings/spare-watcher: a number of seconds ends an unused spare after it; off starts none", async () => {
    const settings = Path.join(world.root, "settings")
    Fs.mkdirSync(settings, { recursive: true })
    const setting = Path.join(settings, "spare-watcher")
    try {
      const stopped = await waitingSpare()
      Fs.writeFileSync(setting, "1\n")
      expect(sparePid(world.root)).toBe(stopped)
      stopSpare(world.root)
      await world.waitFor(`the spare ${stopped} stops answering once asked to end`, async () => ((await askSpare(world.root, { ping: true })) === undefined ? true : undefined), { every: 50 })
      // asked to end, it says so and takes its socket with it
      expect(Fs.readFileSync(spareFiles(world.root).log, "utf8")).toContain(`spare ${stopped}: ends: SIGTERM`)
      expect(Fs.existsSync(spareFiles(world.root).socket)).toBe(false)
      const run = await post(shellRun({ serverCode: world.serverCode }, "true"))
      expect(counted(await world.waitEnded(run))).toEqual(["started", "ended"])
      const ended = await world.waitFor("the unused spare ends after 1 s", () => (Fs.readFileSync(spareFiles(world.root).log, "utf8").includes("ends: unused for 1 s") ? true : undefined), { run })
      expect(ended).toBe(true)
      // it says so, then takes its socket with it (a moment later: waited for)
      expect(await world.waitFor("the spare's socket is gone", () => (Fs.existsSync(spareFiles(world.root).socket) ? undefined : true), { every: 50 }), "the spare's socket is gone").toBe(true)

      Fs.writeFileSync(setting, "off\n")
      const before = Fs.readFileSync(spareFiles(world.root).log, "utf8")
      const other = await post(shellRun({ serverCode: world.serverCode }, "true"))
      expect(counted(await world.waitEnded(other))).toEqual(["started", "ended"])
      // its watcher, the one that would start a spare here, ends having started none
      expect(await world.waitFor(`the watcher of ${other} ends`, () => (pidsNaming(other).length === 0 ? true : undefined), { every: 50, run: other }), `the watcher of ${other} ends`).toBe(true)
      const spares = pidsNaming(world.root).filter((pid) => {
        try {
          return Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes("--spare")
        } catch {
          return false
        }
      })
      expect(spares, "spare watchers of the root").toEqual([])
      expect(await askSpare(world.root, { ping: true })).toBeUndefined()
      expect(Fs.readFileSync(spareFiles(world.root).log, "utf8")).toBe(before)
    } finally {
      Fs.rmSync(setting, { force: true })
    }
  }, 300_000)

  it("a spare ends when its directory is removed, and stopSpare ends only a spare of that root", async () => {
    const spare = await waitingSpare()
    expect(sparePid(world.root)).toBe(spare)
    stopSpare(Path.join(world.dir, "another-root"))
    expect(alive(spare)).toBe(true)
    Fs.rmSync(spareFiles(world.root).dir, { recursive: true, force: true })
    await world.waitFor(`the spare ${spare} ends as its directory goes`, () => (alive(spare) ? undefined : true), { every: 50 })
    expect(alive(spare)).toBe(false)
  }, 300_000)
})

describe("starting a spare", () => {
  // watchers whose runs end together each look for a spare and, finding none, would each start
  // one, all but the first to end at once: the look and the start are one step under
  // ROOT/care/spare/starting, which an asker takes without waiting or leaves to whoever holds it
  it("starts none while another asker is starting one, and one once the lock is free", async () => {
    const spare = await waitingSpare()
    const node = spareNode(spare)
    stopSpare(world.root)
    await world.waitFor(`the spare ${spare} ends, and no other is being started`, () => (alive(spare) || spareStarting(world.root) ? undefined : true), { every: 50 })
    const letGo = await holdLock(spareFiles(world.root).starting)
    try {
      expect(await ensureSpare(node, currentWatcher())).toBeUndefined()
      expect(spareStarting(world.root)).toBe(false)
    } finally {
      await letGo()
    }
    const started = await ensureSpare(node, currentWatcher())
    expect(started).toBeDefined()
    expect(await spareAnswering()).toBe(started)
    // the next asker finds it and starts none
    expect(await ensureSpare(node, currentWatcher())).toBeUndefined()
  }, 300_000)
})

describe("a spare whose ROOT or care directory goes ends at once", () => {
  /**
   * A spare of a root of its own (a release root as accept leaves one, with its care directory),
   * started as ensureSpare starts one but writing to a log outside the root, so what it said is
   * still there once the root is gone. Returns once it waits.
   */
  const standaloneSpare = async (name: string) => {
    const root = Path.join(world.dir, name)
    Fs.mkdirSync(root)
    // no code caches: a spare that ends as its root goes must write none (the cases below)
    makeReleaseRoot(root, undefined, undefined, false)
    Fs.mkdirSync(spareFiles(root).dir, { recursive: true })
    const logFile = Path.join(world.dir, `${name}.log`)
    const out = Fs.openSync(logFile, "a")
    const child = ChildProcess.spawn(
      process.execPath,
      [Path.join(root, "current", "ocx2-watcher"), "--spare", "--root", root, "--repository", world.repository, "--node", users.node.login],
      { detached: true, stdio: ["ignore", out, out] }
    )
    child.unref()
    Fs.closeSync(out)
    const log = () => Fs.readFileSync(logFile, "utf8")
    const pid = child.pid!
    const waits = await waitFor(() => (log().includes(`spare ${pid}: waits on`) ? true : undefined), answerWithin, 50)
    expect(waits, `${log()}\n${explain({ dir: world.dir, root })}`).toBe(true)
    return { root, pid, log }
  }
  /** ms from now until `pid` is gone (or undefined when it is still there after `ms`) */
  const endsWithin = async (pid: number, ms: number) => {
    const began = Date.now()
    return (await waitFor(() => (alive(pid) ? undefined : true), ms, 10)) === true ? Date.now() - began : undefined
  }
  const kill = (pid: number) => {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // gone
    }
  }

  it.each([
    ["ROOT moved away", "its root", (root: string) => Fs.renameSync(root, `${root}.gone`)],
    ["ROOT/care moved away", "its care directory", (root: string) => Fs.renameSync(Path.join(root, "care"), Path.join(root, "care.gone"))]
  ])("%s: it ends at once, naming the place gone", async (_, place, remove) => {
    const spare = await standaloneSpare(`spare-${place.replace(/\W+/g, "-")}`)
    try {
      remove(spare.root)
      const took = await endsWithin(spare.pid, 1000)
      expect(took, spare.log()).toBeDefined()
      const named = place === "its root" ? spare.root : Path.join(spare.root, "care")
      expect(spare.log()).toContain(`spare ${spare.pid}: ends: ${place} ${named} is gone`)
      // and it wrote nothing as it went: not even its program's code cache into the release
      const release = Path.join(place === "its root" ? `${spare.root}.gone` : spare.root, "staged", "0123456789ab")
      expect(Fs.readdirSync(release).filter((name) => name.includes(".cache"))).toEqual([])
    } finally {
      kill(spare.pid)
    }
  }, 240_000)

  it.each([
    ["ROOT", (root: string) => root],
    ["ROOT/care", (root: string) => Path.join(root, "care")]
  ])("%s removed: it ends at once", async (name, place) => {
    const spare = await standaloneSpare(`spare-rm-${name.replace(/\W+/g, "-")}`)
    try {
      // retried: the spare, ending, may write its program's code cache into the release being removed
      Fs.rmSync(place(spare.root), { recursive: true, force: true, maxRetries: 20, retryDelay: 10 })
      const took = await endsWithin(spare.pid, 1000)
      expect(took, spare.log()).toBeDefined()
      expect(spare.log()).toMatch(new RegExp(`spare ${spare.pid}: ends: its (root|care directory|directory|socket|lock) ${spare.root}\\S* is gone`))
    } finally {
      kill(spare.pid)
    }
  }, 240_000)

  it("a spare of a release with no code cache leaves, as it ends, one the next start accepts", async () => {
    const spare = await standaloneSpare("spare-cache")
    const bundle = Path.join(spare.root, "current", "ocx2-watcher.cjs")
    expect(Fs.existsSync(`${bundle}.cache`)).toBe(false)
    process.kill(spare.pid, "SIGTERM")
    expect(await endsWithin(spare.pid, answerWithin), spare.log()).toBeDefined()
    expect(Fs.existsSync(`${bundle}.cache`), spare.log()).toBe(true)
    // loaded as the loader loads it (bin/build.mjs), in a Node of its own with no flags set
    const check = ChildProcess.spawnSync(process.execPath, ["-e", `
      const Fs = require("node:fs"), Vm = require("node:vm"), file = process.argv[1]
      const source = "(function (exports, require, module, __filename, __dirname) {" + Fs.readFileSync(file, "utf8") + "\\n})"
      console.log(new Vm.Script(source, { filename: file, cachedData: Fs.readFileSync(file + ".cache") }).cachedDataRejected)`, bundle], { encoding: "utf8" })
    expect(check.stdout.trim(), check.stderr).toBe("false")
  }, 240_000)

  it("as it warms up it removes what killed processes left in the temporary directory, and nothing of a live one", async () => {
    const gone = Number(ChildProcess.spawnSync("sh", ["-c", "echo $$"], { encoding: "utf8" }).stdout.trim())
    const left = [`ocx2-write-${gone}-sPaRe1`, `ocx2-rehearsal-${gone}-sPaRe2`].map((name) => Path.join(Os.tmpdir(), name))
    const kept = Path.join(Os.tmpdir(), `ocx2-write-${process.pid}-sPaRe3`)
    for (const dir of [...left, kept]) Fs.mkdirSync(Path.join(dir, "care"), { recursive: true })
    const spare = await standaloneSpare("spare-sweep")
    try {
      expect(left.filter((dir) => Fs.existsSync(dir)), spare.log()).toEqual([])
      expect(Fs.existsSync(kept)).toBe(true)
    } finally {
      kill(spare.pid)
      for (const dir of [...left, kept]) Fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 240_000)

  it("what comes and goes in ROOT and its care directory (runs' files, a switched link) does not end it", async () => {
    const spare = await standaloneSpare("spare-busy")
    try {
      const care = Path.join(spare.root, "care")
      for (let i = 0; i < 200; i++) {
        const file = Path.join(care, `${i.toString(16).padStart(40, "0")}.log`)
        Fs.writeFileSync(file, "a line\n")
        Fs.appendFileSync(file, "another\n")
        Fs.rmSync(file)
      }
      Fs.mkdirSync(Path.join(spare.root, "settings"))
      Fs.symlinkSync("staged/0123456789ab", Path.join(spare.root, "current.new"))
      Fs.renameSync(Path.join(spare.root, "current.new"), Path.join(spare.root, "current"))
      await sleep(2500) // past a poll too
      expect(alive(spare.pid), spare.log()).toBe(true)
      expect(await askSpare(spare.root, { ping: true })).toEqual({ spare: spare.pid })
      expect(spare.log()).not.toContain("ends:")
    } finally {
      kill(spare.pid)
    }
  }, 240_000)
})

describe("its setting and arguments", () => {
  it("a setting that is neither off nor seconds is named, and the default used", () => {
    const root = Fs.mkdtempSync(Path.join(world.dir, "setting-"))
    Fs.mkdirSync(Path.join(root, "settings"))
    Fs.writeFileSync(Path.join(root, "settings", "spare-watcher"), "soon")
    const read = spareSetting(root)
    expect(read.idleSeconds).toBe(3600)
    expect(read.problem).toContain('holds "soon", neither "off" nor a number of seconds above 0')
    expect(spareSetting(Path.join(root, "absent")).idleSeconds).toBe(3600)
  })

  it("a spare is started for a node, never for a run", () => {
    expect(parseNodeArgs(["--root", "/r", "--repository", "/r.fossil", "--node", "lab", "--run", "0".repeat(64)])).toMatch(/^a spare is started for a node, not a run/)
    expect(parseNodeArgs(["--root", "/r", "--repository", "/r.fossil"])).toMatch(/^--node is missing/)
    expect(parseNodeArgs(["--root", "/r", "--repository", "/r.fossil", "--node", "lab"])).toMatchObject({ root: "/r", nodeUser: "lab" })
  })
})
