import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { make } from "../../layers/BwrapSandbox.js"
import type { LaunchSpec } from "../../services/SandboxLauncher.js"
import { baseSandbox, decode, gid, makeRoot, uid } from "./support.js"

const probeText = Fs.readFileSync(Path.join(import.meta.dirname, "../fixtures/sandbox/probe.py"), "utf8")
const { root, ws, care } = makeRoot("isolation")
const ro = Path.join(root, "ro")
const rw = Path.join(root, "rw")
const home = Path.join(root, "home", ".tool")
const other = Path.join(root, "other")
let server: Net.Server
let port = 0

beforeAll(async () => {
  Fs.mkdirSync(ro)
  Fs.writeFileSync(Path.join(ro, "data"), "read-only data")
  Fs.mkdirSync(rw)
  Fs.chownSync(rw, uid, gid)
  Fs.mkdirSync(home, { recursive: true })
  Fs.chmodSync(Path.join(root, "home"), 0o755)
  Fs.writeFileSync(Path.join(home, "cfg"), "home config")
  Fs.chownSync(home, uid, gid)
  Fs.mkdirSync(other)
  Fs.mkdirSync(Path.join(ws, "protected"))
  Fs.chownSync(Path.join(ws, "protected"), uid, gid)
  Fs.writeFileSync(Path.join(other, "file"), "not given")
  Fs.symlinkSync("/etc", Path.join(ws, "escape"))
  Fs.symlinkSync(care, Path.join(ws, "tocare"))
  server = Net.createServer((s) => {
    s.on("error", () => {})
    s.end("hello")
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()))
  port = (server.address() as Net.AddressInfo).port
})
afterAll(() => {
  server.close()
  Fs.rmSync(root, { recursive: true, force: true })
})

const launcher = make()
const hostNs = (n: string) => Fs.readlinkSync(`/proc/self/ns/${n}`)
const runLine = '{"run":"0123abcd","objective":"probe the sandbox"}'

const probeSpec = (overrides: Partial<LaunchSpec["sandbox"] & object>): LaunchSpec => {
  const cfg = {
    port,
    absent: ["/etc/passwd", "/etc", "/root", "/home", "/work", care, other, Path.join(root, "home/.tool")],
    read: [Path.join(ro, "data"), Path.join(ws, "escape/passwd"), Path.join(ws, "tocare/secret"), `${ws}/../care/secret`,
      `${ws}/../../../../etc/hostname`, Path.join(ws, ".tool/cfg")],
    write: [Path.join(ro, "new"), Path.join(ws, "protected/new"), Path.join(ws, "made"), Path.join(rw, "made"), Path.join(ws, ".tool/made"), "/usr/made"]
  }
  return {
    command: ["python3", "/probe/probe.py", JSON.stringify(cfg)],
    env: { PATH: "/usr/bin", LANG: "C.UTF-8", ODD: "a b=c 'd'" },
    cwd: ws,
    sandbox: {
      ...baseSandbox(ws, care),
      readOnly: ["/usr", "/lib", "/lib64", ro, Path.join(ws, "protected")],
      readWrite: [rw],
      homes: [home],
      createdFiles: [{ at: "/probe/probe.py", text: probeText }],
      ...overrides
    },
    limits: { wallSeconds: 30 },
    stdin: { lines: [runLine], keepOpen: false },
    keep: { stdout: 1 << 20, stderr: 1 << 16 }
  }
}

