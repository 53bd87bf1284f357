/**
 * The house's floors, checked on every import of src/, layers/, services/ and bin/
 * (docs/architecture.md, "Layout"): layers are assembled at the edge (bin/ and the composition
 * modules under layers/), never in the middle of src/; nothing under src/ reads from test/; and
 * no folder imports from one above it. An import that breaks a rule fails here, with its file
 * and line; the few old ones not yet moved are named below, each with why, and the list may only
 * shrink: an entry that no longer matches an import fails too, so it is taken out.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"

const repo = Path.resolve(import.meta.dirname, "..", "..")
const scanned = ["src", "layers", "services", "bin"]

interface Import {
  /** the importing file, relative to the checkout */
  readonly from: string
  readonly line: number
  /** the imported file, relative to the checkout (relative imports only) */
  readonly to: string
}

const sourceFiles = (dir: string): Array<string> =>
  Fs.readdirSync(Path.join(repo, dir), { withFileTypes: true }).flatMap((entry) => {
    const relative = Path.posix.join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(relative)
    return /\.(ts|mts|mjs|js)$/.test(entry.name) && !entry.name.endsWith(".d.ts") ? [relative] : []
  })

// static imports and re-exports (`import ... from "x"`, `export ... from "x"`, `import "x"`) and
// dynamic ones (`import("x")`), wherever they stand: every module specifier that is a relative path
const specifier = /(?:\bfrom\s*|\bimport\s*\(?\s*)["'](\.{1,2}\/[^"']+)["']/g

const importsOf = (file: string): Array<Import> => {
  const text = Fs.readFileSync(Path.join(repo, file), "utf8")
  const found: Array<Import> = []
  text.split("\n").forEach((line, index) => {
    for (const match of line.matchAll(specifier)) {
      const to = Path.posix.normalize(Path.posix.join(Path.posix.dirname(file), match[1]!))
      found.push({ from: file, line: index + 1, to })
    }
  })
  return found
}

const allImports = scanned.flatMap(sourceFiles).flatMap(importsOf)

const under = (path: string, folder: string) => path === folder || path.startsWith(`${folder}/`)

/**
 * The modules of src/ that may provide layers. A layer assembly (the served host, a clone's host,
 * the watcher's, the release root) is a module under layers/, provided by bin/; runTool provides a
 * tool call's (a handler names ToolServices in its type), so that every entry point, and every
 * test, runs a tool with nothing more to give.
 */
const compositionModules: ReadonlyArray<string> = ["src/tools/RunTool.ts"]

/** Pairs of folders where the first must not import from the second: the second is higher. */
const upward: ReadonlyArray<readonly [string, string]> = [
  ["src/node", "src/tools"],
  ["src/release", "src/tools"],
  ["src/watcher", "src/tools"],
  ["src/watcher", "src/node"],
  ["src/operations", "src/tools"],
  ["src/operations", "src/node"],
  ["src/operations", "src/release"],
  ["src/operations", "src/watcher"],
  ["src/care", "src/node"],
  ["src/care", "src/watcher"],
  ["src/care", "src/tools"],
  ["src/root", "src/node"],
  ["src/root", "src/watcher"],
  ["src/root", "src/tools"],
  ["src/root", "src/adapters"],
  ["src/root", "src/pickup"],
  ["src/care", "src/pickup"],
  ["src/pickup", "src/node"],
  ["src/pickup", "src/watcher"],
  ["src/pickup", "src/tools"],
  ["src/pickup", "src/adapters"],
  ["layers", "src/node"],
  ["layers", "src/watcher"],
  ["layers", "src/tools"],
  ["layers", "src/adapters"],
  ["services", "layers"],
  ["services", "src/tools"],
  ["services", "src/node"],
  ["services", "src/watcher"],
  ["services", "src/adapters"],
]

/** What is wrong with one import, or nothing. */
const breach = (i: Import): string | undefined => {
  if (under(i.from, "src") && under(i.to, "test")) return "src/ imports from test/"
  if (under(i.from, "src") && under(i.to, "layers") && !compositionModules.includes(i.from)) {
    return "src/ assembles layers: a layer assembly belongs in a composition module under layers/, provided by bin/"
  }
  for (const [low, high] of upward) {
    if (under(i.from, low) && under(i.to, high)) return `${low} imports from ${high}, a floor above it`
  }
  return undefined
}

/**
 * Imports that break a rule today and are not moved yet: "importing file -> imported file".
 * Each entry names why it stays; the list only shrinks.
 */
const allowed: ReadonlyArray<string> = [
]

const key = (i: Import) => `${i.from} -> ${i.to}`

describe("the house's floors", () => {
  it("finds the imports it checks", () => {
    // a scanner that found nothing would pass every rule
    expect(allImports.length).toBeGreaterThan(500)
    expect(allImports.some((i) => i.from === "bin/ocx2-watcher.ts")).toBe(true)
  })

  it("no import breaks a rule, beyond the named old ones", () => {
    const breaches = allImports.flatMap((i) => {
      const why = breach(i)
      return why !== undefined && !allowed.includes(key(i)) ? [`${i.from}:${i.line} imports ${i.to}: ${why}`] : []
    })
    expect(breaches).toEqual([])
  })

  it("every named old one still exists and still breaks a rule (the list shrinks)", () => {
    const stale = allowed.filter((entry) => !allImports.some((i) => key(i) === entry && breach(i) !== undefined))
    expect(stale).toEqual([])
  })
})
