// npm run bench -- NAME [ARGS...]: builds the programs, bundles bench/NAME.ts as the benches are
// measured (the programs as shipped, better-sqlite3 left external) and runs it.
import { build } from "esbuild"
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"

const here = import.meta.dirname
const names = Fs.readdirSync(here).filter((f) => f.endsWith(".ts")).map((f) => f.slice(0, -3)).sort()
const [name, ...rest] = process.argv.slice(2)
if (name === undefined || !names.includes(name)) {
  console.error(`usage: npm run bench -- NAME [ARGS...]; the benchmarks are ${names.join(", ")}`)
  process.exit(2)
}
const project = Path.dirname(here)
const built = spawnSync("npm", ["run", "-s", "build"], { cwd: project, stdio: "inherit" })
if (built.status !== 0) process.exit(built.status ?? 1)
const outfile = Path.join(here, `${name}.out.mjs`)
await build({
  entryPoints: [Path.join(here, `${name}.ts`)],
  bundle: true,
  platform: "node",
  format: "esm",
  // esbuild too: bench/pickup builds a clone host's programs with it (test/node/cloneWorld.ts), and it cannot be bundled
  external: ["better-sqlite3", "@lydell/node-pty", "esbuild"],
  outfile,
  logLevel: "warning",
  banner: { js: "import { createRequire as __ocx2CreateRequire } from 'node:module'; const require = __ocx2CreateRequire(import.meta.url);" }
})
const ran = spawnSync(process.execPath, [outfile, ...rest], { cwd: project, stdio: "inherit" })
process.exit(ran.status ?? 1)