describe("inside the sandbox (a probe run as the sandboxed process)", () => {
  it.live("sees only what it was given, as the uid/gid it was given, with exactly its env", () =>
    Effect.gen(function*() {
      const r = yield* launcher.run(probeSpec({}))
      expect(decode(r.stderr.tail)).toBe("")
      expect(r.ending).toEqual({ outcome: "exited", exit: 0 })
      const p = JSON.parse(decode(r.stdout.tail))
      expect(p.stdin_first_line).toBe(runLine)
      expect([p.uid, p.gid]).toEqual([uid, gid])
      // host processes: none; only the namespace's init and the probe
      expect(p.pids.length).toBeLessThanOrEqual(2)
      expect(p.comms).not.toContain("node")
      for (const n of ["pid", "user", "uts", "ipc", "net", "mnt"]) expect(p.namespaces[n]).not.toBe(hostNs(n))
      expect(p.hostname).not.toBe(Os.hostname())
      expect(p.sysv_queues).toEqual([])
      // no capability kept, no network but its own lo, the host's server unreachable
      expect(p.cap_eff).toBe("0000000000000000")
      expect(p.interfaces).toEqual(["lo"])
      expect(p.connect_host_server.ok).toBe(false)
      // accounts, OCX's own files and paths it was not given do not exist for it
      for (const [path, seen] of Object.entries(p.exists)) expect([path, seen]).toEqual([path, false])
      // links and .. cannot leave what it was given
      expect(p.read[Path.join(ro, "data")]).toEqual({ ok: true, value: "read-only data" })
      expect(p.read[Path.join(ws, ".tool/cfg")]).toEqual({ ok: true, value: "home config" })
      for (const escape of [Path.join(ws, "escape/passwd"), Path.join(ws, "tocare/secret"), `${ws}/../care/secret`,
        `${ws}/../../../../etc/hostname`]) {
        expect([escape, p.read[escape].ok]).toEqual([escape, false])
      }
      // read_only is not writable; the workspace, read_write and homes are
      expect(p.write[Path.join(ro, "new")]).toEqual({ ok: false, errno: "EROFS" })
      // the workspace is the base the keys apply over: a read_only path inside it stays read-only
      expect(p.write[Path.join(ws, "protected/new")]).toEqual({ ok: false, errno: "EROFS" })
      expect(p.write["/usr/made"].ok).toBe(false)
      for (const w of [Path.join(ws, "made"), Path.join(rw, "made"), Path.join(ws, ".tool/made")]) {
        expect([w, p.write[w].ok]).toEqual([w, true])
      }
      // files it wrote belong to its uid/gid on the host; the home's file is in the host home
      for (const f of [Path.join(ws, "made"), Path.join(rw, "made"), Path.join(home, "made")]) {
        const st = Fs.statSync(f)
        expect([f, st.uid, st.gid]).toEqual([f, uid, gid])
      }
      expect(Fs.existsSync(Path.join(ro, "new"))).toBe(false)
      // the environment is exactly env (bwrap itself always sets PWD to the cwd)
      expect(p.env).toEqual({ PATH: "/usr/bin", LANG: "C.UTF-8", ODD: "a b=c 'd'", PWD: ws })
      expect(p.cwd).toBe(ws)
      // no terminal to reach, a session of its own, and no descriptor of ours
      for (const fd of ["0", "1", "2"]) expect(p.tiocsti[fd].ok).toBe(false)
      expect(p.open_dev_tty.ok).toBe(false)
      expect(p.session_leader_inside).toBe(true)
      expect(Math.max(...p.fds)).toBeLessThanOrEqual(3)
    }))

  it.live("network true shares the host's network; named capabilities are kept; isolate_terminal false keeps the session", () =>
    Effect.gen(function*() {
      const r = yield* launcher.run(probeSpec({ network: true, linuxCapabilities: ["CAP_NET_ADMIN"], isolateTerminal: false }))
      expect(r.ending).toEqual({ outcome: "exited", exit: 0 })
      const p = JSON.parse(decode(r.stdout.tail))
      expect(p.connect_host_server).toEqual({ ok: true, value: "connected" })
      expect(p.namespaces.net).toBe(hostNs("net"))
      expect(p.cap_eff).toBe("0000000000001000")
      expect(p.session_leader_inside).toBe(false)
      expect(p.namespaces.pid).not.toBe(hostNs("pid"))
    }))
})
