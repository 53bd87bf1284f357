import { describe, expect, it } from "vitest"
import * as Either from "effect/Either"
import { checkRunEnvelope, cwdOf, decodeRun, decodeRunMessage, encodeRun, type Run } from "../../src/protocol/Run.js"
import { buildBlock, buildRun, edited, sessionRun, SERVER_CODE } from "./fixtures.js"

const minimal = () => ({ clone: SERVER_CODE, objective: "x", process: { user: "bob", command: ["ls"] } })
const ok = (content: unknown): Run => {
  const result = decodeRun(content)
  if (Either.isLeft(result)) throw new Error(`${result.left.key}: ${result.left.message}`)
  return result.right
}
const refusedAt = (content: unknown) => {
  const result = decodeRun(content)
  expect(Either.isLeft(result)).toBe(true)
  return Either.isLeft(result) ? result.left : { key: "", message: "" }
}

describe("2.1 the run's keys", () => {
  it("defaults: workspace [], limits {}, no sandbox", () => {
    const run = ok(minimal())
    expect(run.workspace).toEqual([])
    expect(run.limits).toEqual({})
    expect(run.sandbox).toBeUndefined()
  })

  it.each(["clone", "objective", "process"])("%s is required", (key) => {
    expect(refusedAt(edited(minimal(), (r) => delete r[key]))).toEqual({ key, message: "missing" })
  })

  it.each([
    ["clone", "ABC", "clone"],
    ["clone", SERVER_CODE.toUpperCase(), "clone"],
    ["objective", "", "objective"],
    ["objective", 5, "objective"],
    ["workspace", {}, "workspace"],
    ["limits", [], "limits"],
    ["sandbox", "yes", "sandbox"]
  ])("%s = %j is refused naming %s", (key, value, named) => {
    expect(refusedAt(edited(minimal(), (r) => (r[key] = value))).key).toBe(named)
  })

  it("a key version 2 does not define is refused by name, anywhere", () => {
    expect(refusedAt({ ...minimal(), node: "n1" })).toEqual({ key: "node", message: "a key version 2 does not define" })
    expect(refusedAt(edited(minimal(), (r) => (r.process.nodes = 1))).key).toBe("process.nodes")
    expect(refusedAt(edited(buildRun(), (r) => (r.sandbox.secret = "x"))).key).toBe("sandbox.secret")
    expect(refusedAt(edited(buildRun(), (r) => (r.limits.disk = "1G"))).key).toBe("limits.disk")
    expect(refusedAt(edited(minimal(), (r) => (r.process.keep = { stderr: "1K", stdin: "1K" }))).key).toBe("process.keep.stdin")
    expect(refusedAt(edited(buildRun(), (r) => (r.process.unversioned_files[0].mode = 1))).key).toBe(
      "process.unversioned_files[0].mode"
    )
    expect(refusedAt(edited(buildRun(), (r) => r.sandbox.created_files.push({ at: "/x", text: "", mode: 1 }))).key).toBe(
      "sandbox.created_files[0].mode"
    )
  })

  it("content that is not an object is refused naming run", () => {
    expect(refusedAt(null)).toEqual({ key: "run", message: "expected an object" })
    expect(refusedAt([1])).toEqual({ key: "run", message: "expected an object" })
  })
})

