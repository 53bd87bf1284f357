// One namespace object per Node built-in module in a CommonJS bundle (bin/build.mjs).
//
// esbuild turns each module's `import * as Fs from "node:fs"` into its helper __toESM applied to
// `require("node:fs")`, once per importing module: the CLI's bundle did so 58 times for node:fs
// and 58 for node:path (156 calls in all), and each call copies every export of the built-in into
// a new object of getters. Measured on `ocx2 --help`, the two builds side by side, alternating:
// about 0.29 CPU-s median before and 0.26 after; every program built this way pays it at each
// start, and a node starts one per run.
//
// Only built-ins share an object: their exports are complete when first required, so one copy
// is the same as many. A bundled CommonJS package keeps esbuild's own call, since its exports
// may still be filling when a cycle first requires it.

// esbuild's __toESM as its minifier writes it, whatever it names the parameters:
// var NAME=(e,t,r)=>(r=e!=null?...:{},...,e))
const helper = /var ([\w$]+)=\(([\w$]+),([\w$]+),([\w$]+)\)=>\(\4=\2!=null\?[\w$]+\([\w$]+\(\2\)\):\{\},[\w$]+\(\3\|\|!\2\|\|!\2\.__esModule\?[\w$]+\(\4,"default",\{value:\2,enumerable:!0\}\):\4,\2\)\)/
// a call of it on a built-in: NAME(require("node:fs"),1), the 1 when the importer is an ES module
const builtinCall = (name) => new RegExp(`(?<![\\w$.])${name.replace(/\$/g, "\\$")}\\(require\\("(node:[\\w/]+)"\\)(,1)?\\)`, "g")
const anyBuiltinCall = /[\w$]+\(require\("node:[\w/]+"\)(,1)?\)/g

/** `code` with each `__toESM(require("node:X"))` made one shared call; an error when the helper is used but not found. */
export const shareBuiltins = (code) => {
  const calls = code.match(anyBuiltinCall)?.length ?? 0
  const found = helper.exec(code)
  if (found === null) {
    return calls === 0 ? { code } : { error: `esbuild's __toESM was not found, though ${calls} built-in imports call a helper: update bin/sharedBuiltins.mjs to its new form` }
  }
  const name = found[1]
  const shared = "__ocx2Builtin"
  // a declarator added to the helper's own var statement: it is defined before any module runs
  const end = found.index + found[0].length
  const defined = code.slice(0, end) + `,${shared}=(n,m,c=${shared}.c??={})=>c[n+m]??=${name}(require(n),m)` + code.slice(end)
  const out = defined.replace(builtinCall(name), (_all, builtin, mode) => `${shared}("${builtin}",${mode === undefined ? 0 : 1})`)
  const left = out.match(anyBuiltinCall)?.length ?? 0
  return left === 0 ? { code: out } : { error: `${left} built-in imports still call a helper other than esbuild's __toESM (${name}): see bin/sharedBuiltins.mjs` }
}
