import { describe, expect, it } from "vitest"
import * as Either from "effect/Either"
import {
  placeholderNames,
  placeholdersIn,
  startPlaceholders,
  stepPlaceholders,
  substitute,
  substituteKnown,
  type StartValues
} from "../../src/protocol/Placeholders.js"
import { decodeRun, type Run } from "../../src/protocol/Run.js"
import { stepKinds } from "../../src/protocol/StepKinds.js"
import { planRun, stepPlaceholdersIn } from "../../src/protocol/Steps.js"
import { buildRun, edited, RUN_HASH, sessionRun } from "./fixtures.js"

const start: StartValues = {
  root: "/srv/ocx",
  release: "/srv/ocx/current",
  run: RUN_HASH,
  process_user: "builder",
  repository_name: "lab",
  node_user: "lab-2"
}
const decode = (content: unknown): Run => Either.getOrThrow(decodeRun(content))
const planNote = (content: unknown) => {
  const result = planRun(decode(content), start)
  return Either.isLeft(result) ? result.left : "planned"
}
const WS = `/srv/ocx/builder/projects/lab/${RUN_HASH}`

describe("2.6 placeholders", () => {
  it("has the table's eleven names: six from the start, five by steps", () => {
    expect(startPlaceholders).toEqual(["root", "release", "run", "process_user", "repository_name", "node_user"])
    expect(stepPlaceholders).toEqual(["workspace", "tree", "checkin", "clone", "password"])
    expect(placeholderNames).toHaveLength(11)
  })

  it("substitutes in one pass: a value is never scanned again", () => {
    expect(substitute("$$root$$/$$run$$", { root: "/r", run: "$$root$$" })).toEqual(Either.right("/r/$$root$$"))
    expect(substitute("a$$$run$$b", { run: "X" })).toEqual(Either.right("a$Xb"))
    expect(substitute("echo $$ and $ $$", {})).toEqual(Either.right("echo $$ and $ $$"))
  })

  it("names the first placeholder without a value, unknown or unset", () => {
    expect(substitute("$$tree$$/x", { root: "/r" })).toEqual(Either.left("tree"))
    expect(substitute("$$Workspace$$", { workspace: "/w" })).toEqual(Either.left("Workspace"))
    expect(substitute("$$nope$$", {})).toEqual(Either.left("nope"))
  })

  it("substituteKnown leaves what it does not know", () => {
    expect(substituteKnown("$$root$$/$$checkin$$", { root: "/r" })).toBe("/r/$$checkin$$")
    expect(placeholdersIn("$$a$$ $$B_1$$ $$")).toEqual(["a", "B_1"])
    expect(stepPlaceholdersIn("$$root$$/$$tree$$/$$checkin$$")).toEqual(["tree", "checkin"])
  })
})

describe("2.7 the steps table", () => {
  it("has six kinds with their keys, needs and sets", () => {
    expect(stepKinds).toEqual({
      directory: { keys: { at: "path" }, needs: [], sets: ["workspace"] },
      files: { keys: { of: "text", into: "path" }, needs: ["workspace"], sets: ["tree", "checkin"] },
      password: { keys: {}, needs: [], sets: ["password"] },
      clone: { keys: { into: "path", password: "text" }, needs: ["workspace"], sets: ["clone"] },
      checkout: { keys: { of: "text", into: "path" }, needs: ["clone"], sets: ["tree", "checkin"] },
      collect: { keys: { of: "names", into: "path" }, needs: ["workspace"], sets: [] }
    })
  })
})

