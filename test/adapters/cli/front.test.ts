import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { PassThrough } from "node:stream"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { frontDoor } from "../../../src/adapters/cli/Front.js"
import { lookOf, plainLook, rootHelp, toolHelp } from "../../../src/adapters/cli/Help.js"
import { readJsonArgument } from "../../../src/adapters/cli/JsonArgument.js"
import { repositoryFileProblem } from "../../../src/adapters/cli/Caller.js"
import { usage } from "../../../src/tools/Fields.js"
import { tools } from "../../../src/tools/Registry.js"
import { offeredBy } from "../../../src/tools/Tool.js"
import { makeTempDir } from "../../support/fossilServer.js"

// The command line's front door, in-process: where ocx2's own options may stand, what help
// looks like, and the errors it gives. test/adapters/cli/program.test.ts runs the bundled program itself.

const cliTools = offeredBy("cli", tools)
const front = (...args: Array<string>) => frontDoor(args, cliTools)
const run = (...args: Array<string>) => {
  const result = front(...args)
  if (result._tag !== "Run") throw new Error(`expected a run, got ${JSON.stringify(result)}`)
  return result.args
}
const usageError = (...args: Array<string>) => {
  const result = front(...args)
  if (result._tag !== "Usage") throw new Error(`expected a usage error, got ${JSON.stringify(result)}`)
  return result.message
}

const dir = makeTempDir("ocx2-cli-front-")
afterAll(() => Fs.rmSync(dir, { recursive: true, force: true }))

describe("ocx2's own options after the tool's name (seed 001)", () => {
  it("takes a global the tool has no option of, with its value, before the tool's name", () => {
    expect(run("node", "--repository", "lab.fossil", "https://s/r", "pw.json", "--check"))
      .toEqual(["--repository", "lab.fossil", "node", "--check=true", "https://s/r", "pw.json"])
    expect(run("node", "https://s/r", "--repository=lab.fossil", "pw.json")).toEqual(["--repository", "lab.fossil", "node", "https://s/r", "pw.json"])
    expect(run("status", "--json")).toEqual(["--json", "status"])
    expect(run("create", "--json", "--title", "x")).toEqual(["--json", "create", "--title", "x"])
  })

  it("leaves an option of the tool's own where it is: create's --user is the run's process user", () => {
    expect(run("--user", "alice", "create", "--user", "builder", "--title", "x"))
      .toEqual(["--user", "alice", "create", "--user", "builder", "--title", "x"])
  })

  it("never moves a value of the tool's own option, and nothing after --", () => {
    expect(run("echo", "hi", "--option", "--json")).toEqual(["echo", "--option", "--json", "hi"])
    expect(run("echo", "hi", "--option=--repository")).toEqual(["echo", "--option", "--repository", "hi"])
    expect(run("echo", "--", "--json")).toEqual(["echo", "--", "--json"])
    expect(run("post", "abc", "--", "--user")).toEqual(["post", "--", "abc", "--user"])
  })

  it("takes a global given both before and after once; two different values are an error", () => {
    expect(run("--json", "status", "--json")).toEqual(["--json", "status"])
    expect(usageError("--user", "a", "status", "--user", "b")).toMatch(/--user is given twice, as 'a' and as 'b'/)
  })

  it("a global's missing value is named", () => {
    expect(usageError("status", "--repository")).toMatch(/--repository needs a value: --repository FILE/)
  })
})

describe("usage errors name the option and the options there are", () => {
  it("an unknown global before the tool's name is no 'Invalid subcommand'", () => {
    const message = usageError("--jsn", "list")
    expect(message).toContain("unknown option --jsn")
    expect(message).toContain("did you mean --json?")
    expect(message).toContain("--json, --repository FILE, --user USER, --mcp, --help, --version")
  })

  it("a tool's option before its name says where it goes", () => {
    expect(usageError("--title", "x", "create")).toContain("--title is an option of create, and goes after the tool's name")
  })

  it("an unknown option after the tool's name lists the tool's options and ocx2's", () => {
    const message = usageError("echo", "hi", "--opton", "x")
    expect(message).toContain("echo: unknown option --opton (did you mean --option?)")
    expect(message).toContain("echo's options are --option OPTION, --flag, --dry-run, --help")
    expect(message).toContain("ocx2's own are --json, --repository, --user, --mcp")
  })

  it("missing and extra arguments, a missing value", () => {
    expect(usageError("echo")).toBe("echo needs WORD (the word to echo); usage: ocx2 echo WORD [--option OPTION] [--flag] [--dry-run]")
    expect(usageError("echo", "a", "b")).toContain("echo takes one argument (WORD), and was also given 'b'")
    expect(usageError("echo", "a", "--option")).toContain("echo: --option needs a value: --option OPTION")
    // whether a value is one the tool takes is the tool's to say, the same from every entry point
    expect(run("audit", "abc", "maybe", "note", "x")).toEqual(["audit", "abc", "maybe", "note", "x"])
    expect(usageError("echo", "a", "--flag=maybe")).toContain("--flag takes no value")
    expect(usageError("frobnicate")).toContain(`no tool named "frobnicate"; the tools are ${cliTools.map((t) => t.name).join(", ")}`)
  })

  it("help wins over an error, and `ocx2 help` alone is ocx2's own help", () => {
    expect(front("--help")).toEqual({ _tag: "Help", tool: undefined, json: false })
    expect(front("-h", "create")).toEqual({ _tag: "Help", tool: "create", json: false })
    expect(front("create", "--bogus", "--help")).toEqual({ _tag: "Help", tool: "create", json: false })
    expect(front("help")).toEqual({ _tag: "Help", tool: undefined, json: false })
    expect(front("--json", "echo", "-h")).toEqual({ _tag: "Help", tool: "echo", json: true })
    expect(run("help", "echo")).toEqual(["help", "echo"])
  })
})

