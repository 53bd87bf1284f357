/**
 * Every lazily loaded bundle (src/Bundles.ts, the one table of them) loads: from source, as the
 * tests and tsx run the programs (its module imported itself), and from dist/, as the built
 * programs run (the bundle beside the program, through the code cache as the CLI and the CGI load
 * theirs, and by import() as the hook, a plain ES module program, loads its round). Each gives
 * what its module exports. A loader whose path from source no longer held its module (the CLI's
 * folder moved and three of them failed with "Cannot find module") fails here. The dist/ half
 * needs the programs built (npm run build).
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { bundles } from "../../src/Bundles.js"
import { bundleProgram } from "../support/bundleProgram.js"

const repo = Path.resolve(import.meta.dirname, "..", "..")
const dist = Path.join(repo, "dist")
const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-bundles-"))
afterAll(() => Fs.rmSync(dir, { recursive: true, force: true }))

/** What a module exports, as "name:type" sorted: the same module loaded two ways gives the same. */
const exportsOf = (module: object): ReadonlyArray<string> =>
  Object.entries(module).filter(([name]) => name !== "default").map(([name, value]) => `${name}:${typeof value}`).sort()

// the table bundled as bin/build.mjs bundles a plain ES module program (OCX2_BUNDLED defined, so
// no loader keeps its module from source); it prints each bundle's exports as loaded beside the
// program it is given, either by import() alone (a cached bundle's loader, once imported, offers
// the code cache's way to the next load: taken away before each) or after a cached program's
// loader (dist/NAME.mjs) has run, which offers the code cache's way (globalThis.__ocx2RunCached)
// as the CLI has it
const tableProgram = `
import { bundles } from ${JSON.stringify(Path.join(repo, "src/Bundles.ts"))}
const [program, cachedLoader] = process.argv.slice(2)
if (cachedLoader !== undefined) await import(cachedLoader)
const loaded = {}
const ways = new Set()
for (const bundle of bundles) {
  if (cachedLoader === undefined) delete globalThis.__ocx2RunCached
  ways.add(typeof globalThis.__ocx2RunCached === "function" ? "code cache" : "import()")
  const module = await bundle.load(program)
  loaded[bundle.name] = Object.entries(module).filter(([name]) => name !== "default").map(([name, value]) => name + ":" + typeof value).sort()
}
process.stdout.write(JSON.stringify({ ways: [...ways], loaded }))
`

const runTable = (program: string, cachedLoader?: string): { ways: ReadonlyArray<string>; loaded: Record<string, ReadonlyArray<string>> } => {
  const out = ChildProcess.execFileSync(process.execPath, [Path.join(dir, "table.mjs"), program, ...(cachedLoader === undefined ? [] : [cachedLoader])], {
    cwd: dir,
    encoding: "utf8",
    timeout: 60_000
  })
  return JSON.parse(out) as { ways: ReadonlyArray<string>; loaded: Record<string, ReadonlyArray<string>> }
}

/** A bundle's exports as its module gives them from source: a program run from source (tsx, vitest) has no bundle beside it. */
const fromSource = async (bundle: (typeof bundles)[number]) => exportsOf(await bundle.load(Path.join(repo, "bin", "ocx2.ts")))

describe("the lazily loaded bundles", () => {
  beforeAll(async () => {
    Fs.writeFileSync(Path.join(dir, "table.ts"), tableProgram)
    await bundleProgram(Path.join(dir, "table.ts"), Path.join(dir, "table.mjs"), {
      bundled: true,
      external: ["better-sqlite3", "@lydell/node-pty"],
      logLevel: "error"
    })
  }, 60_000)

  it("the table names each bundle once, and nothing else loads one or names a bundle's module a second time", () => {
    const names = bundles.map((b) => b.name)
    expect(names.length).toBeGreaterThan(0)
    expect(new Set(names).size).toBe(names.length)
    const sources = (folder: string): Array<string> =>
      Fs.readdirSync(Path.join(repo, folder), { withFileTypes: true }).flatMap((entry) => {
        const relative = Path.posix.join(folder, entry.name)
        return entry.isDirectory() ? sources(relative) : entry.name.endsWith(".ts") ? [relative] : []
      })
    const elsewhere = ["src", "bin", "layers", "services"].flatMap(sources).flatMap((file) => {
      if (file === "src/Siblings.ts" || file === "src/Bundles.ts") return []
      const text = Fs.readFileSync(Path.join(repo, file), "utf8")
      // a loader of its own (loadSibling), or a module's type written beside a path the compiler does not check
      return /\bloadSibling\s*[<(]|typeof import\(/.test(text) ? [file] : []
    })
    expect(elsewhere).toEqual([])
  })

  it.each(bundles.map((b) => [b.name, b] as const))("%s loads from source", async (_name, bundle) => {
    const exported = await fromSource(bundle)
    expect(exported.length).toBeGreaterThan(0)
    expect(exported.every((e) => e.endsWith(":function"))).toBe(true)
  }, 60_000)

  it("each loads from dist/ by import(), as the hook loads its round, and gives what its module gives", async () => {
    const program = Path.join(dist, "ocx2-hook.mjs")
    if (!Fs.existsSync(program)) throw new Error(`${program} is missing: npm run build first`)
    const { ways, loaded } = runTable(program)
    expect(ways).toEqual(["import()"])
    expect(Object.keys(loaded).sort()).toEqual(bundles.map((b) => b.name).sort())
    for (const bundle of bundles) expect(loaded[bundle.name], bundle.name).toEqual(await fromSource(bundle))
  }, 90_000)

  it("each loads from dist/ through the code cache, as the CLI and the CGI load theirs, and gives what its module gives", async () => {
    const program = Path.join(dist, "ocx2.mjs")
    if (!Fs.existsSync(program)) throw new Error(`${program} is missing: npm run build first`)
    // the smallest cached program's loader: it offers the code cache's loading, as every cached program's does
    const { ways, loaded } = runTable(program, Path.join(dist, "ocx2-cgi-receipt.mjs"))
    expect(ways).toEqual(["code cache"])
    expect(Object.keys(loaded).sort()).toEqual(bundles.map((b) => b.name).sort())
    for (const bundle of bundles) expect(loaded[bundle.name], bundle.name).toEqual(await fromSource(bundle))
  }, 90_000)
})
