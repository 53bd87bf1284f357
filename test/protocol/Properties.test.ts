// Property tests over generated and mutated runs: valid runs pass and round-trip, every
// mutation is refused with a note naming what is wrong, and no input throws.
import { describe, expect, it } from "vitest"
import * as fc from "fast-check"
import * as Either from "effect/Either"
import { holdsMessage, readMessage, writeMessage } from "../../src/protocol/Envelope.js"
import { checkRun } from "../../src/protocol/Refusals.js"
import { decodeRun, encodeRun } from "../../src/protocol/Run.js"
import { substitute } from "../../src/protocol/Placeholders.js"
import { checkInput, edited, SERVER_CODE } from "./fixtures.js"

// ---- valid runs ----------------------------------------------------------------------

const plainText = fc.string({ maxLength: 12 }).filter((s) => !s.includes("$$"))
const name = fc.stringMatching(/^[a-z][a-z0-9_]{0,7}$/)
const sizeText = fc.tuple(fc.integer({ min: 1, max: 4096 }), fc.constantFrom("", "K", "M", "G")).map(([n, u]) => `${n}${u}`)
const durationText = fc.tuple(fc.integer({ min: 1, max: 500 }), fc.constantFrom("s", "m", "h", "d")).map(([n, u]) => `${n}${u}`)
const hex40 = fc.stringMatching(/^[0-9a-f]{40}$/)

const limitsArb = fc.record(
  { wall: durationText, cpu: fc.nat({ max: 100000 }), processes: fc.nat({ max: 4096 }), file_size: sizeText, memory: sizeText },
  { requiredKeys: [] }
)

const sandboxArb = fc.record({
  uid: fc.nat({ max: 65535 }),
  gid: fc.nat({ max: 65535 }),
  linux_capabilities: fc.subarray(["CAP_NET_RAW", "CAP_SYS_PTRACE", "CAP_CHOWN"]),
  network: fc.boolean(),
  isolate_terminal: fc.boolean(),
  ends_with_parent: fc.boolean(),
  proc: fc.constant("/proc"),
  dev: fc.constant("/dev"),
  tmp: fc.constantFrom("/tmp", "/var/tmp"),
  read_only: fc.subarray(["/usr", "/bin", "/etc/ssl", "$$release$$", "$$release$$/bin", "$$workspace$$", "/opt/$$run$$"]),
  read_write: fc.subarray(["$$workspace$$", "$$workspace$$/out", "/var/cache/builds"]),
  homes: fc.subarray(["/home/agent/.claude", "/home/agent/.config"]),
  created_files: fc.array(fc.record({ at: fc.constantFrom("/etc/motd", "/etc/hostname"), text: plainText }), { maxLength: 2 })
})

/** steps after the directory: what they are and whether they set $$checkin$$ */
const stepsArb = fc.record({
  files: fc.boolean(),
  session: fc.boolean(),
  collect: fc.array(name, { maxLength: 3 })
})

