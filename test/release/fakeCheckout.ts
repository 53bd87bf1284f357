import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import { runTool } from "../../src/tools/RunTool.js"
import type { Answer, Tool, ToolContext } from "../../src/tools/Tool.js"

// A small git checkout shaped like ocx2's own: a gate and a build script, bundles in dist/,
// better-sqlite3 left external with its runtime dependencies (and an install-time one) in
// node_modules. Files in control/ (ignored by git) steer its scripts, so a test can make the
// gate wait or fail, or the build make a program that fails its smoke, without a commit.

const write = (file: string, text: string) => {
  Fs.mkdirSync(Path.dirname(file), { recursive: true })
  Fs.writeFileSync(file, text)
}

const gateScript = `
import { existsSync, readFileSync } from "node:fs"
console.log("gate: first check passed")
if (existsSync("control/gate-waits")) {
  const until = Date.now() + 20000
  while (!existsSync("control/gate-go")) {
    if (Date.now() > until) { console.log("gate: never told to go on"); process.exit(3) }
    await new Promise((r) => setTimeout(r, 50))
  }
}
if (existsSync("control/gate-fails")) { console.error("gate: second check FAILED"); process.exit(1) }
console.log("gate: all checks passed")
`

const listAnswer = JSON.stringify({ tool: "list", operations: [], output: { tools: [] }, stopped: { reason: "completed" } })

const buildScript = `
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs"
rmSync("dist", { recursive: true, force: true })
mkdirSync("dist")
const banner = "#!/usr/bin/env node\\nimport { createRequire } from 'node:module'; const require = createRequire(import.meta.url);\\n"
const answer = existsSync("control/bad-smoke") ? ${JSON.stringify(JSON.stringify({ tool: "echo", operations: [], stopped: { reason: "completed" } }))} : ${JSON.stringify(listAnswer)}
writeFileSync("dist/ocx2.mjs", banner +
  "const sqlite = require('better-sqlite3');\\n" +
  "if (process.argv.slice(2).join(' ') !== '--json list') { console.error('usage: ocx2 --json list'); process.exit(2) }\\n" +
  "if (sqlite.addon !== 'better_sqlite3.node' || sqlite.uri !== '/x') process.exit(4)\\n" +
  "console.log(" + JSON.stringify(answer) + ")\\n")
if (!existsSync("control/no-hook")) writeFileSync("dist/ocx2-hook.mjs", banner + "console.log('hook of ' + import.meta.url)\\n")
console.log("build: bundled")
`

