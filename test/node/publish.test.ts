import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import * as FossilRepository from "../../layers/FossilRepository.js"
import { Repository } from "../../services/Repository.js"
import { writeMessage } from "../../src/protocol/Envelope.js"
import { fossil, webLogin, webNewThread } from "../support/fossilServer.js"
import { shellRun, users } from "../support/nodeWorld.js"
import { eventually, waitUntil } from "../support/world.js"
import { installedHookWorld, type HookWorld } from "./hookWorld.js"

// 2.13: a publish from a sender 2.3 allows, once a run has ended and its workspace is kept,
// publishes again from the workspace what the run names, without launching anything.

let world: HookWorld
installedHookWorld({}, (made) => (world = made))

const uv = async (name: string) => fossil(["uv", "cat", name, "-R", world.repository]).catch(() => undefined)
/** The plain replies naming published files, as the served repository holds them. */
const publicationReplies = (run: string) =>
  Effect.flatMap(Repository, (r) => r.thread(run)).pipe(
    Effect.provide(FossilRepository.layer({ path: world.repository })),
    Effect.map((posts) => posts.filter((p) => p.sender === users.node.login && p.text.startsWith("Unversioned files:")))
  )

describe("publish", () => {
  // real processes and real time: the node's hook and watcher answer through the server
  it.live("publishes an ended run's files again from its workspace; a publish from a user without admin or setup is ignored", () =>
    Effect.gen(function*() {
      const run = yield* Effect.promise(async () => {
        const alice = await webLogin(world.server.url, users.admin.login, users.admin.password)
        return webNewThread(world.server, alice, {
          title: "a run that publishes",
          text: world.runText(shellRun(world, "", {
            command: ["sh", "-c", "echo first > $$workspace$$/out.txt; echo launched >> $$workspace$$/launches"],
            unversioned_files: [{ at: "$$workspace$$/out.txt", as: "builds/out.txt" }]
          }))
        })
      })
      yield* Effect.promise(() => world.waitEnded(run, 90_000))
      expect(yield* waitUntil(async () => (await uv("builds/out.txt")) === "first\n", 10_000)).toBe(true)
      const workspace = Path.join(world.root, "work", run)
      yield* waitUntil(() => Fs.existsSync(Path.join(world.root, "care", `${run}.workspace`)), 5_000)

      // the workspace changes; mallory's publish is passed by
      Fs.writeFileSync(Path.join(workspace, "out.txt"), "second\n")
      yield* Effect.promise(() => world.reply(users.stranger.login, run, writeMessage({ ocx: 2, re: run, publish: {} })))
      yield* Effect.sleep("3 seconds")
      expect(yield* Effect.promise(() => uv("builds/out.txt"))).toBe("first\n")

      // alice's publish: the file again, and a reply naming it; nothing launched
      yield* Effect.promise(() => world.reply(users.admin.login, run, writeMessage({ ocx: 2, re: run, publish: {} })))
      expect(yield* waitUntil(async () => (await uv("builds/out.txt")) === "second\n", 15_000)).toBe(true)
      const thread = yield* Effect.promise(() => world.replies(run))
      expect(thread.filter((m) => m.kind === "ended")).toHaveLength(1)
      expect(thread.filter((m) => m.kind === "started")).toHaveLength(1)
      expect(Fs.readFileSync(Path.join(workspace, "launches"), "utf8")).toBe("launched\n")
      // the reply naming the files follows the files
      const replies = yield* eventually(publicationReplies(run), (found) => found.length >= 2, 15_000)
      expect(replies).toHaveLength(2)
      expect(replies[1]!.text).toMatch(/builds\/out\.txt: 7 bytes, hash/)
    }), 180_000)
})
