// The workspace steps (2.7) on the Checkouts test layer, no Fossil: what each step asks of Fossil
// (which repository file, which check-in, which URL), what it leaves on disk and in the values it
// sets, and each failure's refusal 8 in its words. End to end against the real fossil: the node's
// tests (test/node: seedExamples, clone, refusals) and test/watcher/checkinName.test.ts.
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { Checkouts } from "../../services/Checkouts.js"
import * as TestCheckouts from "../../layers/TestCheckouts.js"
import * as TestRepository from "../../layers/TestRepository.js"
import type { NodeConfig } from "../../src/root/NodeConfig.js"
import { checkRun, type CheckedRun } from "../../src/protocol/Refusals.js"
import { performSteps } from "../../src/watcher/Workspace.js"
import { buildBlock, checkInput, edited, host, RUN_HASH, sessionBlock, setup } from "../protocol/fixtures.js"

const trunk = "a1".repeat(32)
const other = "a1b2".repeat(16)
const SERVER = "http://127.0.0.1:8080/lab"

let dirs: Array<string> = []
afterEach(() => {
  for (const dir of dirs) Fs.rmSync(dir, { recursive: true, force: true })
  dirs = []
})

/** A node's ROOT in a temporary directory, its repository file beside it. */
const node = (): NodeConfig => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-steps-"))
  dirs.push(dir)
  const root = Path.join(dir, "root")
  Fs.mkdirSync(root)
  return { root, repository: Path.join(dir, "lab.fossil"), nodeUser: "lab-2", serverUrl: SERVER, passwordsFile: undefined }
}

const checked = (config: NodeConfig, block: Record<string, unknown>, sender = checkInput(block).sender): CheckedRun => {
  const result = checkRun(checkInput(block, { sender, host: { ...host, root: config.root, ownPaths: [], resolve: (p) => p } }))
  if (Either.isLeft(result)) throw new Error(`the run is refused: ${result.left.note}`)
  return result.right
}

const steps = (
  config: NodeConfig,
  run: CheckedRun,
  checkouts: TestCheckouts.TestCheckouts,
  role: "served" | "clone" = "served"
) =>
  performSteps(run, { config, role, owner: undefined, fileSizeLimit: undefined }).pipe(
    Effect.either,
    Effect.provide(Layer.merge(Layer.succeed(Checkouts, checkouts), TestRepository.layer()))
  )

const noteOf = <A>(result: Either.Either<A, { readonly number: number; readonly note: string }>) =>
  Either.isLeft(result) ? `${result.left.number}: ${result.left.note}` : "performed"

describe("a files step", () => {
  it.effect("exports the check-in its name resolves to in the node's repository into its directory", () =>
    Effect.gen(function*() {
      const config = node()
      const checkouts = TestCheckouts.make({
        repositories: { [config.repository]: [{ hash: trunk, names: ["trunk"], files: { "build.sh": "make\n", "src/main.c": "int main;\n" } }] }
      })
      const result = yield* steps(config, checked(config, buildBlock()), checkouts)
      const workspace = Path.join(config.root, "builder", "projects", "lab", RUN_HASH)
      expect(result).toEqual(Either.right(expect.objectContaining({ workspace, tree: `${workspace}/tree`, checkin: trunk })))
      expect(Fs.readFileSync(Path.join(workspace, "tree", "src", "main.c"), "utf8")).toBe("int main;\n")
      expect(checkouts.calls).toEqual([
        { op: "resolveCheckin", repository: config.repository, name: "trunk" },
        { op: "exportFiles", repository: config.repository, checkin: trunk, into: `${workspace}/tree` }
      ])
    }))

  it.effect("is refused 8 when its name names no check-in, or more than one, or Fossil fails", () =>
    Effect.gen(function*() {
      const config = node()
      const run = checked(config, buildBlock())
      const none = TestCheckouts.make({ repositories: { [config.repository]: [{ hash: other, names: ["release"], files: {} }] } })
      expect(noteOf(yield* steps(config, run, none))).toBe(`8: workspace[1] (files) failed: "trunk" names no check-in`)
      expect(none.calls.map((c) => c.op)).toEqual(["resolveCheckin"])

      const two = TestCheckouts.make({
        repositories: { [config.repository]: [{ hash: trunk, names: ["trunk"], files: {} }, { hash: other, names: ["trunk"], files: {} }] }
      })
      expect(noteOf(yield* steps(config, run, two))).toBe(`8: workspace[1] (files) failed: "trunk" names more than one check-in: give more digits`)

      const unreadable = TestCheckouts.make({ fails: { resolveCheckin: "database disk image is malformed" } })
      expect(noteOf(yield* steps(config, run, unreadable)))
        .toBe(`8: workspace[1] (files) failed: no check-in named "trunk": database disk image is malformed`)

      const noTarball = TestCheckouts.make({
        repositories: { [config.repository]: [{ hash: trunk, names: ["trunk"], files: {} }] },
        fails: { exportFiles: "out of disk" }
      })
      expect(noteOf(yield* steps(config, run, noTarball))).toBe("8: workspace[1] (files) failed: cannot export trunk: out of disk")
    }))
})