describe("2.8 sandbox: every key required", () => {
  const keys = Object.keys(buildRun().sandbox)
  it.each(keys)("sandbox.%s is required", (key) => {
    expect(refusedAt(edited(buildRun(), (r) => delete r.sandbox[key]))).toEqual({ key: `sandbox.${key}`, message: "missing" })
  })

  it.each([
    ["uid", -1], ["uid", 1.5], ["gid", "1000"],
    ["linux_capabilities", ["CAP_NOPE"]], ["linux_capabilities", ["cap_net_raw"]], ["linux_capabilities", "CAP_NET_RAW"],
    ["network", "false"], ["isolate_terminal", 1], ["ends_with_parent", null],
    ["proc", "proc"], ["dev", 5], ["tmp", ""],
    ["read_only", ["usr"]], ["read_write", ["$$run$$/x"]], ["homes", "/root/.claude"],
    ["created_files", [{ at: "/etc/x" }]], ["created_files", [{ at: "etc/x", text: "" }]]
  ])("sandbox.%s = %j has the wrong type or form", (key, value) => {
    expect(refusedAt(edited(buildRun(), (r) => (r.sandbox[key] = value))).key.startsWith(`sandbox.${key}`)).toBe(true)
  })

  it("takes linux capabilities by name, and paths starting with a path placeholder", () => {
    const run = ok(edited(buildRun(), (r) => {
      r.sandbox.linux_capabilities = ["CAP_NET_RAW", "CAP_SYS_PTRACE"]
      r.sandbox.read_only = ["$$root$$/shared", "$$release$$", "$$tree$$/lib"]
      r.sandbox.created_files = [{ at: "/etc/hostname", text: "box\n" }]
    }))
    expect(run.sandbox?.linux_capabilities).toEqual(["CAP_NET_RAW", "CAP_SYS_PTRACE"])
  })
})

describe("2.9 limits: each optional", () => {
  it("takes each alone, and none", () => {
    for (const [key, value] of [["wall", "2h"], ["cpu", 60], ["processes", 10], ["file_size", "1G"], ["memory", "512M"]] as const) {
      expect(ok({ ...minimal(), limits: { [key]: value } }).limits).toEqual({ [key]: value })
    }
  })
  it.each([
    ["wall", "2"], ["wall", 7200], ["cpu", "60"], ["cpu", 1.5], ["processes", -1], ["file_size", "1g"], ["memory", 1024]
  ])("limits.%s = %j is refused naming it", (key, value) => {
    expect(refusedAt({ ...minimal(), limits: { [key]: value } }).key).toBe(`limits.${key}`)
  })
})

describe("2.10 process: defaults and forms", () => {
  it("applies every default of the table", () => {
    const run = ok(minimal())
    expect(run.process).toEqual({
      user: "bob",
      command: ["ls"],
      env: {},
      manual: false,
      session: false,
      hears: [],
      checkins: [],
      deliveries: "feed",
      terminal: false,
      keep: { stderr: "64K", stdout: "64K", stdout_when: "failure" },
      verdict: false,
      unversioned_files: []
    })
  })

  it("keep: each part optional on its own", () => {
    expect(ok(edited(minimal(), (r) => (r.process.keep = { stdout_when: "always" }))).process.keep).toEqual({
      stderr: "64K",
      stdout: "64K",
      stdout_when: "always"
    })
    expect(ok(edited(minimal(), (r) => (r.process.keep = { stderr: "1M" }))).process.keep.stderr).toBe("1M")
  })

  it("cwd: $$workspace$$ with a workspace, / without", () => {
    expect(cwdOf(ok(minimal()))).toBe("/")
    expect(cwdOf(ok(buildRun()))).toBe("$$workspace$$")
    expect(cwdOf(ok(sessionRun()))).toBe("$$tree$$")
  })

  it("user and command are required", () => {
    expect(refusedAt(edited(minimal(), (r) => delete r.process.user))).toEqual({ key: "process.user", message: "missing" })
    expect(refusedAt(edited(minimal(), (r) => delete r.process.command))).toEqual({ key: "process.command", message: "missing" })
  })

  it.each([
    ["user", "a b"], ["user", ""], ["user", "*"], ["command", []], ["command", [""]], ["command", "ls"], ["command", ["ls", 1]],
    ["env", { "A=B": "x" }], ["env", { A: 1 }], ["env", []], ["cwd", "tmp"], ["manual", "true"], ["session", 1],
    ["hears", ["*", "bob"]], ["hears", "*"], ["hears", ["a b"]], ["checkins", "trunk"], ["checkins", ["a\nb"]],
    ["deliveries", "each"], ["terminal", "no"], ["keep", { stderr: "1k" }], ["keep", { stdout_when: "never" }],
    ["verdict", 0], ["unversioned_files", [{ at: "$$workspace$$/x" }]], ["unversioned_files", [{ at: "x", as: "y" }]],
    ["unversioned_files", [{ at: "/x", as: "/abs" }]], ["unversioned_files", [{ at: "/x", as: "a/../b" }]]
  ])("process.%s = %j has the wrong type or form", (key, value) => {
    expect(refusedAt(edited(minimal(), (r) => (r.process[key] = value))).key.startsWith(`process.${key}`)).toBe(true)
  })

  it("hears: logins, or [\"*\"] for every user", () => {
    expect(ok(edited(minimal(), (r) => (r.process.hears = ["*"]))).process.hears).toEqual(["*"])
    expect(ok(edited(minimal(), (r) => (r.process.hears = ["carol", "dave"]))).process.hears).toEqual(["carol", "dave"])
  })

  it("a session asks no verdict (refusal 2 names process.verdict)", () => {
    expect(refusedAt(edited(buildRun(), (r) => (r.process.session = true)))).toEqual({
      key: "process.verdict",
      message: "a session asks no verdict"
    })
  })

  it("a session whose deliveries is start names no unversioned_files", () => {
    expect(
      refusedAt(edited(sessionRun(), (r) => (r.process.unversioned_files = [{ at: "$$workspace$$/x", as: "x" }]))).key
    ).toBe("process.unversioned_files")
  })
})

