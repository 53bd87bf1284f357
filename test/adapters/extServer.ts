import * as Fs from "node:fs"
import { execFile, spawn, type ChildProcess } from "node:child_process"
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { build } from "esbuild"

// A minimal real `fossil server` with an extension root, local to the adapter tests (the shared
// test/support/fossilServer.ts is written elsewhere; the two can be merged later).

const run = promisify(execFile)
const fossil = (...args: Array<string>) => run("fossil", args, { env: { ...process.env, USER: "root" } })

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

/** Bundles an entry point as `npm run build` does, into `outdir`; returns the file. */
export const bundle = async (entry: string, outdir: string, name: string): Promise<string> => {
  const outfile = join(outdir, `${name}.mjs`)
  await build({
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    outfile,
    external: ["better-sqlite3"],
    logLevel: "warning",
    banner: { js: "import { createRequire as __ocx2CreateRequire } from 'node:module'; const require = __ocx2CreateRequire(import.meta.url);" }
  })
  // the native addon stays external: the bundle finds it through a node_modules beside it
  const modules = join(outdir, "node_modules")
  if (!Fs.existsSync(modules)) Fs.symlinkSync(join(import.meta.dirname, "../../node_modules"), modules)
  return outfile
}

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

/**
 * A repository with `users`, served with --extroot holding, for each name, an executable that
 * runs the given bundled script with node by its full path (Fossil's CGI environment has no PATH).
 */
export const startExtServer = async (users: ReadonlyArray<TestUser>, scripts: Record<string, string>): Promise<ExtServer> => {
  const dir = mkdtempSync(join(tmpdir(), "ocx2-adapters-"))
  const repository = join(dir, "repo.fossil")
  const extroot = join(dir, "ext")
  mkdirSync(extroot)
  await fossil("init", repository)
  for (const user of users) {
    await fossil("user", "new", user.login, `${user.login}@example.com`, user.password, "-R", repository)
    await fossil("user", "capabilities", user.login, user.capabilities, "-R", repository)
  }
  for (const [name, script] of Object.entries(scripts)) {
    writeFileSync(join(extroot, name), `#!/bin/sh\nexec /usr/bin/node ${script}\n`)
    chmodSync(join(extroot, name), 0o755)
  }
  const port = await freePort()
  const child: ChildProcess = spawn(
    "fossil",
    ["server", "--nojail", "--localhost", "--port", String(port), "--extroot", extroot, repository],
    { env: { ...process.env, USER: "root" }, stdio: "ignore" }
  )
  const base = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 10_000
  for (;;) {
    try {
      if ((await fetch(`${base}/robots.txt`)).status > 0) break
    } catch {
      if (Date.now() > deadline) throw new Error(`fossil server did not answer on ${base}`)
      await new Promise((r) => setTimeout(r, 50))
    }
  }
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
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once("exit", r))
        child.kill("SIGTERM")
        await exited
      }
      rmSync(dir, { recursive: true, force: true })
    }
  }
}
