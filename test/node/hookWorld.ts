/**
 * The world the hook is tested in: the test world (test/support/world.ts) with a check-in of
 * hello.txt on trunk, served in fast mode (backoffice-disable on, fossil backoffice --poll 1), and a
 * release root built directly from this checkout's dist bundles.
 */
import { afterAll, beforeAll, expect } from "@effect/vitest"
import { makeWorld, endWatchers, users, type World } from "../support/world.js"
import { hook } from "../../src/tools/hook.js"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { webLogin, type WebSession } from "../support/fossilServer.js"
import { shellRun } from "../support/nodeWorld.js"
import type { Answer } from "../../src/tools/Tool.js"

export { answerWithin, dist, endWatchers, explain, makeReleaseRoot, pidsNaming, sleep, waitFor } from "../support/world.js"

export type HookWorld = World

/**
 * `pages`: the server serves the release's OCX pages from an extension root, as docs/operations.md
 * says (ext/ocx2-cgi runs ROOT/current/ocx2-cgi, with the Node that runs the tests: Fossil gives an
 * extension no PATH). `extroot`: an extension root of the test's own making.
 */
export const makeHookWorld = (
  options: { readonly fastHooks?: boolean; readonly release?: boolean; readonly pages?: boolean; readonly extroot?: (root: string) => string } = {}
): Promise<HookWorld> =>
  makeWorld({
    prefix: "ocx2-hook-",
    checkin: { "hello.txt": "hello from trunk\n" },
    fastHooks: options.fastHooks ?? true,
    release: options.release !== false,
    ...(options.pages === true ? { cgi: true } : {}),
    ...(options.extroot === undefined ? {} : { extroot: options.extroot })
  })

/**
 * A test file's hook world with the node's hook installed by the hook tool (its top level calls this
 * once, `made` keeping the world): made before its cases; its watchers, then the world, ended after them.
 */
export const installedHookWorld = (options: Parameters<typeof makeHookWorld>[0], made: (world: HookWorld) => void): void => {
  let world: HookWorld | undefined
  beforeAll(async () => {
    world = await makeHookWorld(options)
    made(world)
    const installed = await world.call(hook, { node: users.node.login, root: world.root })
    expect(installed.stopped).toEqual({ reason: "completed" })
  }, 120_000)
  afterAll(async () => {
    if (world !== undefined) endWatchers(world.root)
    await world?.close()
  })
}

/** A hook world whose node's hook is installed (the tools' answer, for the test to check), as a node runs on a served repository. */
export const makeHookedWorld = async (): Promise<{ readonly world: HookWorld; readonly installed: Answer<unknown> }> => {
  const world = await makeWorld({ prefix: "ocx2-hook-", checkin: { "hello.txt": "hello from trunk\n" }, fastHooks: true, node: true })
  return { world, installed: world.installed! }
}

/** Ends what a test left running under the world's root, then the world. */
export const closeHookWorld = async (world: HookWorld | undefined): Promise<void> => {
  await world?.close()
}

/**
 * A test file's hooked world (makeHookedWorld) with alice signed in at its web forms (its top level
 * calls this once, `made` keeping both and setting up the rest): made before its cases, ended after them.
 */
export const signedInHookedWorld = (made: (world: HookWorld, alice: WebSession) => void | Promise<void>): void => {
  let world: HookWorld | undefined
  beforeAll(async () => {
    const hooked = await makeHookedWorld()
    world = hooked.world
    expect(hooked.installed.stopped).toEqual({ reason: "completed" })
    await made(world, await webLogin(world.server.url, users.admin.login, users.admin.password))
  }, 120_000)
  afterAll(() => closeHookWorld(world))
}

/**
 * Runs that count their launches in `world()` (each appends a line to its workspace's `launched` as
 * its process starts), and who holds a run: its watcher, by the pid in its lock file.
 */
export const countingRuns = (world: () => HookWorld) => ({
  /** a node keeps one run per process user: runs meant to run at once have users of their own */
  counting: (script: string, user: string = users.builder.login) => shellRun(world(), `echo x >> $$workspace$$/launched; ${script}`, { user }),
  launched: (run: string): number => {
    try {
      return Fs.readFileSync(Path.join(world().root, "work", run, "launched"), "utf8").split("\n").filter((l) => l.length > 0).length
    } catch {
      return 0
    }
  },
  holder: (run: string): number => Number(Fs.readFileSync(Path.join(world().root, "care", `${run}.lock`), "utf8").trim())
})