/** Makes the fake checkout in a fresh directory and commits it; returns its path. */
export const makeFakeCheckout = (parent: string): string => {
  const dir = Path.join(parent, "checkout")
  write(Path.join(dir, "package.json"), JSON.stringify({
    name: "fake-ocx2",
    type: "module",
    private: true,
    scripts: { gate: "node gate.mjs", build: "node build.mjs --external:better-sqlite3" }
  }, null, 2))
  write(Path.join(dir, "gate.mjs"), gateScript)
  write(Path.join(dir, "build.mjs"), buildScript)
  write(Path.join(dir, ".gitignore"), "node_modules/\ndist/\ncontrol/\n")
  const modules = Path.join(dir, "node_modules")
  write(Path.join(modules, "better-sqlite3", "package.json"), JSON.stringify({
    name: "better-sqlite3",
    main: "lib/index.js",
    dependencies: { bindings: "^1.5.0", "prebuild-install": "^7.1.1" },
    scripts: { install: "prebuild-install || node-gyp rebuild --release" }
  }))
  write(Path.join(modules, "better-sqlite3", "binding.gyp"), "{}\n")
  write(Path.join(modules, "better-sqlite3", "lib", "index.js"), "module.exports = require('bindings')('better_sqlite3.node')\n")
  write(Path.join(modules, "better-sqlite3", "build", "Release", "better_sqlite3.node"), "not really an addon\n")
  write(Path.join(modules, "better-sqlite3", "build", "Release", "obj.target", "better_sqlite3.node"), "an intermediate\n")
  write(Path.join(modules, "better-sqlite3", "build", "Release", "sqlite3.a"), "an archive\n")
  write(Path.join(modules, "better-sqlite3", "deps", "sqlite3.c"), "/* sources */\n")
  write(Path.join(modules, "better-sqlite3", "src", "addon.cpp"), "// sources\n")
  write(Path.join(modules, "bindings", "package.json"), JSON.stringify({ name: "bindings", main: "bindings.js", dependencies: { "file-uri-to-path": "1.0.0" } }))
  write(Path.join(modules, "bindings", "bindings.js"), "module.exports = (addon) => ({ addon, uri: require('file-uri-to-path')('file:///x') })\n")
  write(Path.join(modules, "file-uri-to-path", "package.json"), JSON.stringify({ name: "file-uri-to-path", main: "index.js" }))
  write(Path.join(modules, "file-uri-to-path", "index.js"), "module.exports = (uri) => new URL(uri).pathname\n")
  write(Path.join(modules, "prebuild-install", "package.json"), JSON.stringify({ name: "prebuild-install", main: "index.js" }))
  write(Path.join(modules, "prebuild-install", "index.js"), "module.exports = {}\n")
  git(dir, "init", "-q", "-b", "trunk")
  git(dir, "add", "-A")
  commit(dir, "the fake checkout")
  return dir
}

export const git = (dir: string, ...args: Array<string>): string =>
  execFileSync("git", ["-c", "user.name=tester", "-c", "user.email=tester@example.invalid", ...args], { cwd: dir, encoding: "utf8" })

/** A new (empty) commit; returns its release name. */
export const commit = (dir: string, message: string): string => {
  git(dir, "commit", "-q", "--allow-empty", "-m", message)
  return headName(dir)
}

export const headName = (dir: string): string => git(dir, "rev-parse", "HEAD").trim().slice(0, 12)

/** Sets or clears a control file of the fake checkout. */
export const control = (dir: string, name: string, on: boolean) => {
  const file = Path.join(dir, "control", name)
  if (on) write(file, "")
  else Fs.rmSync(file, { force: true })
}

export const tempDir = (prefix: string) => Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))

export const setup: ToolContext = {
  caller: { user: "maintainer", capabilities: "s", sandboxed: false },
  dryRun: false,
  repository: undefined
}

export const call = <I, IE, O, OE>(tool: Tool<I, IE, O, OE>, input: unknown, context: Partial<ToolContext> = {}): Promise<Answer<O>> =>
  Effect.runPromise(runTool(tool, input, { ...setup, ...context }))

/** Everything under a directory: each entry's kind, a link's target, a file's size and time. */
export const listing = (root: string): Record<string, string> => {
  const entries: Record<string, string> = {}
  const visit = (dir: string) => {
    for (const name of Fs.readdirSync(dir).sort()) {
      const path = Path.join(dir, name)
      const stat = Fs.lstatSync(path)
      const key = Path.relative(root, path)
      if (stat.isSymbolicLink()) entries[key] = `link ${Fs.readlinkSync(path)}`
      else if (stat.isDirectory()) {
        entries[key] = `dir ${stat.mtimeMs}`
        visit(path)
      } else entries[key] = `file ${stat.size} ${stat.mtimeMs} ${stat.mode.toString(8)}`
    }
  }
  visit(root)
  return entries
}

/** What a link in the root says, or undefined. */
export const linkOf = (root: string, name: string): string | undefined => {
  try {
    return Fs.readlinkSync(Path.join(root, name))
  } catch {
    return undefined
  }
}

/** The operations of an answer without whether they were done: a dry run's must equal the real call's. */
export const planOf = (answer: Answer<unknown>) => answer.operations.map(({ detail, op }) => ({ op, detail }))
