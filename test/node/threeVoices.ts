/**
 * A session thread that three people post into at once through the web form, as people do
 * (issue 37, 2): a served repository in fast mode with the node's hook installed, one session
 * (hears everyone) recording each line it is given, and three signed-in people each posting
 * replies one after another, all three at the same time. Shared by test/node/sessionThread.test.ts
 * (a few hundred posts: every post given once, in the server's order) and bench/sessionThread.ts
 * (2,000, with the round's time and the watcher's memory along the way).
 */
import BetterSqlite3 from "better-sqlite3"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { hook } from "../../src/tools/hook.js"
import { hookLogOf } from "../../src/root/HookFiles.js"
import { webLogin, webNewThread, webReplyOnce } from "../support/fossilServer.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { makeHookWorld, sleep, waitFor, type HookWorld } from "./hookWorld.js"

export const people = [users.admin, users.runner, users.stranger] as const

export interface Place { readonly rcvid: number; readonly rid: number }

export interface ThreadWorld {
  readonly world: HookWorld
  readonly run: string
  /** the lines the session was given, parsed: the run's own first line, then each post given */
  readonly lines: () => ReadonlyArray<{ readonly post?: string; readonly from?: string; readonly text?: string }>
  /** the people's posts in the thread, in the server's order */
  readonly serverOrder: () => ReadonlyArray<string>
  /** the place in the server's order of each of the people's posts */
  readonly places: () => ReadonlyMap<string, Place>
  /** the session's watcher (the pid its lock names) */
  readonly watcherPid: () => number | undefined
  /** the hook's calls that ran a round, as hook.log keeps them */
  readonly rounds: () => ReadonlyArray<{ readonly ms: number; readonly to: Place }>
}

/** The world and its session, started and listening. */
export const makeThreadWorld = async (): Promise<ThreadWorld> => {
  const world = await makeHookWorld({ fastHooks: true })
  const installed = await world.call(hook, { node: users.node.login, root: world.root })
  if (installed.stopped.reason !== "completed") throw new Error(`hook --node: ${JSON.stringify(installed.stopped)}`)
  const alice = await webLogin(world.server.url, users.admin.login, users.admin.password)
  // cat reads in large blocks and writes each line as given
  const session = shellRun(world, "cat > $$workspace$$/lines", { session: true, hears: ["*"] }, { limits: { wall: "60m" } })
  const run = await webNewThread(world.server, alice, { title: "a thread of three voices", text: world.runText(session) })
  const started = await waitFor(() => {
    try {
      return JSON.parse(Fs.readFileSync(Path.join(world.root, "care", `${run}.session`), "utf8")).started !== undefined ? true : undefined
    } catch {
      return undefined
    }
  }, 120_000, 100)
  if (started === undefined) throw new Error(`the session ${run} did not start`)
  const linesFile = Path.join(world.root, "work", run, "lines")
  const query = <R>(sql: string, ...args: ReadonlyArray<unknown>): ReadonlyArray<R> => {
    const db = new BetterSqlite3(world.repository, { readonly: true })
    try {
      return db.prepare(sql).all(...args) as ReadonlyArray<R>
    } finally {
      db.close()
    }
  }
  const peoples = () => query<{ uuid: string; rcvid: number; rid: number }>(
    `SELECT b.uuid, b.rcvid, b.rid FROM forumpost f JOIN blob b ON b.rid = f.fpid JOIN rcvfrom r ON r.rcvid = b.rcvid JOIN user u ON u.uid = r.uid
     WHERE f.froot = (SELECT rid FROM blob WHERE uuid = ?) AND b.rid <> f.froot AND u.login <> ? ORDER BY b.rcvid, b.rid`,
    run, users.node.login
  )
  return {
    world,
    run,
    lines: () => {
      try {
        return Fs.readFileSync(linesFile, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l))
      } catch {
        return []
      }
    },
    serverOrder: () => peoples().map((p) => p.uuid),
    places: () => new Map(peoples().map((p) => [p.uuid, { rcvid: p.rcvid, rid: p.rid }])),
    watcherPid: () => {
      try {
        const pid = Number(Fs.readFileSync(Path.join(world.root, "care", `${run}.lock`), "utf8").trim())
        return Number.isInteger(pid) && pid > 0 ? pid : undefined
      } catch {
        return undefined
      }
    },
    rounds: () => {
      try {
        return Fs.readFileSync(hookLogOf(world.root), "utf8").split("\n").filter((l) => l !== "").flatMap((l) => {
          const entry = JSON.parse(l) as { ms?: number; to?: Place; did?: ReadonlyArray<string> }
          // a call that went to the round: it says what it delivered or decided, not that nothing arrived
          return entry.ms !== undefined && entry.to !== undefined && entry.did?.some((d) => /deliver|gave|given|appended/i.test(d)) === true
            ? [{ ms: entry.ms, to: entry.to }]
            : []
        })
      } catch {
        return []
      }
    }
  }
}

/**
 * The three people post `total` replies into the thread, all three at once, each one after
 * another; a post Fossil refused (people's posts collide: "database is locked", issue 37, 8) is
 * posted again. Resolves with each person's posts (full hashes, in the order each made them) and
 * how many tries were refused.
 */
export const threeVoices = async (world: HookWorld, thread: string, total: number) => {
  const sessions = await Promise.all(people.map((p) => webLogin(world.server.url, p.login, p.password)))
  let refused = 0
  const posted = await Promise.all(sessions.map(async (session, who) => {
    const mine: Array<string> = []
    for (let n = who; n < total; n += people.length) {
      for (;;) {
        const r = await webReplyOnce(world.server, session, { to: thread, text: `post ${n} by ${session.user}` })
        if (r.hash !== undefined) {
          mine.push(r.hash)
          break
        }
        refused++
        await sleep(20)
      }
    }
    return mine
  }))
  return { posted, refused }
}

/** Resident and peak resident memory of a process (MB), from /proc. */
export const memoryMb = (pid: number | undefined): { readonly rss: number; readonly peak: number } | undefined => {
  if (pid === undefined) return undefined
  try {
    const status = Fs.readFileSync(`/proc/${pid}/status`, "utf8")
    const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(status)?.[1] ?? 0)
    return { rss: kb("VmRSS") / 1024, peak: kb("VmHWM") / 1024 }
  } catch {
    return undefined
  }
}
