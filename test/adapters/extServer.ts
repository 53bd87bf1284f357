import * as Fs from "node:fs"
import { chmodSync, mkdirSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { bundleProgram } from "../support/bundleProgram.js"
import { makeWorld } from "../support/world.js"

// A real `fossil server` with an extension root for the adapter tests (the test world's,
// test/support/world.ts).

export interface TestUser {
  readonly login: string
  readonly password: string
  readonly capabilities: string
}

export interface ExtServer {
  readonly base: string
  readonly dir: string
  readonly repository: string
  /** Logs in through Fossil's own /login form; the cookie header to send. */
  readonly login: (user: TestUser) => Promise<string>
  readonly stop: () => Promise<void>
}

/**
 * Where this vitest run keeps an entry point's bundle (test/support/sharedBundles.ts): bundling is
 * seconds of CPU, and the sources do not change while the suite runs. Outside a run, none.
 */
const sharedBundle = (entry: string): string | undefined => {
  const dir = process.env.OCX2_TEST_BUNDLES
  return dir === undefined ? undefined : join(dir, `${entry.replace(/[^A-Za-z0-9.-]+/g, "_")}.mjs`)
}

/** the checkout's node_modules: found upwards, so a bundled bench (bench/*.out.mjs) finds it too */
const nodeModulesAbove = (from: string): string => {
  for (let dir = from; ; dir = dirname(dir)) {
    if (Fs.existsSync(join(dir, "node_modules"))) return join(dir, "node_modules")
    if (dirname(dir) === dir) throw new Error(`no node_modules above ${from}`)
  }
}

/** The bundles a program loads from beside itself (src/Siblings.ts), carried with it as a release carries them. */
const siblingsOf: Record<string, ReadonlyArray<string>> = { "ocx2-cgi": ["ocx2-cgi-pages", "ocx2-cgi-receipt"] }

/** Bundles an entry point as `npm run build` does, into `outdir`, with its siblings; returns the file. */
export const bundle = async (entry: string, outdir: string, name: string): Promise<string> => {
  for (const sibling of siblingsOf[name] ?? []) await bundle(join(dirname(entry), `${sibling}.ts`), outdir, sibling)
  const outfile = join(outdir, `${name}.mjs`)
  const shared = sharedBundle(entry)
  if (shared !== undefined && Fs.existsSync(shared)) {
    Fs.mkdirSync(outdir, { recursive: true }) // as esbuild makes it
    Fs.copyFileSync(shared, outfile)
  }
  else await bundleInto(entry, outfile)
  // the first file of the run to bundle an entry point leaves it for the others (renamed into place whole)
  if (shared !== undefined && !Fs.existsSync(shared)) {
    const temporary = `${shared}.${process.pid}`
    Fs.copyFileSync(outfile, temporary)
    Fs.renameSync(temporary, shared)
  }
  // the native addon stays external: the bundle finds it through a node_modules beside it
  const modules = join(outdir, "node_modules")
  if (!Fs.existsSync(modules)) Fs.symlinkSync(nodeModulesAbove(import.meta.dirname), modules)
  return outfile
}

/** the newest modification time of the product's sources (bin/, src/, services/, layers/), once per process */
let newestSource: number | undefined
const newestSourceTime = (project: string): number => {
  if (newestSource !== undefined) return newestSource
  let newest = 0
  const walk = (dir: string) => {
    for (const entry of Fs.readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else newest = Math.max(newest, Fs.statSync(path).mtimeMs)
    }
  }
  for (const dir of ["bin", "src", "services", "layers"]) walk(join(project, dir))
  newestSource = newest
  return newest
}

/**
 * The program NAME as it ships, in `outdir`: dist/NAME.mjs, the loader `npm run build` writes, with
 * its bundle NAME.cjs, when a run before left one V8's code cache of it, and the flock addon, so
 * each start of the program (a CLI call, a CGI request, a watcher) costs what it costs installed,
 * not the compile of a bundle of its own. Built from the sources as they stand (dist older than any source, or no
 * build): bundled as `bundle` does. Returns the program's file.
 */
export const builtProgram = async (name: string, outdir: string): Promise<string> => {
  // the checkout, found upwards: a bundled bench (bench/*.out.mjs) is one folder shallower than this file
  const project = dirname(nodeModulesAbove(import.meta.dirname))
  const dist = join(project, "dist")
  const programs = [name, ...(siblingsOf[name] ?? [])]
  const fresh = programs.every((program) => {
    const [loader, code] = [join(dist, `${program}.mjs`), join(dist, `${program}.cjs`)]
    return Fs.existsSync(loader) && Fs.existsSync(code) && Math.min(Fs.statSync(loader).mtimeMs, Fs.statSync(code).mtimeMs) >= newestSourceTime(project)
  })
  if (!fresh) return bundle(join(project, "bin", `${name}.ts`), outdir, name)
  Fs.mkdirSync(outdir, { recursive: true })
  // and the flock(2) addon, beside the programs as a release has it (src/care/NativeFlock.ts)
  for (const file of [...programs.flatMap((program) => [`${program}.mjs`, `${program}.cjs`, `${program}.cjs.cache`]), "ocx2-flock.node"]) {
    try {
      Fs.copyFileSync(join(dist, file), join(outdir, file))
    } catch (e) {
      // the cache is there once a program of this build has run; the addon once the build made it
      if (!file.endsWith(".cache") && !file.endsWith(".node")) throw e
    }
  }
  const modules = join(outdir, "node_modules")
  if (!Fs.existsSync(modules)) Fs.symlinkSync(nodeModulesAbove(import.meta.dirname), modules)
  return join(outdir, `${name}.mjs`)
}

const bundleInto = (entry: string, outfile: string) => bundleProgram(entry, outfile, { external: ["better-sqlite3"], bundled: true })

/**
 * A repository with `users`, served with --extroot holding, for each name, an executable that
 * runs the given bundled script with node by its full path (Fossil's CGI environment has no PATH).
 */
export const startExtServer = async (users: ReadonlyArray<TestUser>, scripts: Record<string, string>): Promise<ExtServer> => {
  // the test world, served as a service manager serves it: from /, with a bare environment
  const world = await makeWorld({
    prefix: "ocx2-adapters-",
    users,
    checkin: {},
    extroot: (_root, dir) => {
      const extroot = join(dir, "ext")
      mkdirSync(extroot)
      for (const [name, script] of Object.entries(scripts)) {
        writeFileSync(join(extroot, name), `#!/bin/sh\nexec ${process.execPath} ${script}\n`)
        chmodSync(join(extroot, name), 0o755)
      }
      return extroot
    }
  })
  const { dir, repository, server } = world
  const base = server.url.replace(/\/$/, "")
  return {
    base,
    dir,
    repository,
    login: async (user) => {
      const response = await fetch(`${base}/login`, {
        method: "POST",
        redirect: "manual",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ u: user.login, p: user.password }).toString()
      })
      const cookie = response.headers.getSetCookie().map((c) => c.split(";")[0]).find((c) => c!.startsWith("fossil-"))
      if (cookie === undefined) throw new Error(`login of ${user.login} failed: ${response.status}`)
      return cookie
    },
    stop: () => world.close()
  }
}
