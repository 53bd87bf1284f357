/**
 * bin/sharedBuiltins.mjs, as bin/build.mjs applies it to each cached bundle: on what this
 * checkout's esbuild really writes (two modules importing the same built-ins, minified to
 * CommonJS), every import of a built-in becomes one shared call, the bundle still runs and sees
 * the built-ins whole, a bundled package keeps esbuild's own call, and a helper of another form
 * is an error, not a bundle left as it was.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
// @ts-expect-error: a build script in plain JavaScript, with no declarations
import { shareBuiltins } from "../../bin/sharedBuiltins.mjs"

const repo = Path.resolve(import.meta.dirname, "..", "..")
const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-shared-builtins-"))
afterAll(() => Fs.rmSync(dir, { recursive: true, force: true }))

const share = shareBuiltins as (code: string) => { readonly code?: string; readonly error?: string }

const bundled = (): string => {
  Fs.writeFileSync(Path.join(dir, "a.ts"), `import * as Fs from "node:fs"\nimport * as Path from "node:path"\nexport const a = () => [Fs.existsSync(${JSON.stringify(dir)}), Path.sep]\n`)
  Fs.writeFileSync(Path.join(dir, "b.ts"), `import * as Fs from "node:fs"\nimport * as Os from "node:os"\nexport const b = () => [typeof Fs.readFileSync, typeof Os.tmpdir]\n`)
  // a package of CommonJS, bundled: its exports may fill after a cycle first requires it
  Fs.mkdirSync(Path.join(dir, "node_modules", "pkg"), { recursive: true })
  Fs.writeFileSync(Path.join(dir, "node_modules", "pkg", "index.js"), "exports.value = 42\n")
  Fs.writeFileSync(Path.join(dir, "main.ts"), `import { a } from "./a"\nimport { b } from "./b"\nimport * as Pkg from "pkg"\nimport * as Fs from "node:fs"\nconsole.log(JSON.stringify({ a: a(), b: b(), pkg: Pkg.value, same: Fs.readFileSync === require("node:fs").readFileSync }))\n`)
  const out = Path.join(dir, "main.cjs")
  ChildProcess.execFileSync(Path.join(repo, "node_modules/.bin/esbuild"), [
    Path.join(dir, "main.ts"), "--bundle", "--platform=node", "--format=cjs", "--target=node20", "--minify", `--outfile=${out}`, "--log-level=error"
  ], { cwd: dir })
  return Fs.readFileSync(out, "utf8")
}

describe("one namespace object per built-in in a cached bundle", () => {
  it("makes each built-in's import one shared call, and the bundle runs as before", () => {
    const code = bundled()
    expect(code).toMatch(/[\w$]+\(require\("node:fs"\)/)
    const shared = share(code)
    expect(shared.error).toBeUndefined()
    expect(shared.code).not.toMatch(/[\w$]+\(require\("node:[\w/]+"\)(,1)?\)/)
    expect(shared.code!.match(/__ocx2Builtin\("node:fs",\d\)/g)!.length).toBeGreaterThanOrEqual(2)
    // the bundled package keeps esbuild's own call: every call of the helper but those on built-ins stays
    const helper = /var ([\w$]+)=\(([\w$]+),[\w$]+,[\w$]+\)=>\([\w$]+=\2!=null/.exec(code)![1]!
    const callsOf = (text: string) => text.split(`${helper}(`).length - 1
    const onBuiltins = code.match(/[\w$]+\(require\("node:[\w/]+"\)(,1)?\)/g)!.length
    expect(callsOf(code) - onBuiltins).toBeGreaterThan(0)
    // the shared function's own call of the helper is the one added
    expect(callsOf(shared.code!)).toBe(callsOf(code) - onBuiltins + 1)
    const file = Path.join(dir, "shared.cjs")
    Fs.writeFileSync(file, shared.code!)
    const ran = JSON.parse(ChildProcess.execFileSync(process.execPath, [file], { encoding: "utf8" })) as unknown
    expect(ran).toEqual({ a: [true, Path.sep], b: ["function", "function"], pkg: 42, same: true })
  })

  it("leaves a bundle that imports no built-in through the helper as it is", () => {
    const code = `"use strict";console.log(require("node:fs").existsSync("/"))`
    expect(share(code)).toEqual({ code })
  })

  it("is an error when esbuild's helper has another form, naming the file to update", () => {
    const code = `"use strict";var P=(e)=>({...e});var i=P(require("node:fs"),1);console.log(i.existsSync("/"))`
    expect(share(code).error).toMatch(/__toESM was not found, though 1 built-in imports call a helper: update bin\/sharedBuiltins\.mjs/)
  })
})
