/**
 * Issue 12: the seed's own examples (2.19) bind /usr and /etc/alternatives and nothing of
 * /bin, /lib or /lib64. On a merged-/usr host those are links into /usr, and the sandbox
 * gets the same links, so the examples run as written.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { make } from "../../layers/BwrapSandbox.js"
import { bwrapArgs } from "../../src/sandbox/BwrapArgs.js"
import { planMounts, readRootLinks, type RootLink, usrLinks } from "../../src/sandbox/MountPlan.js"
import type { SandboxSpec } from "../../services/SandboxLauncher.js"
import { decode, gid, makeRoot, uid } from "./support.js"

const { root, ws, care } = makeRoot("merged")
afterAll(() => Fs.rmSync(root, { recursive: true, force: true }))
const launcher = make()

/** Debian 12's root: /bin, /sbin, /lib, /lib64 are links into /usr */
const merged: ReadonlyArray<RootLink> = [
  { name: "bin", target: "usr/bin" },
  { name: "sbin", target: "usr/sbin" },
  { name: "lib", target: "usr/lib" },
  { name: "lib64", target: "usr/lib64" },
  { name: "initrd.img", target: "boot/initrd.img-6.1.0-18-amd64" },
  { name: "vmlinuz", target: "boot/vmlinuz-6.1.0-18-amd64" }
]
/** a root before the merge: /bin, /lib are directories; the only links point elsewhere */
const split: ReadonlyArray<RootLink> = [
  { name: "initrd.img", target: "boot/initrd.img-4.19.0-amd64" },
  { name: "vmlinuz", target: "/boot/vmlinuz-4.19.0-amd64" }
]

/** the 2.19 build's sandbox, its placeholders made concrete */
const buildSandbox = (): SandboxSpec => ({
  uid,
  gid,
  linuxCapabilities: [],
  network: false,
  isolateTerminal: true,
  endsWithParent: true,
  proc: "/proc",
  dev: "/dev",
  tmp: "/tmp",
  readOnly: ["/usr", "/etc/alternatives"],
  readWrite: [ws],
  homes: [],
  createdFiles: [],
  workspace: ws,
  ownPaths: [care]
})

const links = (sb: SandboxSpec, rootLinks: ReadonlyArray<RootLink>) => {
  const planned = planMounts(sb, rootLinks)
  if ("_tag" in planned) throw new Error(`refused: ${JSON.stringify(planned)}`)
  return planned.links
}