describe("help, rendered from the tool definitions", () => {
  const noAnsi = (text: string) => expect(text).not.toMatch(/\x1b\[/)
  const narrow = (text: string) => {
    for (const line of text.split("\n")) expect(line.length, line).toBeLessThanOrEqual(100)
  }

  it("ocx2's own: its options with their descriptions, the tools, and the exit status", () => {
    const text = rootHelp(cliTools, "0.1.0", plainLook)
    noAnsi(text)
    narrow(text)
    expect(text).toContain("--json")
    expect(text).toContain("print the answer as JSON")
    expect(text).toMatch(/^ {2}0 +done \(a dry run too\)$/m)
    expect(text).toMatch(/^ {2}1 +refused or failed /m)
    expect(text).toMatch(/^ {2}2 +bad usage: /m)
    expect([...text.matchAll(/^ {2}- (\S+)/gm)].map((m) => m[1])).toEqual(cliTools.map((t) => t.name))
  })

  it("each tool's: every option with its own description, never @effect/cli's words", () => {
    for (const tool of cliTools) {
      const text = toolHelp({ name: tool.name, summary: tool.summary, description: tool.description, usage: usage(tool) }, tool, plainLook)
      noAnsi(text)
      narrow(text)
      expect(text).not.toContain("A user-defined piece of text")
      expect(text).toContain("--dry-run")
    }
    const create = cliTools.find((t) => t.name === "create")!
    const text = toolHelp({ name: "create", summary: create.summary, description: create.description, usage: usage(create) }, create, plainLook)
    expect(text).toMatch(/--title TITLE +write the run as the first post of a new thread with this title/)
    expect(text.replace(/\s+/g, " ")).toContain("(a JSON object; @FILE reads it from FILE, and - from standard input)")
  })

  it("colour only on a terminal without NO_COLOR, at most 100 columns", () => {
    expect(lookOf({ isTTY: false }, {})).toEqual({ width: 100, colour: false })
    expect(lookOf({ isTTY: true, columns: 80 }, {})).toEqual({ width: 80, colour: true })
    expect(lookOf({ isTTY: true, columns: 300 }, { NO_COLOR: "1" })).toEqual({ width: 100, colour: false })
    expect(rootHelp(cliTools, "0.1.0", { width: 100, colour: true })).toMatch(/\x1b\[1mTools:/)
  })
})

describe("the files the command line reads", () => {
  const read = (text: string, stdin?: NodeJS.ReadableStream) =>
    readJsonArgument(text, { option: "--fields", field: "fields", object: true, ...(stdin !== undefined ? { stdin } : {}) })

  it.effect("--fields @FILE and - read the JSON object from the file and from standard input", () =>
    Effect.gen(function*() {
      const file = Path.join(dir, "fields.json")
      Fs.writeFileSync(file, '{"process": {"session": true}}')
      expect(yield* read(`@${file}`)).toEqual(Either.right({ process: { session: true } }))
      const stdin = new PassThrough()
      stdin.end('{"objective": "from stdin"}')
      expect(yield* read("-", stdin)).toEqual(Either.right({ objective: "from stdin" }))
      expect(yield* read('{"a": 1}')).toEqual(Either.right({ a: 1 }))
    }))

  it.effect("a file that is missing, not JSON, or no object is an error naming it", () =>
    Effect.gen(function*() {
      const missing = Path.join(dir, "missing.json")
      expect(yield* read(`@${missing}`)).toEqual(Either.left(`--fields @${missing}: no file ${missing}`))
      const bad = Path.join(dir, "bad.json")
      Fs.writeFileSync(bad, "{bad")
      expect(yield* read(`@${bad}`)).toEqual(Either.left(`--fields @${bad}: ${bad} is not JSON at line 1, column 2 (position 1): Expected property name or '}'`))
      // written inline, as every entry point says it (issue 40: where it stops parsing)
      expect(yield* read('{"a": 1,}')).toEqual(Either.left("bad argument: fields: not JSON at line 1, column 9 (position 8): Expected double-quoted property name"))
      expect(yield* read('{"a":\n  tru}')).toEqual(Either.left(`bad argument: fields: not JSON at line 2, column 6 (position 11): Unexpected token '}', "{"a":\n  tru}" is not valid JSON`))
      const array = Path.join(dir, "array.json")
      Fs.writeFileSync(array, "[1, 2]")
      expect(yield* read(`@${array}`)).toEqual(Either.left(`--fields @${array}: ${array} holds an array, not a JSON object`))
      expect(Either.isLeft(yield* read(`@${dir}`))).toBe(true)
      const stdin = new PassThrough()
      stdin.end("42")
      expect(yield* read("-", stdin)).toEqual(Either.left("--fields -: standard input holds a number, not a JSON object"))
    }))

  it("a --repository file that is missing, a directory, or unreadable is named", () => {
    expect(repositoryFileProblem("/nonexistent.fossil")).toBe("no repository file /nonexistent.fossil")
    expect(repositoryFileProblem(dir)).toBe(`the repository file ${dir} is a directory, not a repository`)
    const file = Path.join(dir, "r.fossil")
    Fs.writeFileSync(file, "")
    expect(repositoryFileProblem(file)).toBeUndefined()
  })
})
