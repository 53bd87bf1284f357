import { describe, expect, it } from "@effect/vitest"
import * as fc from "fast-check"
import { ByteTail } from "../../src/sandbox/ByteTail.js"
import { bwrapArgs, type BwrapPlan } from "../../src/sandbox/BwrapArgs.js"
import { decideEnding, type Seen } from "../../src/sandbox/Ending.js"
import { checkSpecForm } from "../../src/sandbox/SpecCheck.js"
import { shellSpec } from "./support.js"

const plan: BwrapPlan = {
  uid: 1000,
  gid: 1001,
  linuxCapabilities: ["CAP_NET_ADMIN", "CAP_CHOWN"],
  network: false,
  isolateTerminal: true,
  endsWithParent: true,
  proc: "/proc",
  dev: "/dev",
  tmp: "/tmp",
  mounts: [
    { mode: "ro", source: "/usr", dest: "/usr" },
    { mode: "rw", source: "/srv/ws", dest: "/srv/ws" },
    { mode: "rw", source: "/root/.claude", dest: "/srv/ws/.claude" }
  ],
  links: [{ target: "usr/lib64", at: "/lib64" }],
  createdFiles: [{ fd: 3, at: "/etc/motd" }],
  env: { PATH: "/usr/bin", A: "x y" },
  cwd: "/srv/ws",
  command: ["claude", "-p", "--", "x"],
  hostname: "sandbox"
}

describe("bwrap arguments", () => {
  it("follow 2.8's table order, always unshare user/pid/ipc/uts, and set exactly env", () => {
    const args = bwrapArgs(plan)
    const at = (flag: string) => args.indexOf(flag)
    expect(args.slice(0, 5)).toEqual(["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup"])
    const order = ["--uid", "--cap-drop", "--cap-add", "--unshare-net", "--new-session", "--die-with-parent", "--proc", "--dev",
      "--tmpfs", "--ro-bind", "--bind", "--symlink", "--ro-bind-data", "--clearenv", "--setenv", "--chdir", "--"]
    for (let i = 1; i < order.length; i++) expect([order[i], at(order[i - 1]!) < at(order[i]!)]).toEqual([order[i], true])
    expect(args.slice(at("--cap-drop"), at("--unshare-net"))).toEqual(["--cap-drop", "ALL", "--cap-add", "CAP_NET_ADMIN", "--cap-add", "CAP_CHOWN"])
    expect(args.slice(at("--clearenv"), at("--chdir"))).toEqual(["--clearenv", "--setenv", "PATH", "/usr/bin", "--setenv", "A", "x y"])
    expect(args.slice(at("--"))).toEqual(["--", "claude", "-p", "--", "x"])
    expect(args.slice(at("--ro-bind-data"), at("--ro-bind-data") + 3)).toEqual(["--ro-bind-data", "3", "/etc/motd"])
  })

  it("leave out what the keys turn off", () => {
    const args = bwrapArgs({ ...plan, network: true, isolateTerminal: false, endsWithParent: false, linuxCapabilities: [] })
    for (const flag of ["--unshare-net", "--new-session", "--die-with-parent", "--cap-add"]) expect(args).not.toContain(flag)
    expect(args).toContain("--cap-drop")
  })
})

describe("how a launch ended", () => {
  const seen: Seen = { exit: 0, stopped: false, wallExpired: false, oomKilled: false, limits: {} }
  it("names the limit only when that limit was set and its sign was seen", () => {
    expect(decideEnding({ ...seen, exit: 152 })).toEqual({ outcome: "exited", exit: 152 })
    expect(decideEnding({ ...seen, exit: 152, limits: { cpuSeconds: 1 } })).toEqual({ outcome: "budget", limit: "cpu", exit: 152 })
    expect(decideEnding({ ...seen, exit: 153, limits: { fileSizeBytes: 1 } })).toMatchObject({ limit: "file_size" })
    expect(decideEnding({ ...seen, exit: 137, oomKilled: true, limits: { memoryBytes: 1 } })).toMatchObject({ limit: "memory" })
    expect(decideEnding({ ...seen, exit: 137, wallExpired: true, limits: { wallSeconds: 1 } })).toMatchObject({ limit: "wall" })
  })
  it("processes never ends a run: past it a fork fails, and the run ends as its process does (2.9)", () => {
    for (const exit of [0, 2, 254]) {
      expect(decideEnding({ ...seen, exit, limits: { processes: 3 } })).toEqual({ outcome: "exited", exit })
    }
    // another limit still ends it
    expect(decideEnding({ ...seen, exit: 137, wallExpired: true, limits: { processes: 3, wallSeconds: 1 } }))
      .toEqual({ outcome: "budget", limit: "wall", exit: 137 })
  })
  it("a stop wins over everything", () => {
    expect(decideEnding({ ...seen, exit: 137, stopped: true, wallExpired: true, oomKilled: true })).toEqual({ outcome: "stopped", exit: 137 })
  })
})

describe("ByteTail", () => {
  it("keeps exactly the last max bytes of any chunking, and counts every byte", () => {
    fc.assert(fc.property(fc.array(fc.uint8Array({ maxLength: 50 }), { maxLength: 30 }), fc.nat(120), (chunks, max) => {
      const t = new ByteTail(max)
      for (const c of chunks) t.push(c)
      const all = Buffer.concat(chunks)
      expect(Buffer.from(t.bytes())).toEqual(all.subarray(Math.max(0, all.length - max)))
      expect(t.total).toBe(all.length)
    }))
  })
})

describe("launch spec form", () => {
  const spec = shellSpec("/w", "/c", "true")
  it("names the key that is wrong", () => {
    const cases: Array<[string, Parameters<typeof checkSpecForm>[0]]> = [
      ["command", { ...spec, command: [] }],
      ["cwd", { ...spec, cwd: "relative" }],
      ["env", { ...spec, env: { "A=B": "x" } }],
      ["stdin", { ...spec, stdin: { lines: ["a\nb"], keepOpen: false } }],
      ["limits.cpu", { ...spec, limits: { cpuSeconds: 0 } }],
      ["limits.memory", { ...spec, limits: { memoryBytes: 1.5 } }],
      ["sandbox.linux_capabilities", { ...spec, sandbox: { ...spec.sandbox!, linuxCapabilities: ["CAP_EVERYTHING"] } }],
      ["sandbox.tmp", { ...spec, sandbox: { ...spec.sandbox!, tmp: "tmp" } }],
      ["sandbox.created_files", { ...spec, sandbox: { ...spec.sandbox!, createdFiles: [{ at: "x", text: "" }] } }]
    ]
    for (const [key, s] of cases) expect([key, checkSpecForm(s)?.key]).toEqual([key, key])
    expect(checkSpecForm(spec)).toBeUndefined()
  })
})
