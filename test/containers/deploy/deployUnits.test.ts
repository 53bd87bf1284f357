import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import { imageLaunch } from "../../../src/containers/deploy/ImageLaunch.js"
import { resolveImageUser } from "../../../src/containers/deploy/ImageUser.js"
import { parseConfig } from "../../../src/containers/OciImage.js"
import { mountsUnder } from "../../../src/containers/deploy/Mounts.js"
import { parseLdd } from "../../../src/containers/deploy/ProxyKit.js"
import { sandboxArgs } from "../../../src/containers/deploy/SandboxArgs.js"
import { decodeLaunch, encodeLaunch, envRecord } from "../../../src/containers/proxy/Launch.js"
import { obtained } from "./deployWorld.js"

describe("the deploy's pure parts", () => {
  it("the launch file: what decodes, and what is wrong with what does not", () => {
    const launch = { command: ["/bin/sh", "-c", "x"], env: ["PATH=/bin", "A=b=c"], workingDir: "/w", secrets: `{"k":"read"}` }
    expect(decodeLaunch(encodeLaunch(launch))).toEqual(launch)
    expect(decodeLaunch("nope")).toBe("the launch file is not JSON")
    expect(decodeLaunch(JSON.stringify({ ...launch, command: [] }))).toBe("the launch's command is not a list of one or more strings")
    expect(decodeLaunch(JSON.stringify({ ...launch, env: ["NOEQUALS"] }))).toBe("the launch's env is not a list of NAME=value")
    expect(decodeLaunch(JSON.stringify({ ...launch, workingDir: "w" }))).toBe("the launch's workingDir is not an absolute path")
    expect(decodeLaunch(JSON.stringify({ ...launch, secrets: "[]" }))).toBe("the launch's secrets is not a JSON object")
    expect(envRecord(["A=1", "B=x=y", "A=2"])).toEqual({ A: "2", B: "x=y" })
  })

  it("an image's launch: entrypoint then cmd, its env and working directory, its declared secrets", () => {
    const image = obtained({ rootfs: "/", entrypoint: ["/bin/tool"], cmd: ["--serve"], env: ["PATH=/bin"], workingDir: "", labels: { "org.ocx2.secrets": `{"api":"read"}` } })
    expect(imageLaunch(image)).toEqual({ rootfs: "/", launch: { command: ["/bin/tool", "--serve"], env: ["PATH=/bin"], workingDir: "/", secrets: `{"api":"read"}` } })
    expect(imageLaunch({ ...image, entrypoint: [], cmd: [] } as typeof image)).toMatch(/names no Entrypoint and no Cmd/)
    expect(imageLaunch(obtained({ rootfs: "/", entrypoint: ["/x"], cmd: [], env: [], workingDir: "/", labels: { "org.ocx2.secrets": "[1]" } }))).toMatch(/org\.ocx2\.secrets is not a JSON object/)
    const { rootfs: _, ...noRootfs } = image
    expect(imageLaunch(noRootfs as typeof image)).toMatch(/was given with no unpacked rootfs/)
  })

  it("an image's User resolved in its own /etc/passwd and /etc/group, as the OCI image spec reads it; a link out of the image is not followed", () => {
    const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-user-"))
    try {
      Fs.mkdirSync(Path.join(root, "etc"))
      Fs.writeFileSync(Path.join(root, "etc", "passwd"), "root:x:0:0::/root:/bin/sh\napp:x:1234:2345::/tmp:/bin/sh\n")
      Fs.writeFileSync(Path.join(root, "etc", "group"), "root:x:0:\nstaff:x:3456:app\n")
      expect(resolveImageUser(root, "")).toBeUndefined()
      expect(resolveImageUser(root, "1000")).toEqual({ uid: 1000, gid: 0 })
      expect(resolveImageUser(root, "1234")).toEqual({ uid: 1234, gid: 2345 })
      expect(resolveImageUser(root, "app")).toEqual({ uid: 1234, gid: 2345 })
      expect(resolveImageUser(root, "app:staff")).toEqual({ uid: 1234, gid: 3456 })
      expect(resolveImageUser(root, "app:77")).toEqual({ uid: 1234, gid: 77 })
      expect(resolveImageUser(root, "1000:staff")).toEqual({ uid: 1000, gid: 3456 })
      expect(resolveImageUser(root, "ghost")).toBe(`the image's User "ghost" names a user its /etc/passwd does not have`)
      expect(resolveImageUser(root, "app:ghosts")).toBe(`the image's User "app:ghosts" names a group its /etc/group does not have`)
      expect(resolveImageUser(root, ":staff")).toBe(`the image's User ":staff" is not user[:group]`)
      expect(resolveImageUser(root, "70000")).toBe(`the image's User "70000" is uid 70000 gid 0: a container maps ids 0 to 65535 only`)
      const image = obtained({ rootfs: root, entrypoint: ["/x"], cmd: [], env: [], workingDir: "/", user: "app:staff" })
      expect(imageLaunch(image)).toEqual({ rootfs: root, launch: { command: ["/x"], env: [], workingDir: "/", secrets: "{}", user: { uid: 1234, gid: 3456 } } })
      // root is the sandbox's own: nothing for the deployer to do
      expect(imageLaunch({ ...image, user: "0:0" })).toEqual({ rootfs: root, launch: { command: ["/x"], env: [], workingDir: "/", secrets: "{}" } })
      // the host's /etc/passwd has a user this image's does not: a link to it is not read
      Fs.rmSync(Path.join(root, "etc", "passwd"))
      Fs.symlinkSync("/etc/passwd", Path.join(root, "etc", "passwd"))
      expect(resolveImageUser(root, "root")).toBe(`the image's User "root" names a user, and the image's /etc/passwd is a symbolic link, which is not followed`)
      Fs.rmSync(Path.join(root, "etc"), { recursive: true })
      Fs.symlinkSync("/etc", Path.join(root, "etc"))
      expect(resolveImageUser(root, "app")).toBe(`the image's User "app" names a user, and the image's /etc is a symbolic link, which is not followed`)
      expect(resolveImageUser(root, "1000")).toEqual({ uid: 1000, gid: 0 })
    } finally {
      Fs.rmSync(root, { recursive: true, force: true })
    }
    // the config's User as the image store reads it, for the deployer to resolve
    const config = (run: Record<string, unknown>) => Buffer.from(JSON.stringify({ rootfs: { type: "layers", diff_ids: [] }, config: { Cmd: ["/x"], ...run } }))
    expect(parseConfig(config({ User: "app:staff" }))).toMatchObject({ user: "app:staff" })
    expect(parseConfig(config({}))).toMatchObject({ user: "" })
    expect(parseConfig(config({ User: 1000 }))).toBe("the config's User is not a string")
    const launch = { command: ["/x"], env: [], workingDir: "/", secrets: "{}", user: { uid: 1234, gid: 3456 } }
    expect(decodeLaunch(encodeLaunch(launch))).toEqual(launch)
    expect(decodeLaunch(JSON.stringify({ ...launch, user: { uid: -1, gid: 0 } }))).toBe("the launch's user is not {uid, gid}, each 0 to 65535")
    const args = sandboxArgs({ merged: "/m", kit: "/k", launchFile: "/l", memoryEvents: undefined, mounts: [], fuse: false, command: ["/p"], infoFd: 3, userns: 4 })
    expect(args.slice(0, 2)).toEqual(["--userns", "4"])
    expect(args).not.toContain("--unshare-user")
  })

  it("ldd's listing: the libraries by name, and the loader", () => {
    const listed = parseLdd("\tlinux-vdso.so.1 (0x00007ffd)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f01)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f02)\n")
    expect(listed).toEqual({ libraries: [{ name: "libc.so.6", path: "/lib/x86_64-linux-gnu/libc.so.6" }], loader: "/lib64/ld-linux-x86-64.so.2" })
  })

  it("the mounts under a directory, deepest first, and no mere prefix of its name", () => {
    const info = [
      "36 25 0:32 / /r/containers/a/disk rw - ext4 /dev/loop0 rw",
      "37 25 0:33 / /r/containers/a/merged rw - overlay overlay rw",
      "38 25 0:34 / /r/containers/a/merged/x\\040y rw - tmpfs tmpfs rw",
      "39 25 0:35 / /r/containers/ab rw - tmpfs tmpfs rw"
    ].join("\n")
    expect(mountsUnder("/r/containers/a", info)).toEqual(["/r/containers/a/merged/x y", "/r/containers/a/merged", "/r/containers/a/disk"])
  })

  it("bwrap's arguments: every namespace, no environment, the kit and launch read-only, volumes by their mode", () => {
    const args = sandboxArgs({
      merged: "/m", kit: "/k", launchFile: "/l", memoryEvents: "/cg/memory.oom_control",
      mounts: [{ hostPath: "/v1", containerPath: "/data", readOnly: false }, { hostPath: "/v2", containerPath: "/ro", readOnly: true }],
      fuse: true, command: ["/.proxy/node"], infoFd: 3
    }).join(" ")
    for (const flag of ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--clearenv", "--die-with-parent"]) expect(args).toContain(flag)
    expect(args).toContain("--bind /m / --proc /proc --dev /dev --dev-bind /dev/fuse /dev/fuse --ro-bind /k /.proxy --ro-bind /l /.proxy/launch.json --ro-bind /cg/memory.oom_control /.proxy/memory-events")
    expect(args).toContain("--bind /v1 /data --ro-bind /v2 /ro")
    expect(args.endsWith("--info-fd 3 --chdir / -- /.proxy/node")).toBe(true)
    expect(args).not.toContain("--setenv")
  })
})
