import { describe, expect, it } from "vitest"
import * as Either from "effect/Either"
import { isReleaseName, ownPaths, releaseNameOf, releaseOfLinkTarget, releasePaths, rootOfProgram } from "../../src/release/ReleasePaths.js"
import { externalsOfBuild, keepInRelease, MissingPackage, resolutionCandidates, runtimeClosure, runtimeDependencies } from "../../src/release/RuntimeModules.js"
import { checkSmokeAnswer } from "../../src/release/SmokeAnswer.js"

describe("the release root's layout", () => {
  it("names every path of ROOT, and OCX's own paths", () => {
    const p = releasePaths("/srv/ocx")
    expect([p.staged, p.next, p.current, p.previous, p.hook, p.gateLog, p.release("0123456789ab")]).toEqual([
      "/srv/ocx/staged", "/srv/ocx/next", "/srv/ocx/current", "/srv/ocx/previous", "/srv/ocx/ocx2-hook",
      "/srv/ocx/staged/gate.log", "/srv/ocx/staged/0123456789ab"
    ])
    expect(ownPaths("/srv/ocx")).toEqual([
      "/srv/ocx/care", "/srv/ocx/settings", "/srv/ocx/current", "/srv/ocx/previous", "/srv/ocx/next",
      "/srv/ocx/staged", "/srv/ocx/ocx2-hook", "/srv/ocx/node"
    ])
  })

  it("a release is named by its check-in's first twelve hex digits", () => {
    expect(releaseNameOf("9462CC79FEAF428A277587B0D583436D5CE5D33D")).toBe("9462cc79feaf")
    expect(isReleaseName("9462cc79feaf")).toBe(true)
    expect(isReleaseName("9462cc79fea")).toBe(false)
    expect(isReleaseName("9462cc79feag")).toBe(false)
  })

  it("the root a program was released into is read off its real path", () => {
    expect(rootOfProgram("/srv/ocx/staged/0123456789ab/ocx2")).toBe("/srv/ocx")
    expect(rootOfProgram("/srv/ocx/staged/0123456789ab/ocx2-hook")).toBe("/srv/ocx")
    expect(rootOfProgram("/srv/ocx/staged/0123456789ab.partial/ocx2")).toBeUndefined()
    expect(rootOfProgram("/srv/ocx/other/0123456789ab/ocx2")).toBeUndefined()
    expect(rootOfProgram("/work/main/dist/ocx2.mjs")).toBeUndefined()
  })

  it("a served link names a release only when it leads into ROOT/staged", () => {
    expect(releaseOfLinkTarget("/r", "staged/0123456789ab")).toBe("0123456789ab")
    expect(releaseOfLinkTarget("/r", "/r/staged/0123456789ab")).toBe("0123456789ab")
    expect(releaseOfLinkTarget("/r", "staged/../../etc")).toBeUndefined()
    expect(releaseOfLinkTarget("/r", "/other/staged/0123456789ab")).toBeUndefined()
    expect(releaseOfLinkTarget("/r", "staged/gate.log")).toBeUndefined()
  })
})

describe("what a release carries beside its bundles", () => {
  it("the externals are the build's --external options", () => {
    expect(externalsOfBuild(`esbuild bin/*.ts --bundle --external:better-sqlite3 --minify --external:'@scope/x'`)).toEqual(["better-sqlite3", "@scope/x"])
    expect(externalsOfBuild("tsc")).toEqual([])
  })

  it("a package's install-time tools are not among its runtime dependencies", () => {
    expect(runtimeDependencies({
      dependencies: { bindings: "^1", "prebuild-install": "^7" },
      optionalDependencies: { extra: "1" },
      scripts: { install: "prebuild-install || node-gyp rebuild --release" }
    })).toEqual([{ name: "bindings", optional: false }, { name: "extra", optional: true }])
  })

  it("Node's resolution searches each enclosing node_modules, nearest first", () => {
    expect(resolutionCandidates(".", "a")).toEqual(["node_modules/a"])
    expect(resolutionCandidates("node_modules/x/node_modules/y", "a")).toEqual([
      "node_modules/x/node_modules/y/node_modules/a", "node_modules/x/node_modules/a", "node_modules/a"
    ])
  })

  it("the closure follows runtime dependencies once each and names a missing one", () => {
    const installed: Record<string, { dependencies?: Record<string, string>; optionalDependencies?: Record<string, string> }> = {
      "node_modules/a": { dependencies: { b: "1", c: "1" } },
      "node_modules/b": { dependencies: { c: "1" }, optionalDependencies: { gone: "1" } },
      "node_modules/a/node_modules/c": {},
      "node_modules/c": {}
    }
    const lookup = {
      resolve: (from: string, name: string) => resolutionCandidates(from, name).find((dir) => dir in installed),
      manifest: (dir: string) => installed[dir]!,
      isNative: (dir: string) => dir === "node_modules/a"
    }
    expect(runtimeClosure(["a"], lookup)).toEqual(Either.right([
      { name: "a", relativeDir: "node_modules/a", native: true },
      { name: "b", relativeDir: "node_modules/b", native: false },
      { name: "c", relativeDir: "node_modules/a/node_modules/c", native: false },
      { name: "c", relativeDir: "node_modules/c", native: false }
    ]))
    expect(runtimeClosure(["a", "nope"], lookup)).toEqual(Either.left(new MissingPackage({ name: "nope", neededBy: "the build (--external)" })))
  })

  it("of a native package only its compiled addon is kept of build/, and never its sources", () => {
    const native = { name: "n", relativeDir: "node_modules/n", native: true }
    const plain = { name: "p", relativeDir: "node_modules/p", native: false }
    expect(keepInRelease(native, "lib/index.js", false)).toBe(true)
    expect(keepInRelease(native, "build/Release", true)).toBe(true)
    expect(keepInRelease(native, "build/Release/n.node", false)).toBe(true)
    expect(keepInRelease(native, "build/Release/obj.target", true)).toBe(false)
    expect(keepInRelease(native, "build/Release/n.a", false)).toBe(false)
    expect(keepInRelease(native, "deps", true)).toBe(false)
    expect(keepInRelease(native, "src", true)).toBe(false)
    expect(keepInRelease(plain, "src/index.js", false)).toBe(true)
    expect(keepInRelease(plain, "node_modules", true)).toBe(false)
  })
})

describe("the smoke's check of the staged ocx2", () => {
  it("accepts a completed list answer and names what else is wrong", () => {
    expect(checkSmokeAnswer(`{"tool":"list","operations":[],"output":{"tools":[]},"stopped":{"reason":"completed"}}\n`)).toBeUndefined()
    expect(checkSmokeAnswer("")).toBe("it printed nothing")
    expect(checkSmokeAnswer("Error: boom")).toBe("it printed no JSON answer: Error: boom")
    expect(checkSmokeAnswer(`{"tool":"echo","stopped":{"reason":"completed"}}`)).toBe(`its answer names the tool "echo", not "list"`)
    expect(checkSmokeAnswer(`{"tool":"list","stopped":{"reason":"failed"}}`)).toBe(`its answer stopped "failed", not "completed"`)
    expect(checkSmokeAnswer(`{"tool":"list","stopped":{"reason":"completed"}}`)).toBe("its answer lists no tools")
  })
})