describe("a merged /usr: the sandbox gets the host's top-level links into /usr (pure)", () => {
  const places = { binds: ["/usr"], taken: ["/usr", "/proc", "/dev", "/tmp"] }

  it("on a merged host, each top-level link into /usr, exactly as the host's link says", () => {
    expect(usrLinks(places.binds, places.taken, merged)).toEqual([
      { target: "usr/bin", at: "/bin" },
      { target: "usr/sbin", at: "/sbin" },
      { target: "usr/lib", at: "/lib" },
      { target: "usr/lib64", at: "/lib64" }
    ])
    // an absolute link is mirrored as absolute
    expect(usrLinks(places.binds, places.taken, [{ name: "lib32", target: "/usr/lib32" }]))
      .toEqual([{ target: "/usr/lib32", at: "/lib32" }])
  })

  it("on a host before the merge, none", () => {
    expect(usrLinks(places.binds, places.taken, split)).toEqual([])
    expect(usrLinks(places.binds, places.taken, [])).toEqual([])
  })

  it("none where the sandbox does not bind /usr itself", () => {
    expect(usrLinks([], ["/proc", "/dev", "/tmp"], merged)).toEqual([])
    expect(usrLinks(["/usr/lib"], ["/usr/lib"], merged)).toEqual([])
  })

  it("a link that only looks like one into /usr is not one", () => {
    expect(usrLinks(places.binds, places.taken, [
      { name: "opt", target: "usrlocal/opt" },
      { name: "x", target: "usr/../etc" },
      { name: "y", target: "../usr/bin" }
    ])).toEqual([{ target: "../usr/bin", at: "/y" }])
  })

  it("none at a place the sandbox uses itself: a bound path, or anything within it", () => {
    const got = usrLinks(places.binds, [...places.taken, "/bin", "/lib/x86_64-linux-gnu/libc.so.6", "/sbin/ldconfig"], merged)
    expect(got).toEqual([{ target: "usr/lib64", at: "/lib64" }])
  })

  it("planMounts adds them for the 2.19 build's sandbox on a merged host, and none on a split one", () => {
    expect(links(buildSandbox(), merged)).toEqual([
      { target: "usr/bin", at: "/bin" },
      { target: "usr/sbin", at: "/sbin" },
      { target: "usr/lib", at: "/lib" },
      { target: "usr/lib64", at: "/lib64" }
    ])
    expect(links(buildSandbox(), split)).toEqual([])
    // /usr read-write counts as bound too
    expect(links({ ...buildSandbox(), readOnly: [], readWrite: ["/usr", ws] }, merged)).toHaveLength(4)
    // no /usr, no links
    expect(links({ ...buildSandbox(), readOnly: ["/etc/alternatives"] }, merged)).toEqual([])
  })

  it("planMounts leaves out a link where the sandbox binds, makes or mounts something itself", () => {
    // the session example lists /bin and /lib: only /sbin and /lib64 come as links
    expect(links({ ...buildSandbox(), readOnly: ["/usr", "/bin", "/lib", "/etc/resolv.conf"] }, merged)).toEqual([
      { target: "usr/sbin", at: "/sbin" },
      { target: "usr/lib64", at: "/lib64" }
    ])
    expect(links({ ...buildSandbox(), tmp: "/lib64/tmp", createdFiles: [{ at: "/sbin/x", text: "" }] }, merged)).toEqual([
      { target: "usr/bin", at: "/bin" },
      { target: "usr/lib", at: "/lib" }
    ])
  })

  it("bwrap makes each link after the bound paths and before the created files", () => {
    const args = bwrapArgs({
      uid: 1000, gid: 1000, linuxCapabilities: [], network: false, isolateTerminal: true, endsWithParent: true,
      proc: "/proc", dev: "/dev", tmp: "/tmp",
      mounts: [{ mode: "ro", source: "/usr", dest: "/usr" }],
      links: [{ target: "usr/bin", at: "/bin" }, { target: "usr/lib64", at: "/lib64" }],
      createdFiles: [{ fd: 3, at: "/etc/motd" }],
      env: {}, cwd: "/", command: ["sh"], hostname: "sandbox"
    })
    const i = args.indexOf("--symlink")
    expect(args.slice(i, i + 6)).toEqual(["--symlink", "usr/bin", "/bin", "--symlink", "usr/lib64", "/lib64"])
    expect(args.indexOf("--ro-bind")).toBeLessThan(i)
    expect(args.indexOf("--ro-bind-data")).toBeGreaterThan(i)
  })

  it("the host's root is read as it is: links with their text, nothing else", () => {
    const fake = Path.join(root, "fake-root")
    Fs.mkdirSync(Path.join(fake, "usr", "bin"), { recursive: true })
    Fs.mkdirSync(Path.join(fake, "etc"))
    Fs.symlinkSync("usr/bin", Path.join(fake, "bin"))
    Fs.symlinkSync("/usr/lib64", Path.join(fake, "lib64"))
    Fs.writeFileSync(Path.join(fake, "file"), "")
    expect([...readRootLinks(fake)].sort((a, b) => a.name.localeCompare(b.name))).toEqual([
      { name: "bin", target: "usr/bin" },
      { name: "lib64", target: "/usr/lib64" }
    ])
  })
})

describe("the 2.19 examples run as written on this host", () => {
  it.live("this host has a merged /usr (else this test proves nothing)", () =>
    Effect.sync(() => {
      for (const d of ["/bin", "/lib", "/lib64"]) expect(Fs.lstatSync(d).isSymbolicLink()).toBe(true)
    }))

  it.live("the build's sandbox (/usr and /etc/alternatives read-only) runs sh", () =>
    Effect.gen(function*() {
      const r = yield* launcher.run({
        command: ["sh", "-c", "echo ok; ls -ld /bin /lib64 | cut -c1"],
        env: { PATH: "/usr/bin:/bin", HOME: ws },
        cwd: ws,
        sandbox: buildSandbox(),
        limits: { wallSeconds: 60, cpuSeconds: 3000, processes: 256, fileSizeBytes: 2 * 1024 ** 3 },
        stdin: { lines: [], keepOpen: false },
        keep: { stdout: 4096, stderr: 4096 }
      })
      expect(decode(r.stderr.tail)).toBe("")
      expect(r.ending).toEqual({ outcome: "exited", exit: 0 })
      expect(decode(r.stdout.tail)).toBe("ok\nl\nl\n")
    }))

  it.live("the session's sandbox (/usr, /bin, /lib, the resolver, certificates, the release, a home) runs sh", () =>
    Effect.gen(function*() {
      const release = Path.join(root, "release")
      const home = Path.join(root, "agent-home")
      Fs.mkdirSync(release)
      Fs.mkdirSync(home)
      const r = yield* launcher.run({
        command: ["/bin/sh", "-c", "echo ok"],
        env: {},
        cwd: ws,
        sandbox: {
          ...buildSandbox(),
          network: true,
          readOnly: ["/usr", "/bin", "/lib", "/etc/resolv.conf", "/etc/ssl/certs", release],
          readWrite: [ws],
          homes: [home],
          release,
          ownPaths: [care, release]
        },
        limits: { wallSeconds: 60 },
        stdin: { lines: [], keepOpen: false },
        keep: { stdout: 4096, stderr: 4096 }
      })
      expect(decode(r.stderr.tail)).toBe("")
      expect(r.ending).toEqual({ outcome: "exited", exit: 0 })
      expect(decode(r.stdout.tail)).toBe("ok\n")
    }))
})