const runArb = fc
  .tuple(
    hex40,
    fc.string({ minLength: 1, maxLength: 30 }).filter((s) => s.trim().length > 0),
    stepsArb,
    fc.option(sandboxArb, { nil: undefined }),
    limitsArb,
    fc.record({
      user: fc.constantFrom("builder", "agent", "worker.7"),
      program: fc.constantFrom("make", "/usr/bin/agent", "$$tree$$/run.sh"),
      args: fc.array(plainText, { maxLength: 3 }),
      env: fc.dictionary(fc.stringMatching(/^[A-Z][A-Z0-9_]{0,6}$/), plainText, { maxKeys: 3 }),
      manual: fc.boolean(),
      terminal: fc.boolean(),
      keep: fc.record({ stderr: sizeText, stdout: sizeText, stdout_when: fc.constantFrom("failure", "always") }, { requiredKeys: [] }),
      hears: fc.oneof(fc.constant(["*"]), fc.array(fc.constantFrom("carol", "dave"), { maxLength: 2 })),
      checkins: fc.array(fc.constantFrom("trunk", "release"), { maxLength: 2 }),
      deliveries: fc.constantFrom("feed", "start"),
      cwd: fc.constantFrom(undefined, "$$workspace$$", "$$tree$$", "/"),
      verdict: fc.boolean(),
      publish: fc.boolean()
    })
  )
  .map(([clone, objective, steps, sandbox, limits, p]) => {
    const workspace: Array<Record<string, unknown>> = [
      { step: "directory", at: "$$root$$/$$process_user$$/projects/$$repository_name$$/$$run$$" }
    ]
    if (steps.files) workspace.push({ step: "files", of: "trunk", into: "$$workspace$$/tree" })
    else {
      workspace.push(
        { step: "password" },
        { step: "clone", into: "$$workspace$$/clone", password: "$$password$$" },
        { step: "checkout", of: "trunk", into: "$$workspace$$/tree" }
      )
    }
    if (steps.collect.length > 0) workspace.push({ step: "collect", of: steps.collect, into: "$$workspace$$/in" })
    const process: Record<string, unknown> = {
      user: p.user,
      command: [p.program, ...p.args],
      env: p.env,
      manual: p.manual,
      terminal: p.terminal,
      keep: p.keep
    }
    if (p.cwd !== undefined) process["cwd"] = p.cwd
    if (steps.session) Object.assign(process, { session: true, hears: p.hears, checkins: p.checkins, deliveries: p.deliveries })
    else process["verdict"] = p.verdict
    if (p.publish && !(steps.session && p.deliveries === "start")) {
      process["unversioned_files"] = [{ at: "$$tree$$/out.img", as: "builds/$$run$$.img" }]
    }
    const run: Record<string, unknown> = { clone, objective, workspace, limits, process }
    if (sandbox !== undefined) run["sandbox"] = sandbox
    return run
  })

const blockOf = (run: unknown): Record<string, unknown> => ({ ocx: 2, to: "lab-2", run })
const unconfinedHost = { ...checkInput({}).host, unconfined: true }
const check = (block: Record<string, unknown>) => checkRun(checkInput(block, { host: unconfinedHost }))
const noteOf = (block: Record<string, unknown>) => {
  const result = check(block)
  return Either.isLeft(result) ? result.left.note : undefined
}

describe("valid runs", () => {
  it("decode, pass every check, and round-trip (encode then decode = same)", () => {
    fc.assert(
      fc.property(runArb, (content) => {
        const result = check(blockOf(content))
        if (Either.isLeft(result)) throw new Error(`refused: ${result.left.number} ${result.left.note}`)
        const decoded = result.right.run
        const again = decodeRun(JSON.parse(JSON.stringify(encodeRun(decoded))))
        if (Either.isLeft(again)) throw new Error(`did not decode again: ${again.left.key}`)
        expect(again.right).toStrictEqual(decoded)
        const text = writeMessage(blockOf(encodeRun(decoded)))
        const message = readMessage(text)
        expect(message._tag === "Message" && message.kind).toBe("run")
      }),
      { numRuns: 2000 }
    )
  }, 120_000)
})

// ---- mutations -----------------------------------------------------------------------

/** a mutation: how it edits a valid run, and what its note must name */
interface Mutation {
  readonly label: string
  readonly edit: (run: any) => void
  readonly names: ReadonlyArray<string>
}

const sandboxKeys = ["uid", "gid", "linux_capabilities", "network", "isolate_terminal", "ends_with_parent", "proc", "dev", "tmp", "read_only", "read_write", "homes", "created_files"]

