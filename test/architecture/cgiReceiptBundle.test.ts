/**
 * A receipt question costs one start of the CGI program (a clone's node asks one for every sign-in
 * check, long poll and write confirmation, layers/RemoteReceipts.ts), so the program Fossil starts,
 * bin/ocx2-cgi.ts, only chooses a bundle beside it, and the receipt's bundle holds the CGI adapter
 * and the receipt tool without the other tools, the tool list or the run page's stream server.
 * This bundles both as bin/build.mjs does and reads the modules esbuild took in.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"

const repo = Path.resolve(import.meta.dirname, "..", "..")
const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-cgi-bundle-"))
afterAll(() => Fs.rmSync(dir, { recursive: true, force: true }))

/** The modules of this checkout the bundle of bin/NAME.ts takes in, relative to it. */
const bundledModules = (name: string): ReadonlyArray<string> => {
  const metafile = Path.join(dir, `${name}.json`)
  // the esbuild CLI, run to completion: its JS API keeps a service child that outlives the worker
  ChildProcess.execFileSync(Path.join(repo, "node_modules/.bin/esbuild"), [
    Path.join(repo, `bin/${name}.ts`),
    "--bundle", "--platform=node", "--format=cjs", "--target=node20", "--minify",
    "--external:better-sqlite3", "--external:@lydell/node-pty", "--define:OCX2_BUNDLED=true",
    `--outfile=${Path.join(dir, `${name}.cjs`)}`, `--metafile=${metafile}`, "--log-level=error"
  ], { cwd: repo })
  const meta = JSON.parse(Fs.readFileSync(metafile, "utf8")) as { inputs: Record<string, unknown> }
  return Object.keys(meta.inputs).filter((input) => !input.includes("node_modules/"))
}

describe("the CGI's bundles", () => {
  it("the program Fossil starts holds nothing but the choice of a bundle beside it", () => {
    expect([...bundledModules("ocx2-cgi")].sort()).toEqual(["bin/ocx2-cgi.ts", "src/Bundles.ts", "src/Siblings.ts"])
  })

  it("the receipt's bundle holds the CGI adapter and the receipt tool, and no other tool, the tool list or the stream server", () => {
    const modules = bundledModules("ocx2-cgi-receipt")
    // a bundle read wrongly would pass every rule
    expect(modules).toContain("src/adapters/Cgi.ts")
    expect(modules).toContain("src/tools/receipt.ts")
    const tools = modules.filter((m) => /^src\/tools\/[a-z][A-Za-z]*\.ts$/.test(m))
    expect(tools).toEqual(["src/tools/receipt.ts"])
    const foreign = modules.filter((m) =>
      ["src/tools/Registry.ts", "src/follow/StreamServer.ts", "src/adapters/Mcp.ts", "src/node/Round.ts"].includes(m) || m.startsWith("src/adapters/cli/")
    )
    expect(foreign).toEqual([])
  })

  it("the pages' bundle holds every tool (a request for any other page runs it)", () => {
    const modules = bundledModules("ocx2-cgi-pages")
    expect(modules).toContain("src/tools/Registry.ts")
    expect(modules).toContain("src/follow/StreamServer.ts")
  })
})
