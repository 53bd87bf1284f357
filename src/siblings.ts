import * as Fs from "node:fs"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"

// Parts that only some calls need (the hook's round, the MCP server) ship as bundles of their
// own beside the program, so the program's own bundle stays small and starts fast. From
// source (the tests) there is no such bundle, and the caller imports the module itself.

/** The URL of the bundle NAME beside the running program (NAME.mjs in a checkout's dist/, NAME in a release). */
export const siblingBundle = (name: string, program: string | undefined = process.argv[1]): string | undefined => {
  if (program === undefined) return undefined
  let real: string
  try {
    real = Fs.realpathSync(program)
  } catch {
    return undefined
  }
  if (real.endsWith(".ts")) return undefined
  const beside = Path.join(Path.dirname(real), real.endsWith(".mjs") ? `${name}.mjs` : name)
  return Fs.existsSync(beside) ? pathToFileURL(beside).href : undefined
}

/**
 * Imports the bundle NAME beside the program, or gives undefined where there is none. A bundle run
 * through V8's code cache (bin/build.mjs) is a small loader whose default export is the bundle's
 * exports; a plain ES module bundle is its own namespace.
 */
export const importSibling = async <T>(name: string, program: string | undefined = process.argv[1]): Promise<T | undefined> => {
  const url = siblingBundle(name, program)
  if (url === undefined) return undefined
  const loaded = (await import(url)) as { readonly default?: T }
  return loaded.default ?? (loaded as T)
}
