import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as LiveHosts from "../../layers/LiveHosts.js"
import { users } from "../../src/demo/LocalNode.js"
import { hookRound, watcherOf } from "../../src/node/Round.js"
import { releasePaths } from "../../src/release/ReleasePaths.js"
import { cursorFileOf, readCursor, writeCursor, writeNode } from "../../src/root/HookFiles.js"
import type { NodeConfig } from "../../src/root/NodeConfig.js"
import { openDatabase } from "../../src/fossil/Sqlite.js"
import { Hosts } from "../../services/Hosts.js"
import { Repository, type Cursor } from "../../services/Repository.js"
import { shellRun } from "../support/nodeWorld.js"
import { makeWorld, type World } from "../support/world.js"

// ROOT's room is looked at after the round reads, not once before it. A round that began while
// there was room (a receipt of the node's own reply, say) reads again until nothing more arrived;
// a run posted meanwhile, after ROOT/settings/min-free-space was raised, was handed to a watcher on
// the look taken before it (CI beside busy loops: diskRoom.test's second run never held back).
// Here the setting is raised by the repository's read itself, between the round's start and its
// read of the run: the run must be held back, the cursor left before it.

let world: World
let config: NodeConfig
beforeAll(async () => {
  world = await makeWorld({ prefix: "ocx2-roomread-", checkin: { "a.txt": "a\n" }, backoffice: false })
  writeNode(world.root, world.repository, { user: users.node.login, serverUrl: world.server.url })
  config = { root: world.root, repository: world.repository, nodeUser: users.node.login, serverUrl: world.server.url, passwordsFile: undefined }
}, 120_000)
afterAll(() => world?.close())

const placeOf = (hash: string) => {
  const d = openDatabase(world.repository, { fileMustExist: true })
  try {
    return d.prepare<[string], { rcvid: number; rid: number }>("SELECT rcvid, rid FROM blob WHERE uuid = ?").get(hash)!
  } finally {
    d.close()
  }
}

describe("a round's look at ROOT's room", () => {
  it.live("is taken after its read: a run read after the setting was raised is held back, the cursor before it", () => Effect.gen(function*() {
    const settings = releasePaths(world.root).settings
    Fs.mkdirSync(settings, { recursive: true })
    Fs.writeFileSync(Path.join(settings, "min-free-space"), "0\n")
    Fs.mkdirSync(releasePaths(world.root).care, { recursive: true, mode: 0o700 })
    const first = yield* Effect.promise(() => world.post({ run: "x" }, { to: "nobody", title: "before the node" }))
    const cursorFile = cursorFileOf(world.root, world.repository, users.node.login)
    writeCursor(cursorFile, placeOf(first))
    const run = yield* Effect.promise(() => world.post(shellRun(world, "echo hi"), { title: "posted after the setting was raised" }))
    let raised = false
    const raising = Layer.effect(Repository, Effect.map(Repository, (real) => ({
      ...real,
      readAfter: (cursor: Cursor, limit?: number) => {
        if (!raised) {
          raised = true
          // more than any disk here holds
          Fs.writeFileSync(Path.join(settings, "min-free-space"), "1024T\n")
        }
        return real.readAfter(cursor, limit)
      }
    })))
    const result = yield* Effect.flatMap(Hosts, (hosts) =>
      hookRound(config, { watcherProgram: watcherOf(config.root) }).pipe(
        Effect.provide(raising),
        Effect.provide(hosts.served(config))
      )).pipe(Effect.provide(LiveHosts.layer))
    expect(raised).toBe(true)
    expect(result.held, JSON.stringify(result.did)).toBe(run)
    expect(result.decisions.filter((d) => d.action.startsWith("handed"))).toEqual([])
    expect(result.did.some((d) => d.startsWith(`${run}: held back`) && d.includes("min-free-space"))).toBe(true)
    const cursor = readCursor(cursorFile)!
    const at = placeOf(run)
    expect(cursor.rcvid < at.rcvid || (cursor.rcvid === at.rcvid && cursor.rid < at.rid), JSON.stringify(cursor)).toBe(true)
  }), 120_000)
})
