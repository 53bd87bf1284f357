// Every bundle a program loads lazily from beside itself (src/Siblings.ts says why and how),
// named once, here: its name in dist/ and in a release, and the module it is bundled from, by an
// `import()` the compiler checks (a path that no longer holds the module does not compile, and the
// loader's type is what that module exports).
//
// Each `import()` stands behind `typeof OCX2_BUNDLED === "undefined"`, which the build defines
// away (bin/build.mjs): in a bundle the branch is dead, esbuild drops it and the module it names,
// so the program's own bundle stays small and a bundle run through the code cache holds no
// `import()`. From source (tsx, vitest) the module itself is imported. test/architecture/
// bundles.test.ts loads each from source and from dist/.
import { loadSibling } from "./Siblings.js"

/** One lazily loaded bundle: its name beside the program, and its load (from source when there is no bundle). */
export interface Bundle<T> {
  readonly name: string
  /** the bundle beside `program` (the running program by default), or its module from source */
  readonly load: (program?: string) => Promise<T>
}

const bundle = <T>(name: string, fromSource: (() => Promise<T>) | undefined): Bundle<T> => ({
  name,
  load: (program = process.argv[1]) => loadSibling<T>(name, fromSource, program)
})

/** The node's round and its supervisor: the hook acts through it, as do `ocx2 supervise` and create's act at once. */
export const hookRound = bundle(
  "ocx2-hook-round",
  typeof OCX2_BUNDLED === "undefined" ? () => import("../bin/ocx2-hook-round.js") : undefined
)

/** The MCP server (`ocx2 --mcp`): the MCP SDK is large, and the CLI's own start-up carries none of it. */
export const mcpServer = bundle(
  "ocx2-mcp-server",
  typeof OCX2_BUNDLED === "undefined" ? () => import("../bin/ocx2-mcp-server.js") : undefined
)

/** The tool-container server's client (`ocx2 containers ...`): no WebSocket client in the CLI's start-up. */
export const containersClient = bundle(
  "ocx2-containers-client",
  typeof OCX2_BUNDLED === "undefined" ? () => import("../bin/ocx2-containers-client.js") : undefined
)

/** Every tool and page of the CGI, and the node's stream server the run page starts. */
export const cgiPages = bundle(
  "ocx2-cgi-pages",
  typeof OCX2_BUNDLED === "undefined" ? () => import("../bin/ocx2-cgi-pages.js") : undefined
)

/** The CGI with the receipt tool alone, which a clone's node asks on every sign-in check, long poll and write. */
export const cgiReceipt = bundle(
  "ocx2-cgi-receipt",
  typeof OCX2_BUNDLED === "undefined" ? () => import("../bin/ocx2-cgi-receipt.js") : undefined
)

/** The table: every bundle above, for the test that loads each. */
export const bundles: ReadonlyArray<Bundle<object>> = [hookRound, mcpServer, containersClient, cgiPages, cgiReceipt]
