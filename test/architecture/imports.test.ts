/**
 * The house's floors, checked on every import of src/, layers/, services/ and bin/
 * (docs/architecture.md, "Layout"): layers are assembled at the edge (bin/ and the composition
 * modules under layers/), never in the middle of src/; nothing under src/ reads from test/ or
 * bin/ (but the one table of lazily loaded bundles); no folder imports from one above it;
 * src/protocol imports only effect; services/ imports nothing of src/ but src/protocol; the
 * tool-container server (src/containers) imports nothing of the node; and no file imports
 * itself through others (an import circle). An import that breaks a rule fails here, with its
 * file and line; the few old ones not yet moved are named below, each with why, and the list may
 * only shrink: an entry that no longer matches an import fails too, so it is taken out.
 *
 * Imports are read from each file's syntax tree (the `typescript` package's parser): static
 * imports and re-exports, `import type` among them, and dynamic `import()`. A circle is one of
 * static imports: a dynamic one is loaded later, not while the modules load.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import ts from "typescript"
import { describe, expect, it } from "vitest"

const repo = Path.resolve(import.meta.dirname, "..", "..")
const scanned = ["src", "layers", "services", "bin"]

interface Import {
  /** the importing file, relative to the checkout */
  readonly from: string
  readonly line: number
  /** the imported file, relative to the checkout (a relative specifier), or the package (a bare one) */
  readonly to: string
  readonly relative: boolean
  /** `import()`: loaded when called, not with the module */
  readonly dynamic: boolean
}

const sourceFiles = (dir: string): Array<string> =>
  Fs.readdirSync(Path.join(repo, dir), { withFileTypes: true }).flatMap((entry) => {
    const relative = Path.posix.join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(relative)
    return /\.(ts|mts|mjs|js)$/.test(entry.name) && !entry.name.endsWith(".d.ts") ? [relative] : []
  })

/** Every module specifier of a file: its imports and re-exports, `import type` and `import()` among them. */
const importsOf = (file: string): Array<Import> => {
  const tree = ts.createSourceFile(file, Fs.readFileSync(Path.join(repo, file), "utf8"), ts.ScriptTarget.Latest, true)
  const found: Array<Import> = []
  const add = (specifier: ts.Node | undefined, dynamic: boolean) => {
    if (specifier === undefined || !ts.isStringLiteralLike(specifier)) return
    const text = specifier.text
    const relative = text.startsWith("./") || text.startsWith("../")
    const named = relative ? Path.posix.normalize(Path.posix.join(Path.posix.dirname(file), text)) : text
    // a `.js` specifier names its `.ts` source
    const source = named.replace(/\.js$/, ".ts")
    const to = relative && named !== source && Fs.existsSync(Path.join(repo, source)) ? source : named
    found.push({ from: file, line: tree.getLineAndCharacterOfPosition(specifier.getStart(tree)).line + 1, to, relative, dynamic })
  }
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) add(node.moduleSpecifier, false)
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) add(node.arguments[0], true)
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node.argument.literal, false)
    ts.forEachChild(node, visit)
  }
  visit(tree)
  return found
}

const allImports = scanned.flatMap(sourceFiles).flatMap(importsOf)
const fileImports = allImports.filter((i) => i.relative)

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
  ["src/follow", "src/tools"],
  ["src/follow", "src/adapters"],
  ["src/follow", "src/node"],
  ["src/follow", "src/watcher"],
  ["src/follow", "src/pickup"],
  ["src/runs", "src/tools"],
  ["src/runs", "src/adapters"],
  ["src/runs", "src/node"],
  ["src/runs", "src/watcher"],
  ["src/runs", "src/pickup"],
]

/**
 * The lower parts of src/, which may use of src/release only the layout of ROOT (ReleasePaths.ts,
 * pure): the rest of src/release (staging, the release rule, which release serves a call) is a
 * floor above them.
 */
const lowerParts: ReadonlyArray<string> = [
  "src/protocol", "src/fossil", "src/sandbox", "src/runs", "src/follow", "src/operations", "src/care", "src/root", "src/pickup"
]
const releaseLayout = "src/release/ReleasePaths.ts"

/** What the tool-container server may import of src/: itself, the protocol's pure code, and the finder of a bundle beside the program. */
const containersMayImport = (to: string) => under(to, "src/containers") || under(to, "src/protocol") || to === "src/Siblings.ts"

/** The one module under src/ that names bin/'s entry points: the table of lazily loaded bundles, whose import()s no bundle keeps. */
const bundleTable = "src/Bundles.ts"

/** What is wrong with one import, or nothing. */
const breach = (i: Import): string | undefined => {
  if (!i.relative) {
    const effect = i.to === "effect" || i.to.startsWith("effect/")
    return under(i.from, "src/protocol") && !effect ? "src/protocol imports only effect: it is pure" : undefined
  }
  if (under(i.from, "src") && under(i.to, "test")) return "src/ imports from test/"
  if (under(i.from, "src") && under(i.to, "bin") && i.from !== bundleTable) {
    return `src/ imports from bin/: only ${bundleTable} names a program's entry (a lazily loaded bundle)`
  }
  if (under(i.from, "src/protocol") && !under(i.to, "src/protocol")) return "src/protocol imports only effect: it is pure"
  if (under(i.from, "services") && under(i.to, "src") && !under(i.to, "src/protocol")) {
    return "services/ imports nothing of src/ but src/protocol: what a service's contract needs is defined in its file"
  }
  if (under(i.from, "src/containers") && under(i.to, "src") && !containersMayImport(i.to)) {
    return "src/containers imports nothing of the node: the tool-container server stands on its own"
  }
  if (lowerParts.some((low) => under(i.from, low)) && under(i.to, "src/release") && i.to !== releaseLayout) {
    return `the lower parts of src/ use of src/release only ROOT's layout (${releaseLayout})`
  }
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


/**
 * The import circles: each set of two or more files that import each other, through others or not
 * (the strongly connected components of the static imports, by Tarjan's algorithm), its files sorted.
 */
const importCircles = (): Array<ReadonlyArray<string>> => {
  const files = new Set(scanned.flatMap(sourceFiles))
  const edges = new Map<string, Array<string>>([...files].map((file) => [file, []]))
  for (const i of fileImports) {
    if (!i.dynamic && files.has(i.to) && i.to !== i.from) edges.get(i.from)!.push(i.to)
  }
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const circles: Array<ReadonlyArray<string>> = []
  const connect = (file: string): void => {
    index.set(file, index.size)
    low.set(file, index.get(file)!)
    stack.push(file)
    onStack.add(file)
    for (const next of edges.get(file)!) {
      if (!index.has(next)) {
        connect(next)
        low.set(file, Math.min(low.get(file)!, low.get(next)!))
      } else if (onStack.has(next)) low.set(file, Math.min(low.get(file)!, index.get(next)!))
    }
    if (low.get(file) !== index.get(file)) return
    const component: Array<string> = []
    let member: string
    do {
      member = stack.pop()!
      onStack.delete(member)
      component.push(member)
    } while (member !== file)
    if (component.length > 1) circles.push(component.sort())
  }
  for (const file of files) if (!index.has(file)) connect(file)
  return circles
}

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

  it("no file imports itself through others (no import circle)", () => {
    expect(importCircles().map((circle) => circle.join(" -> "))).toEqual([])
  })

  it("every named old one still exists and still breaks a rule (the list shrinks)", () => {
    const stale = allowed.filter((entry) => !allImports.some((i) => key(i) === entry && breach(i) !== undefined))
    expect(stale).toEqual([])
  })
})