const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  // drop a required key
  fc.constantFrom("clone", "objective", "process").map((key) => ({ label: `drop ${key}`, edit: (r: any) => delete r[key], names: [key] })),
  fc.constantFrom("user", "command").map((key) => ({ label: `drop process.${key}`, edit: (r: any) => delete r.process[key], names: [`process.${key}`] })),
  fc.constantFrom(...sandboxKeys).map((key) => ({
    label: `drop sandbox.${key}`,
    edit: (r: any) => { r.sandbox ??= fc.sample(sandboxArb, 1)[0]; delete r.sandbox[key] },
    names: [`sandbox.${key}`]
  })),
  // a wrong type
  fc.tuple(
    fc.constantFrom<[string, (r: any, v: unknown) => void, string]>(
      ["clone", (r, v) => (r.clone = v), "clone"],
      ["process.manual", (r, v) => (r.process.manual = v), "process.manual"],
      ["process.terminal", (r, v) => (r.process.terminal = v), "process.terminal"],
      ["process.env", (r, v) => (r.process.env = { X: v }), "process.env.X"],
      ["process.keep.stdout", (r, v) => (r.process.keep = { stdout: v }), "process.keep.stdout"],
      ["limits.cpu", (r, v) => (r.limits.cpu = v), "limits.cpu"],
      ["limits.processes", (r, v) => (r.limits.processes = v), "limits.processes"],
      ["workspace[0].at", (r, v) => (r.workspace[0].at = v), "workspace[0].at"]
    ),
    fc.oneof(fc.constant(null), fc.boolean().map((b) => [b]), fc.double({ min: 0.1, max: 10, noInteger: true }), fc.constant({ a: 1 }))
  ).map(([[label, set, key], value]) => ({ label: `wrong type ${label}`, edit: (r: any) => set(r, value), names: [key] })),
  // an unknown key, somewhere
  fc.tuple(
    fc.stringMatching(/^[a-z][a-z_]{1,10}$/).filter((k) => !["clone", "objective", "workspace", "sandbox", "limits", "process", "user", "command", "env", "cwd", "manual", "session", "hears", "checkins", "deliveries", "terminal", "keep", "verdict", "unversioned_files", "wall", "cpu", "processes", "file_size", "memory", "stderr", "stdout", "stdout_when", ...sandboxKeys, "step", "at", "of", "into", "password", "ocx", "to", "re", "run"].includes(k)),
    fc.constantFrom("", "process.", "limits.", "process.keep.", "envelope")
  ).map(([key, where]) => ({
    label: `unknown key ${where}${key}`,
    edit: (r: any) => {
      if (where === "") r[key] = 1
      else if (where === "process.") r.process[key] = 1
      else if (where === "limits.") r.limits[key] = "1G"
      else if (where === "process.keep.") r.process.keep = { ...r.process.keep, [key]: "1K" }
      else r.__envelope = key
    },
    names: [where === "envelope" ? key : `${where}${key}`]
  })),
  // a bad size or duration
  fc.oneof(
    fc.tuple(fc.constantFrom("file_size", "memory"), fc.constantFrom("1.5K", "1k", "-1", " 1K", "1KB", "01M", "2 G", "1T", "", "1H")),
    fc.tuple(fc.constant("wall"), fc.constantFrom("1", "1H", "1.5h", "90", "-1s", "1 s", "01s", "", "1w"))
  ).map(([key, value]) => ({ label: `bad limits.${key} ${JSON.stringify(value)}`, edit: (r: any) => (r.limits[key] = value), names: [`limits.${key}`] })),
  // a bad step
  fc.constantFrom<Mutation>(
    { label: "unknown step kind", edit: (r) => r.workspace.push({ step: "mount", at: "/x" }), names: ["workspace[", "mount"] },
    { label: "extra step key", edit: (r) => (r.workspace[0].mode = "0700"), names: ["workspace[0]", "mode"] },
    { label: "missing step key", edit: (r) => delete r.workspace[0].at, names: ["workspace[0]", "at"] },
    { label: "needs unmet", edit: (r) => r.workspace.unshift({ step: "files", of: "trunk", into: "$$workspace$$/t" }), names: ["workspace[0]", "$$workspace$$"] },
    { label: "checkout without clone", edit: (r) => r.workspace.splice(1, 0, { step: "checkout", of: "trunk", into: "$$workspace$$/t" }), names: ["workspace[1]", "$$clone$$"] }
  ),
  // a placeholder used before it is set, or unknown
  fc.constantFrom<Mutation>(
    { label: "tree in the directory", edit: (r) => (r.workspace[0].at = "$$root$$/$$tree$$/$$run$$"), names: ["workspace[0].at", "$$tree$$"] },
    { label: "unknown in command", edit: (r) => (r.process.command[0] = "$$bogus$$"), names: ["process.command[0]", "$$bogus$$"] },
    { label: "unknown in env", edit: (r) => (r.process.env = { ...r.process.env, ZZ: "$$Tree$$" }), names: ["process.env.ZZ", "$$Tree$$"] }
  ),
  // refusals 4 and 7
  fc.constantFrom<Mutation>(
    { label: "process user is the to", edit: (r) => (r.process.user = "lab-2"), names: ["process.user", "lab-2"] },
    { label: "write OCX's care", edit: (r) => { r.sandbox ??= fc.sample(sandboxArb, 1)[0]; r.sandbox.read_write.push("$$root$$/care") }, names: ["sandbox.read_write[", "$$root$$/care"] },
    { label: "directory outside ROOT", edit: (r) => (r.workspace[0].at = "/tmp/$$run$$"), names: ["workspace[0].at", "ROOT"] }
  )
)

