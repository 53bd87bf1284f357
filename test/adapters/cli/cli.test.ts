import { execFile } from "node:child_process"
import { join } from "node:path"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"
import { tools } from "../../../src/tools/Registry.js"

// The bundled program, as a person runs it (npm test builds dist/ first).
const program = join(import.meta.dirname, "../../../dist/ocx2.mjs")
const run = async (...args: Array<string>) => {
  try {
    const { stdout, stderr } = await promisify(execFile)("node", [program, ...args])
    return { code: 0, stdout, stderr }
  } catch (error: any) {
    return { code: error.code as number, stdout: error.stdout as string, stderr: error.stderr as string }
  }
}
const plain = (text: string) => text.replace(/\x1b\[[0-9;]*m/g, "")

describe("the ocx2 command", () => {
  it("--help shows exactly the tools that exist", async () => {
    const { code, stdout } = await run("--help")
    expect(code).toBe(0)
    const listed = [...plain(stdout).matchAll(/^\s+- (\S+)/gm)].map((m) => m[1])
    expect(listed).toEqual(tools.map((t) => t.name))
    expect(plain(stdout)).toContain("--json")
    expect(plain(stdout)).toContain("--repository")
    expect(plain(stdout)).toContain("--user")
  })

  it("list names every tool with its usage, as text and as JSON", async () => {
    const text = await run("list")
    expect(text.code).toBe(0)
    for (const tool of tools) expect(text.stdout).toContain(`ocx2 ${tool.name}`)
    const json = await run("--json", "list")
    const answer = JSON.parse(json.stdout)
    expect(answer.tool).toBe("list")
    expect(answer.stopped).toEqual({ reason: "completed" })
    expect(answer.output.tools.map((t: any) => t.name)).toEqual(tools.map((t) => t.name))
  })

  it("ocx2 alone lists the tools", async () => {
    const { code, stdout } = await run()
    expect(code).toBe(0)
    expect(stdout).toContain("ocx2 echo WORD")
  })

  it("help TOOL describes the tool's arguments; an unknown tool is refused with the names", async () => {
    const help = await run("help", "echo")
    expect(help.code).toBe(0)
    expect(help.stdout).toContain("ocx2 echo WORD [--option OPTION] [--flag] [--dry-run]")
    expect(help.stdout).toContain("the word to echo")
    const unknown = await run("help", "frobnicate")
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toContain(`no tool named "frobnicate"; the tools are ${tools.map((t) => t.name).join(", ")}`)
  })

  it("echo answers its input; global options go before the tool's name", async () => {
    const { code, stdout } = await run("--json", "echo", "hello", "--option", "x", "--flag")
    expect(code).toBe(0)
    expect(JSON.parse(stdout)).toEqual({
      tool: "echo",
      operations: [],
      output: { word: "hello", option: "x", flag: true },
      stopped: { reason: "completed" }
    })
  })

  it("--dry-run is on every tool and says it stopped as a dry run", async () => {
    const helps = await Promise.all(tools.map((tool) => run(tool.name, "--help")))
    for (const help of helps) expect(plain(help.stdout)).toContain("--dry-run")
    const { stdout } = await run("--json", "echo", "hello", "--dry-run")
    expect(JSON.parse(stdout).stopped).toEqual({ reason: "dry_run" })
  }, 90_000)

  it("a missing argument and an unknown tool are usage errors with a non-zero status", async () => {
    const missing = await run("echo")
    expect(missing.code).not.toBe(0)
    expect(plain(missing.stdout + missing.stderr)).toMatch(/word/)
    const unknown = await run("frobnicate")
    expect(unknown.code).not.toBe(0)
  })
})
