import BetterSqlite3 from "better-sqlite3"
import * as Effect from "effect/Effect"
import { execFile } from "node:child_process"
import { join } from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { resolveCaller } from "../../src/adapters/cli/Caller.js"
import * as Read from "../../src/fossil/Read.js"
import { cloneAs, fossil, webLogin, webNewThread, type TestUser } from "../support/fossilServer.js"
import { makeWorld, type World } from "../support/world.js"
import { builtProgram } from "./extServer.js"

// Who the command line acts as: the user --user names, else the user its clone remembers, else
// the account's; with the capabilities the repository gives that user, and none without one.

const alice: TestUser = { login: "alice", capabilities: "s", password: "alice-pw" }
const builder: TestUser = { login: "builder", capabilities: "oi", password: "builder-pw" }

let world: World | undefined
let dir: string
let served: string
let clone: string
let ocx2: string
let thread: string

beforeAll(async () => {
  world = await makeWorld({ prefix: "ocx2-caller-", users: [alice, builder], checkin: {} })
  ;({ dir, repository: served } = world)
  // the CLI as the build ships it (dist, with its code cache)
  const bundled = builtProgram("ocx2", join(dir, "build"))
  const server = world.server
  try {
    thread = await webNewThread(server, await webLogin(server.url, "alice", alice.password), { title: "talk", text: "Talk here." })
    clone = await cloneAs(server.url, "builder", builder.password, join(dir, "builder.fossil"))
  } finally {
    await server.stop()
  }
  ocx2 = await bundled
}, 120_000)

afterAll(async () => {
  await world?.close()
})

const fullcap = (file: string, login: string): string => {
  const db = new BetterSqlite3(file, { readonly: true })
  try {
    return Read.user(db, login)?.fullcap ?? ""
  } finally {
    db.close()
  }
}

const resolve = (repository: string | undefined, user: string | undefined, env: NodeJS.ProcessEnv = { USER: "someone" }) =>
  resolveCaller({ repository, user }, env)

const cli = async (...args: Array<string>) => {
  try {
    const { stdout } = await promisify(execFile)(process.execPath, [ocx2, "--json", ...args], { env: { ...process.env, USER: "root" } })
    return JSON.parse(stdout)
  } catch (error: any) {
    if (typeof error.stdout === "string" && error.stdout.startsWith("{")) return JSON.parse(error.stdout)
    throw error
  }
}

describe("the caller of the command line", () => {
  // the repository's files, read as they are
  it.live("on the served repository, is the user named, with that user's capabilities there", () =>
    Effect.gen(function*() {
      expect(yield* resolve(served, "alice")).toEqual({ user: "alice", capabilities: fullcap(served, "alice"), sandboxed: false })
      expect(fullcap(served, "alice")).toContain("s")
      expect(yield* resolve(served, "builder")).toEqual({ user: "builder", capabilities: fullcap(served, "builder"), sandboxed: false })
      expect(yield* resolve(served, "nosuchuser")).toEqual({ user: "nosuchuser", capabilities: "", sandboxed: false })
      // no user named: the account's, which holds what the repository gives it (here nothing)
      expect(yield* resolve(served, undefined)).toEqual({ user: "someone", capabilities: "", sandboxed: false })
    }))

  it.live("on a clone with no user named, is the user the clone remembers", () =>
    Effect.gen(function*() {
      expect(yield* resolve(clone, undefined)).toEqual({ user: "builder", capabilities: fullcap(clone, "builder"), sandboxed: false })
      expect(yield* resolve(clone, undefined, {})).toMatchObject({ user: "builder" })
      // a user named still wins, with what the clone gives that user
      expect(yield* resolve(clone, "alice")).toEqual({ user: "alice", capabilities: fullcap(clone, "alice"), sandboxed: false })
    }))

  it.live("without a repository holds nothing, whatever the environment says", () =>
    Effect.gen(function*() {
      expect(yield* resolve(undefined, "alice", { USER: "root", OCX_CAPABILITIES: "s" })).toEqual({ user: "alice", capabilities: "", sandboxed: false })
      expect(yield* resolve(undefined, undefined, { USER: "root", OCX_SANDBOX: "1" })).toEqual({ user: "root", capabilities: "", sandboxed: true })
      expect(yield* resolve(join(dir, "missing.fossil"), "alice")).toEqual({ user: "alice", capabilities: "", sandboxed: false })
    }))

  it("ocx2 --repository CLONE acts as the user the clone remembers", async () => {
    const status = await cli("--repository", clone, "status")
    expect(status.output.caller).toEqual({ user: "builder", capabilities: fullcap(clone, "builder") })
    const post = await cli("--repository", clone, "post", thread.slice(0, 10), "hello", "--dry-run")
    expect(post.stopped).toEqual({ reason: "dry_run" })
    expect(post.output).toEqual({ place: "reply", to: thread, thread, as: "builder", pushed: true })
    expect(post.operations).toEqual([
      { op: "push", detail: expect.stringMatching(new RegExp(`^a reply to ${thread} .* as builder, put into ${clone} and pushed to `)), done: false }
    ])
    // the account's USER is root, and still the clone's user acts
    const named = await cli("--repository", clone, "--user", "alice", "status")
    expect(named.output.caller.user).toBe("alice")
  })
})