describe("mutated runs", () => {
  it("are refused with a note naming what is wrong", () => {
    fc.assert(
      fc.property(runArb, mutationArb, (content, mutation) => {
        const run = edited(content, mutation.edit) as Record<string, unknown>
        const block = blockOf(run)
        if ("__envelope" in run) {
          block[run["__envelope"] as string] = 1
          delete run["__envelope"]
        }
        const note = noteOf(block)
        if (note === undefined) throw new Error(`${mutation.label}: passed`)
        for (const n of mutation.names) {
          if (!note.includes(n)) throw new Error(`${mutation.label}: note "${note}" does not name ${n}`)
        }
      }),
      { numRuns: 5000 }
    )
  }, 120_000)
})

// ---- nothing throws ------------------------------------------------------------------

describe("arbitrary input", () => {
  it("never makes the readers or checks throw", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (run, to) => {
        decodeRun(run)
        checkRun(checkInput({ ocx: 2, to, run }))
        checkRun(checkInput({ ocx: 2, to: "lab-2", run }, { host: unconfinedHost }))
        const text = "```json\n" + JSON.stringify({ ocx: 2, to, run }) + "\n```"
        readMessage(text)
        holdsMessage(text)
      }),
      { numRuns: 2000 }
    )
  }, 120_000)

  it("texts of any shape never make readMessage, holdsMessage or substitute throw", () => {
    const line = fc.oneof(fc.string(), fc.constantFrom("```json", "```", "````", "~~~", "   ```JSON", `{"ocx": 2, "re": "${"a".repeat(40)}", "stop": {}}`, `{"ocx": 2`))
    fc.assert(
      fc.property(fc.array(line, { maxLength: 8 }), (lines) => {
        const text = lines.join("\n")
        const m = readMessage(text)
        expect(["NoMessage", "Malformed", "Message"]).toContain(m._tag)
        if (m._tag === "Message") expect(holdsMessage(text)).toBe(true)
        substitute(text, { root: "/r" })
      }),
      { numRuns: 2000 }
    )
  })

  it("a sampled valid run passes: mutations start from runs that pass", () => {
    const sample = fc.sample(runArb, 1)[0]!
    expect(noteOf(blockOf(edited(sample, (r) => (r.clone = SERVER_CODE))))).toBeUndefined()
  })
})
