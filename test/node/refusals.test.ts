import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import { create } from "../../src/tools/create.js"
import { fossil, webNewThread, type WebSession } from "../support/fossilServer.js"
import { sandbox, shellRun, users } from "../support/nodeWorld.js"
import { signedInHookedWorld, type HookWorld } from "./hookWorld.js"

// Refusals 5, 6 and 7 on a served repository whose hook is installed from a release root, as a
// node runs: what the node answers a run posted through the web form, and what create answers
// the same run. Create checks as the node the run names would (seed 001, "Write a run"), on the
// ROOT the hook was installed with, by the same code: it refuses, writing nothing, exactly the
// runs the node would end refused, with the same note. Refusal 7 reads the seed as written
// (DECISIONS 14): of ROOT, a run binds only its own workspace and what lies within it.

let world: HookWorld
let alice: WebSession
let root: string
signedInHookedWorld((made, signedIn) => {
  world = made
  alice = signedIn
  root = Fs.realpathSync(world.root)
})

const post = (run: object, title = "a run") => webNewThread(world.server, alice, { title, text: world.runText(run) })

/** the run's one reply, an ended refused from the node user; its note */
const refusedNote = async (run: string): Promise<string> => {
  const replies = await world.waitEnded(run, 90_000)
  expect(replies.map((m) => [m.kind, m.sender])).toEqual([["ended", users.node.login]])
  const content = replies[0]!.content as { outcome: string; note: string }
  expect(content.outcome).toBe("refused")
  return content.note
}

/** the seed's layout (2.19): a workspace per run under ROOT's per-user directory */
const seedLayout = (script: string, overrides: object = {}) =>
  shellRun(world, script, {}, {
    workspace: [
      { step: "directory", at: "$$root$$/$$process_user$$/projects/$$repository_name$$/$$run$$" },
      { step: "files", of: "trunk", into: "$$workspace$$/tree" }
    ],
    ...overrides
  })

const withSandbox = (run: ReturnType<typeof shellRun>, change: (sb: ReturnType<typeof sandbox>) => object) => ({
  ...run,
  sandbox: change(sandbox())
})

const rootNote = () =>
  `lies within ROOT (${root}), which holds OCX's programs and every run's workspace: of it a run binds only its own $$workspace$$ and what lies within it`

/** what the served repository holds: every artifact's hash */
const artifacts = async () => (await fossil(["sql", "-R", world.repository, "SELECT count(*), max(rid) FROM blob"])).trim()

describe("create refuses, writing nothing, each run the node would refuse, with the node's note", () => {
  it("refusals 5, 6 and 7: the same runs through create and as posts the hook answers, the notes identical", async () => {
    // a host whose sandbox cannot provide memory: the node's kept measure of what it provides
    // (ROOT/node/capabilities.json, read by the node and, through the same code, by create)
    const measured = Path.join(world.root, "node", "capabilities.json")
    Fs.writeFileSync(measured, JSON.stringify({
      sandbox: true, wall: true, cpu: true, file_size: true, processes: true, memory: false,
      notes: ["memory: no cgroup memory controller this node can use"]
    }))
    const missing = Path.join(world.dir, "no-such-directory")
    const base = shellRun(world, "true")
    const { sandbox: _none, ...unconfined } = base
    const runs: ReadonlyArray<readonly [string, object, RegExp]> = [
      ["no sandbox, and no ROOT/settings/unconfined", unconfined, /^refusal 5: no sandbox/],
      ["a limit the host cannot provide", { ...base, limits: { wall: "2m", memory: "64M" } }, /^refusal 6: limits\.memory: /],
      ["the host's /proc", withSandbox(base, (sb) => ({ ...sb, read_only: [...sb.read_only, "/proc/sys"] })), /^refusal 7: .*\/proc\/sys/],
      ["a host path that does not exist", withSandbox(base, (sb) => ({ ...sb, read_only: [...sb.read_only, missing] })), /^refusal 7: .*does not exist/],
      ["the workspace's parent", withSandbox(base, (sb) => ({ ...sb, read_write: [...sb.read_write, "$$workspace$$/.."] })), /^refusal 7: .*lies within ROOT/],
      ["ROOT's per-user directory", withSandbox(base, (sb) => ({ ...sb, read_only: [...sb.read_only, "$$root$$/builder"] })), /^refusal 7: .*lies within ROOT/]
    ]

    const prefix = "a node would refuse this run as written: "
    const byCreate: Array<string> = []
    for (const [what, run] of runs) {
      const before = await artifacts()
      const { clone: _clone, objective, ...fields } = run as { clone: string; objective: string }
      const answer = await world.call(create, { title: what, node: users.node.login, objective, fields })
      expect(answer.stopped.reason, `${what}: ${JSON.stringify(answer.stopped)}`).toBe("refused")
      expect(answer.stopped.message).toMatch(new RegExp(`^${prefix}`))
      expect(await artifacts(), `${what}: the repository is unchanged`).toBe(before)
      byCreate.push(answer.stopped.message!.slice(prefix.length))
    }

    // one after another: Fossil makes its forum tables with the first post, and two at once race
    const posted: Array<string> = []
    for (const [what, run] of runs) posted.push(await post(run, what))
    const byNode = await Promise.all(posted.map(refusedNote))
    runs.forEach(([what, , expected], i) => {
      expect(byNode[i], what).toMatch(expected)
      expect(byCreate[i], what).toBe(byNode[i])
    })
    Fs.rmSync(measured, { force: true })
  }, 120_000)
})

