/**
 * The watcher's program holds only what a watcher runs (docs/architecture.md, "Layout"): it is
 * started once per run, and every module in its bundle is loaded, compiled and kept resident by
 * each. Given the watcher's host alone (layers/WatcherHost.ts), it bundles nothing of the node's
 * rounds, the tools or the adapters, and no layer of the hosts it never acts on (every host kind
 * with the release roots, LiveHosts); this bundles bin/ocx2-watcher.ts as bin/build.mjs does and
 * reads the modules esbuild took in.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"

const repo = Path.resolve(import.meta.dirname, "..", "..")
const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-watcher-bundle-"))
afterAll(() => Fs.rmSync(dir, { recursive: true, force: true }))

/** The modules of this checkout the watcher's bundle takes in, relative to it. */
const bundledModules = (): ReadonlyArray<string> => {
  const metafile = Path.join(dir, "meta.json")
  // the esbuild CLI, run to completion: its JS API keeps a service child that outlives the worker
  ChildProcess.execFileSync(Path.join(repo, "node_modules/.bin/esbuild"), [
    Path.join(repo, "bin/ocx2-watcher.ts"),
    "--bundle", "--platform=node", "--format=cjs", "--target=node20", "--minify",
    "--external:better-sqlite3", "--external:@lydell/node-pty", "--define:OCX2_BUNDLED=true",
    `--outfile=${Path.join(dir, "ocx2-watcher.cjs")}`, `--metafile=${metafile}`, "--log-level=error"
  ], { cwd: repo })
  const meta = JSON.parse(Fs.readFileSync(metafile, "utf8")) as { inputs: Record<string, unknown> }
  return Object.keys(meta.inputs).filter((input) => !input.includes("node_modules/"))
}

describe("the watcher's bundle", () => {
  it("holds the watcher and its host, and nothing of the rounds, the tools, the adapters or the other hosts' layers", () => {
    const modules = bundledModules()
    // a bundle read wrongly would pass every rule
    expect(modules).toContain("src/watcher/Watcher.ts")
    expect(modules).toContain("layers/WatcherHost.ts")
    const foreign = modules.filter((m) =>
      ["src/node/", "src/tools/", "src/adapters/"].some((folder) => m.startsWith(folder)) ||
      ["layers/LiveHosts.ts", "layers/ReleaseRootFs.ts", "services/ReleaseRoot.ts"].includes(m)
    )
    expect(foreign).toEqual([])
  })
})