describe("a session's password, clone and checkout steps", () => {
  it.effect("set the process user's password in the node's repository, clone the server with it, and open its trunk", () =>
    Effect.gen(function*() {
      const config = node()
      const checkouts = TestCheckouts.make({
        repositories: { [config.repository]: [{ hash: trunk, names: ["trunk"], files: { "README": "hello\n" } }] },
        servers: { [SERVER]: config.repository }
      })
      const run = checked(config, sessionBlock(), setup)
      const result = yield* steps(config, run, checkouts)
      const workspace = Path.join(config.root, "agent", "projects", "lab", RUN_HASH)
      const password = checkouts.passwords.get(`${config.repository} agent`)
      expect(password).toMatch(/^[A-Za-z0-9_-]{24}$/)
      expect(result).toEqual(Either.right(expect.objectContaining({
        workspace, password, clone: `${workspace}/clone`, tree: `${workspace}/tree`, checkin: trunk
      })))
      expect(checkouts.calls).toEqual([
        { op: "setPassword", repository: config.repository, user: "agent", password },
        { op: "clone", url: `http://agent:${password}@127.0.0.1:8080/lab`, into: `${workspace}/clone` },
        { op: "resolveCheckin", repository: `${workspace}/clone`, name: "trunk" },
        { op: "open", repository: `${workspace}/clone`, checkin: trunk, into: `${workspace}/tree` }
      ])
      expect(Fs.readFileSync(Path.join(workspace, "tree", "README"), "utf8")).toBe("hello\n")
    }))

  it.effect("a password is set only on the served repository's host; each step's failure is refused 8 in its words", () =>
    Effect.gen(function*() {
      const config = node()
      const run = checked(config, sessionBlock(), setup)
      const fromClone = TestCheckouts.make()
      expect(noteOf(yield* steps(config, run, fromClone, "clone"))).toBe(
        "8: workspace[1] (password) failed: only the served repository's host can set a password; this node works from a clone"
      )
      expect(fromClone.calls).toEqual([])

      const refused = TestCheckouts.make({ fails: { setPassword: "no such user: agent" } })
      expect(noteOf(yield* steps(config, run, refused))).toBe("8: workspace[1] (password) failed: cannot set agent's password: no such user: agent")

      const down = TestCheckouts.make({ fails: { clone: "server did not reply" } })
      expect(noteOf(yield* steps(config, run, down))).toBe("8: workspace[2] (clone) failed: cannot clone as agent: server did not reply")

      const unopened = TestCheckouts.make({
        repositories: { [config.repository]: [{ hash: trunk, names: ["trunk"], files: {} }] },
        servers: { [SERVER]: config.repository },
        fails: { open: "cannot open the check-out" }
      })
      expect(noteOf(yield* steps(config, run, unopened))).toBe("8: workspace[3] (checkout) failed: cannot check out trunk: cannot open the check-out")

      const noServer = edited(config, (c) => {
        c.serverUrl = undefined
      })
      expect(noteOf(yield* steps(noServer, run, TestCheckouts.make()))).toBe("8: workspace[2] (clone) failed: this node has no server URL to clone from")
    }))
})
