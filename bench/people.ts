/**
 * Two people refusing each other, and what an installation could change about it (issue 13 item 3;
 * docs/locks.md): `npm run bench -- people [--seconds N]`.
 *
 * No node at all: a served repository and two people replying through the web form every 100 ms
 * each, each post tried once, for N seconds (20 by default), on the same repository served two
 * ways in turn: as `fossil init` makes it and `fossil server` serves it (rollback journal), then
 * in WAL mode (`PRAGMA journal_mode=WAL`; last, since leaving WAL needs the file to itself).
 * (A server started with FOSSIL_VFS=unix-excl, each request taking the file whole, was tried in a
 * first version: its requests' connections were reset, not answered.)
 * Printed for each: posts, failed posts (with the first answer), and the posts' median and slowest
 * time. Everything listens on 127.0.0.1 and lives in temporary directories, removed at the end.
 */
import BetterSqlite3 from "better-sqlite3"
import * as ChildProcess from "node:child_process"
import * as Os from "node:os"
import { freePort, serviceEnvironment, webLogin, webNewThread, webReplyOnce, type WebSession } from "../test/support/fossilServer.js"
import { users } from "../test/support/nodeWorld.js"
import { makeHookWorld, sleep } from "../test/node/hookWorld.js"

const args = process.argv.slice(2)
const i = args.indexOf("--seconds")
const seconds = Number(i === -1 ? 20 : args[i + 1])

const world = await makeHookWorld({ fastHooks: false })
await world.server.stop()
const repository = world.repository

const serve = async (env: NodeJS.ProcessEnv) => {
  const port = await freePort()
  const server = ChildProcess.spawn("fossil", ["server", "--nojail", "--localhost", "--port", String(port), repository], {
    cwd: "/", detached: true, stdio: "ignore", env
  })
  const url = `http://127.0.0.1:${port}/`
  for (let n = 0; ; n++) {
    try {
      await (await fetch(url + "robots.txt")).arrayBuffer()
      break
    } catch {
      if (n > 200) throw new Error("the server did not answer")
      await sleep(50)
    }
  }
  // its requests are forks in its process group
  return { url, stop: () => process.kill(-server.pid!, "SIGKILL") }
}

const talk = async (url: string) => {
  const admin = await webLogin(url, users.admin.login, users.admin.password)
  const thread = await webNewThread({ repository }, admin, { title: "people talking", text: "replies" })
  const sessions: ReadonlyArray<WebSession> = await Promise.all([users.runner, users.stranger].map((u) => webLogin(url, u.login, u.password)))
  const times: Array<number> = []
  const failed: Array<string> = []
  const until = Date.now() + seconds * 1000
  await Promise.all(sessions.map(async (session) => {
    while (Date.now() < until) {
      const t0 = Date.now()
      const r = await webReplyOnce({ repository }, session, { to: thread, text: `${session.user} says hello` })
        .catch((e: unknown) => ({ status: 0, body: `no answer: ${String(e)}`, hash: undefined }))
      times.push(Date.now() - t0)
      if (r.hash === undefined) failed.push(r.body.replace(/<[^>]*>/g, " ").replace(/\s+/g, " ").replace(/^.*Logout/, "").trim().slice(0, 90))
      await sleep(Math.max(0, 100 - (Date.now() - t0)))
    }
  }))
  times.sort((a, b) => a - b)
  return `posts ${times.length}, failed ${failed.length}${failed.length > 0 ? ` (${failed[0]})` : ""}; ` +
    `median ${times[Math.floor(times.length / 2)]} ms, slowest ${times[times.length - 1]} ms; load average ${Os.loadavg().map((l) => l.toFixed(1)).join(" ")}`
}

const journal = (mode: "WAL" | "DELETE") => {
  const db = new BetterSqlite3(repository)
  try {
    // the last server's requests may still be letting go (killed, their locks go with them)
    db.pragma("busy_timeout = 15000")
    return db.pragma(`journal_mode = ${mode}`, { simple: true })
  } finally {
    db.close()
  }
}

try {
  const ways: ReadonlyArray<{ readonly what: string; readonly mode: "WAL" | "DELETE"; readonly env: NodeJS.ProcessEnv }> = [
    { what: "rollback journal, as fossil init makes it", mode: "DELETE", env: serviceEnvironment() },
    { what: "WAL", mode: "WAL", env: serviceEnvironment() }
  ]
  for (const way of ways) {
    const mode = journal(way.mode)
    const server = await serve(way.env)
    try {
      console.log(`two people alone for ${seconds} s, ${way.what} (journal_mode ${mode}): ${await talk(server.url)}`)
    } finally {
      server.stop()
    }
  }
} finally {
  await world.close()
}