describe("refusal 7 end to end: of ROOT, a run binds only its own workspace", () => {
  it("the workspace's parent, ROOT's per-user directory, another run's workspace: each ended refused, naming the path; $$workspace$$/sub runs", async () => {
    // an earlier run of the same process user, finished: its workspace is kept (2.15)
    const earlier = await post(seedLayout("echo made > $$workspace$$/made"), "earlier")
    const earlierReplies = await world.waitEnded(earlier, 90_000)
    expect(earlierReplies.find((m) => m.kind === "ended")?.content).toEqual({ outcome: "exited", exit: 0 })
    const perUser = Path.join(root, users.builder.login)
    const earlierWorkspace = Path.join(perUser, "projects", "served", earlier)
    expect(Fs.readFileSync(Path.join(earlierWorkspace, "made"), "utf8")).toBe("made\n")

    const cases: ReadonlyArray<readonly [object, string]> = [
      [
        withSandbox(shellRun(world, "true"), (sb) => ({ ...sb, read_write: [...sb.read_write, "$$workspace$$/.."] })),
        `refusal 7: sandbox.read_write[1]: $$workspace$$/.. (${root}/work) ${rootNote()}`
      ],
      [
        { ...seedLayout("true"), sandbox: { ...sandbox(), read_write: ["$$workspace$$", "$$workspace$$/../../.."] } },
        `refusal 7: sandbox.read_write[1]: $$workspace$$/../../.. (${perUser}) ${rootNote()}`
      ],
      [
        { ...seedLayout("true"), sandbox: { ...sandbox(), read_only: ["/usr", earlierWorkspace] } },
        `refusal 7: sandbox.read_only[1]: ${earlierWorkspace} (${earlierWorkspace}) ${rootNote()}`
      ],
      [
        withSandbox(shellRun(world, "true"), (sb) => ({ ...sb, homes: [perUser] })),
        `refusal 7: sandbox.homes[0]: ${perUser} (${perUser}) ${rootNote()}`
      ],
      [
        withSandbox(shellRun(world, "true"), (sb) => ({ ...sb, read_only: [...sb.read_only, "$$workspace$$/.."] })),
        `refusal 7: sandbox.read_only[5]: $$workspace$$/.. (${root}/work) ${rootNote()}`
      ]
    ]
    const runs: Array<string> = []
    for (const [i, [run]] of cases.entries()) runs.push(await post(run, `refused ${i}`))
    const notes = await Promise.all(runs.map(refusedNote))
    expect(notes).toEqual(cases.map(([, note]) => note))

    // what lies within its own workspace, named as such, is bound
    const own = await post(shellRun(world, "test -f $$workspace$$/sub/hello.txt && echo seen > $$workspace$$/sub/seen", {}, {
      workspace: [
        { step: "directory", at: "$$root$$/work/$$run$$" },
        { step: "files", of: "trunk", into: "$$workspace$$/sub" }
      ],
      sandbox: sandbox({ read_write: ["$$workspace$$/sub"] })
    }), "its own sub-directory")
    const replies = await world.waitEnded(own, 90_000)
    expect(replies.find((m) => m.kind === "ended")?.content).toEqual({ outcome: "exited", exit: 0 })
    expect(Fs.readFileSync(Path.join(root, "work", own, "sub", "seen"), "utf8")).toBe("seen\n")
  }, 180_000)
})