describe("planRun: refusal 3 notes", () => {
  it.each([
    [(r: any) => r.workspace.push({ step: "teleport" }), `workspace[2]: "teleport" is not a step kind version 2 has (directory, files, password, clone, checkout, collect)`],
    [(r: any) => r.workspace.push({ of: "x" }), "workspace[2]: a step without its kind (step)"],
    [(r: any) => delete r.workspace[1].of, "workspace[1] (files): missing key of"],
    [(r: any) => (r.workspace[0].mode = "0700"), "workspace[0] (directory): a key this step does not have: mode"],
    [(r: any) => r.workspace.push({ step: "password", length: 20 }), "workspace[2] (password): a key this step does not have: length"],
    [(r: any) => r.workspace.reverse(), "workspace[0] (files): needs $$workspace$$, which no step before it sets"],
    [(r: any) => r.workspace.push({ step: "checkout", of: "trunk", into: "$$workspace$$/t" }), "workspace[2] (checkout): needs $$clone$$, which no step before it sets"],
    [(r: any) => r.workspace.push({ step: "clone", into: "$$workspace$$/c", password: "$$password$$" }), "workspace[2].password: $$password$$ is not set by then"],
    [(r: any) => (r.workspace[0].at = "$$root$$/$$tree$$/$$run$$"), "workspace[0].at: $$tree$$ is not set by then"],
    [(r: any) => (r.workspace[1].into = "$$workspace$$/$$dir$$"), "workspace[1].into: $$dir$$ is not a placeholder version 2 has"],
    [(r: any) => (r.process.command[2] = "$$clone$$"), "process.command[2]: $$clone$$ is not set by then"],
    [(r: any) => (r.process.env.TOKEN = "$$password$$"), "process.env.TOKEN: $$password$$ is not set by then"],
    [(r: any) => (r.sandbox.read_write = ["$$workspace$$/$$Tree$$"]), "sandbox.read_write[0]: $$Tree$$ is not a placeholder version 2 has"],
    [(r: any) => (r.sandbox.created_files = [{ at: "/etc/motd", text: "run $$node$$" }]), "sandbox.created_files[0].text: $$node$$ is not a placeholder version 2 has"],
    [(r: any) => (r.process.unversioned_files[0].as = "b/$$checkout$$.img"), "process.unversioned_files[0].as: $$checkout$$ is not a placeholder version 2 has"],
    [(r: any) => r.workspace.pop(), "process.command[2]: $$tree$$ is not set by then"],
    [(r: any) => { r.workspace.pop(); r.process.command = ["make"] }, "process.verdict: no step sets $$checkin$$ (a files or checkout step)"],
    [(r: any) => { r.workspace = []; r.process.command = ["make"]; r.process.env = {}; r.sandbox.read_write = []; r.process.verdict = false; r.process.unversioned_files = [{ at: "/tmp/x", as: "x" }] }, "process.unversioned_files: the run has no workspace (no directory step)"],
    [(r: any) => { r.workspace = []; r.process.command = ["make"]; r.process.env = {}; r.sandbox.read_write = []; r.process.verdict = false; r.process.unversioned_files = []; r.sandbox.homes = ["/root/.claude"] }, "sandbox.homes: the run has no workspace (no directory step) to see them in"]
  ])("mutation %# is refused: %s", (edit, note) => {
    expect(planNote(edited(buildRun(), edit))).toBe(note)
  })

  it("a step's keys see only what steps before it set; sandbox and process see all", () => {
    expect(planNote(sessionRun())).toBe("planned")
    expect(planNote(buildRun())).toBe("planned")
  })

  it("placeholders in process.user, hears, checkins, deliveries and objective are taken literally", () => {
    const run = edited(buildRun(), (r) => {
      r.objective = "build $$nothing$$"
      r.process.checkins = ["$$tree$$"]
    })
    expect(planNote(run)).toBe("planned")
  })
})

describe("planRun: the plan", () => {
  it("substitutes what is known and keeps step values symbolic", () => {
    const plan = Either.getOrThrow(planRun(decode(buildRun()), start))
    expect(plan.steps.map((s) => [s.index, s.step, s.sets])).toEqual([[0, "directory", ["workspace"]], [1, "files", ["tree", "checkin"]]])
    expect(plan.steps[0]!.keys["at"]).toEqual({ text: WS, pending: [] })
    expect(plan.steps[1]!.keys["into"]).toEqual({ text: `${WS}/tree`, pending: [] })
    expect(plan.values.checkin).toEqual({ text: "$$checkin$$", pending: ["checkin"] })
    expect(plan.texts["process.command[2]"]).toEqual({ text: `${WS}/tree`, pending: [] })
    expect(plan.texts["process.env.HOME"]).toEqual({ text: WS, pending: [] })
    expect(plan.cwd).toEqual({ text: WS, pending: [] })
    expect(plan.hasWorkspace).toBe(true)
    expect(plan.paths.map((p) => [p.key, p.role])).toEqual([
      ["workspace[0].at", "directory"],
      ["workspace[1].into", "into"],
      ["sandbox.read_only[0]", "read_only"],
      ["sandbox.read_only[1]", "read_only"],
      ["sandbox.read_write[0]", "read_write"],
      ["process.cwd", "cwd"],
      ["process.unversioned_files[0].at", "unversioned_files"]
    ])
  })

  it("a later step replaces a value: two files steps, $$tree$$ is the second's", () => {
    const run = edited(buildRun(), (r) => r.workspace.push({ step: "files", of: "release", into: "$$workspace$$/second" }))
    const plan = Either.getOrThrow(planRun(decode(run), start))
    expect(plan.values.tree).toEqual({ text: `${WS}/second`, pending: [] })
  })

  it("records the pending step values a text uses", () => {
    const run = edited(buildRun(), (r) => (r.process.env.REV = "$$checkin$$@$$tree$$"))
    const plan = Either.getOrThrow(planRun(decode(run), start))
    expect(plan.texts["process.env.REV"]).toEqual({ text: `$$checkin$$@${WS}/tree`, pending: ["checkin"] })
  })

  it("with no workspace, cwd is /", () => {
    const run = { clone: "a".repeat(40), objective: "x", process: { user: "u", command: ["true"] } }
    expect(Either.getOrThrow(planRun(decode(run), start)).cwd).toEqual({ text: "/", pending: [] })
  })
})
