import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import type { LaunchSpec, SandboxSpec } from "../../services/SandboxLauncher.js"

export const uid = 64123
export const gid = 64124
export const decode = (b: Uint8Array) => new TextDecoder().decode(b)

/** a fresh directory tree the sandbox's uid can traverse, removed by the caller */
export const makeRoot = (name: string) => {
  const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), `ocx2-${name}-`))
  Fs.chmodSync(root, 0o755)
  const ws = Path.join(root, "ws")
  Fs.mkdirSync(ws)
  Fs.chownSync(ws, uid, gid)
  const care = Path.join(root, "care")
  Fs.mkdirSync(care, { mode: 0o700 })
  Fs.writeFileSync(Path.join(care, "secret"), "care secret")
  return { root, ws, care }
}

/** the host's programs, read-only, and nothing else */
export const baseSandbox = (ws: string, care: string): SandboxSpec => ({
  uid,
  gid,
  linuxCapabilities: [],
  network: false,
  isolateTerminal: true,
  endsWithParent: true,
  proc: "/proc",
  dev: "/dev",
  tmp: "/tmp",
  readOnly: ["/usr", "/bin", "/lib", "/lib64"],
  readWrite: [],
  homes: [],
  createdFiles: [],
  workspace: ws,
  ownPaths: [care],
})

export const shellSpec = (ws: string, care: string, script: string, extra: Partial<LaunchSpec> = {}): LaunchSpec => ({
  command: ["sh", "-c", script],
  env: { PATH: "/usr/bin:/bin" },
  cwd: ws,
  sandbox: baseSandbox(ws, care),
  limits: {},
  stdin: { lines: [], keepOpen: false },
  keep: { stdout: 4096, stderr: 4096 },
  ...extra
})

/** pids still present in /proc (a zombie counts: it is a process left behind) */
export const present = (pids: ReadonlyArray<number>) => pids.filter((p) => Fs.existsSync(`/proc/${p}`))
