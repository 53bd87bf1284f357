// Parts that only some calls need (the hook's round, the MCP server) ship as bundles of their
// own beside the program, so the program's own bundle stays small and starts fast. From
// source (the tests) there is no such bundle, and the caller's own module is imported instead.
//
// Why no `import()` of a sibling from a bundle: the larger programs run their CommonJS bundle
// through V8's code cache (bin/build.mjs), and on Node 20 a script compiled from a code cache
// loses its dynamic-import callback: every `import()` in it then fails ("A dynamic import
// callback was not specified"), from the second run on, once the cache exists. So the loader
// offers its own way to run another bundle through the cache (`__ocx2RunCached`), a sibling is
// loaded through that, and the build refuses a cached bundle that still holds an `import()`.
import * as Fs from "node:fs"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"


/** What bin/build.mjs's loader puts on globalThis: runs a CommonJS bundle through the code cache. */
type RunCached = (file: string) => unknown
/** What bin/build.mjs puts on globalThis in a plain ES module program: its own import(). */
type ImportUrl = (url: string) => Promise<unknown>

const runCached = (): RunCached | undefined => (globalThis as { __ocx2RunCached?: RunCached }).__ocx2RunCached
const importUrl = (): ImportUrl | undefined => (globalThis as { __ocx2Import?: ImportUrl }).__ocx2Import

/** The real path of the bundle NAME beside the running program (NAME.mjs in a checkout's dist/, NAME in a release). */
export const siblingPath = (name: string, program: string | undefined = process.argv[1]): string | undefined => {
  if (program === undefined) return undefined
  let real: string
  try {
    real = Fs.realpathSync(program)
  } catch {
    return undefined
  }
  if (real.endsWith(".ts")) return undefined
  const beside = Path.join(Path.dirname(real), real.endsWith(".mjs") ? `${name}.mjs` : name)
  return Fs.existsSync(beside) ? beside : undefined
}

/** The CommonJS bundle a loader runs: NAME.cjs beside NAME.mjs (dist/) or NAME (a release). */
const codeOf = (loader: string): string => (loader.endsWith(".mjs") ? loader.slice(0, -4) : loader) + ".cjs"

/**
 * The bundle NAME beside the program, loaded: through the code cache when this program runs
 * through it (no `import()` there, see above), else imported by the plain ES module program (the
 * hook) with the import() its bundle's banner offers. `fromSource` imports the module itself when
 * there is no bundle (tests); the one table of bundles (src/Bundles.ts) writes it
 * `typeof OCX2_BUNDLED === "undefined" ? () => import(ENTRY) : undefined` (ENTRY the bundle's entry in bin/), so no bundle
 * keeps it.
 */
export const loadSibling = async <T>(
  name: string,
  fromSource: (() => Promise<unknown>) | undefined,
  program: string | undefined = process.argv[1]
): Promise<T> => {
  const beside = siblingPath(name, program)
  if (beside !== undefined) {
    const run = runCached()
    const code = codeOf(beside)
    if (run !== undefined && Fs.existsSync(code)) return run(code) as T
    const importer = importUrl()
    if (run === undefined && importer !== undefined) {
      const loaded = (await importer(pathToFileURL(beside).href)) as { readonly default?: T }
      return loaded.default ?? (loaded as T)
    }
    throw new Error(`${code} is missing beside ${beside}: rebuild or stage the release again`)
  }
  if (fromSource === undefined || typeof OCX2_BUNDLED !== "undefined") {
    throw new Error(`the bundle ${name} is missing beside ${program ?? "this program"}: rebuild or stage the release again`)
  }
  return (await fromSource()) as T
}