describe("step keys: types are refusal 2, kinds and key sets are refusal 3 (Steps)", () => {
  it("names a step key of the wrong type", () => {
    expect(refusedAt(edited(buildRun(), (r) => (r.workspace[1].into = 5)))).toEqual({
      key: "workspace[1].into",
      message: "expected a path (text)"
    })
    expect(refusedAt(edited(buildRun(), (r) => (r.workspace[0].step = 3))).key).toBe("workspace[0].step")
    expect(refusedAt(edited(buildRun(), (r) => (r.workspace[1] = "files"))).key).toBe("workspace[1]")
    expect(refusedAt(edited(buildRun(), (r) => r.workspace.push({ step: "collect", of: "a", into: "$$workspace$$" }))).key)
      .toBe("workspace[2].of")
  })
  it("leaves unknown kinds and extra keys to refusal 3", () => {
    expect(Either.isRight(decodeRun(edited(buildRun(), (r) => r.workspace.push({ step: "teleport" }))))).toBe(true)
    expect(Either.isRight(decodeRun(edited(buildRun(), (r) => (r.workspace[0].mode = "0700"))))).toBe(true)
  })
})

describe("the run's envelope", () => {
  it("requires to, a login", () => {
    expect(checkRunEnvelope({ ocx: 2, run: {} })).toEqual(Either.left({ key: "to", message: "missing" }))
    expect(checkRunEnvelope({ ocx: 2, to: 5, run: {} })).toEqual(Either.left({ key: "to", message: "5 is not a login" }))
    expect(checkRunEnvelope({ ocx: 2, to: "lab-2", run: {} })).toEqual(Either.right("lab-2"))
  })
  it("refuses version 1's node by name", () => {
    expect(checkRunEnvelope({ ocx: 2, to: "lab-2", node: "n", run: {} })).toEqual(
      Either.left({ key: "node", message: "a key version 2 does not define" })
    )
  })
  it("decodes envelope then content", () => {
    const decoded = decodeRunMessage(buildBlock())
    expect(Either.isRight(decoded) && decoded.right.to).toBe("lab-2")
  })
})

describe("round trip", () => {
  it.each([["build", buildRun], ["session", sessionRun], ["minimal", minimal]])("the %s run encodes and decodes to itself", (_, make) => {
    const run = ok(make())
    expect(ok(JSON.parse(JSON.stringify(encodeRun(run))))).toEqual(run)
  })
})
