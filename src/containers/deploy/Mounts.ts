/**
 * A container's writable layer: an ext4 file system of exactly `disk` bytes on a loop device
 * (no journal: every byte is the container's), holding the overlay's upper and work directories
 * over the image's read-only rootfs. A tmpfs would count against the memory limit instead.
 */

import * as Fs from "node:fs"
import { exec, pause } from "./Exec.js"

/** the mount points under DIR, deepest first, as the host's mount table lists them */
export const mountsUnder = (dir: string, mountinfo: string = Fs.readFileSync("/proc/self/mountinfo", "utf8")): ReadonlyArray<string> => {
  const prefix = dir.endsWith("/") ? dir : dir + "/"
  const points: Array<string> = []
  for (const line of mountinfo.split("\n")) {
    const point = line.split(" ")[4]
    if (point === undefined) continue
    // mountinfo escapes space, tab, newline and backslash as octal
    const decoded = point.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8)))
    if (decoded === dir || decoded.startsWith(prefix)) points.push(decoded)
  }
  return points.sort((a, b) => b.length - a.length)
}

/** a path the overlay's option string can carry: no comma, colon or backslash */
const overlayPath = (p: string): string => {
  if (/[,:\\]/.test(p)) throw new Error(`the path ${p} has a comma, colon or backslash, which an overlay mount cannot name`)
  return p
}

/** makes a disk file of BYTES with its (empty) file system */
export const makeDiskFile = async (file: string, bytes: number): Promise<void> => {
  const fd = Fs.openSync(file, "wx", 0o600)
  try {
    Fs.ftruncateSync(fd, bytes)
  } finally {
    Fs.closeSync(fd)
  }
  try {
    await exec("mkfs.ext4", ["-q", "-F", "-m", "0", "-O", "^has_journal", "-E", "root_owner=0:0", file])
  } catch (e) {
    throw new Error(`a disk of ${bytes} bytes could not be made (too small for a file system?): ${(e as Error).message}`)
  }
}

/**
 * The container's disk and root file system: the disk file made (or READY, one made ahead of the
 * same size, taken: DiskPool.ts), then in one start of the static helper `mounts`
 * (deploy/mounts.c) the disk mounted at `disk` on a loop device that frees itself once unmounted,
 * and the overlay of `lower` (the image's rootfs) with its upper and work directories on the disk
 * mounted at `merged`.
 */
export const mountDiskAndOverlay = async (
  mounts: string,
  paths: { readonly file: string; readonly disk: string; readonly lower: string; readonly merged: string },
  bytes: number,
  trace: (step: string) => void = () => {},
  ready?: string
): Promise<void> => {
  if (ready !== undefined) {
    Fs.renameSync(ready, paths.file)
    trace("disk taken")
  } else {
    await makeDiskFile(paths.file, bytes)
    trace("disk made")
  }
  // the overlay's option string names them: checked before anything is mounted
  await exec(mounts, [paths.file, overlayPath(paths.disk), overlayPath(paths.lower), overlayPath(paths.merged)])
  trace("disk and overlay mounted")
}

/**
 * A spare's staging mount: a tmpfs, shared, so that what is mounted on it later appears in the
 * sandbox's copy of it (a slave). Small (the container's root may write into it, and it is not
 * the container's disk); no other container has a copy of it (each sandbox lets go of the host's tree).
 */
export const mountStaging = async (staging: string): Promise<void> => {
  Fs.mkdirSync(staging)
  await exec("mount", ["-t", "tmpfs", "-o", "size=64k,nr_inodes=1024,mode=0700,nosuid,nodev,noexec", "--make-shared", "tmpfs", staging])
}

/** the loop devices whose backing file is FILE */
export const loopsOf = async (file: string): Promise<ReadonlyArray<string>> => {
  const out = await exec("losetup", ["-j", file]).catch(() => "")
  return out.split("\n").map((l) => l.split(":")[0]!).filter((d) => d.startsWith("/dev/loop"))
}

/**
 * Unmounts everything under DIR (deepest first) and frees the loop devices of its disk file.
 * A mount the container's processes held stays busy a moment after they ended (the kernel lets
 * go of a dead namespace's mounts a little later): it is tried again, and only then detached
 * lazily, to be freed once it is let go.
 */
export const unmountAll = async (dir: string, diskFile: string): Promise<ReadonlyArray<string>> => {
  const problems: Array<string> = []
  for (const point of mountsUnder(dir)) {
    for (let attempt = 0; ; attempt++) {
      try {
        await exec("umount", [point])
        break
      } catch (e) {
        if (attempt < 100) {
          await pause(Math.min(1 + attempt, 20))
          continue
        }
        try {
          await exec("umount", ["-l", point])
        } catch {
          problems.push((e as Error).message)
        }
        break
      }
    }
  }
  for (let attempt = 0; ; attempt++) {
    const loops = await loopsOf(diskFile)
    if (loops.length === 0) break
    // mount -o loop set them to detach themselves once free
    if (attempt < 100) {
      await pause(Math.min(1 + attempt, 20))
      continue
    }
    for (const loop of loops) {
      try {
        await exec("losetup", ["-d", loop])
      } catch (e) {
        problems.push((e as Error).message)
      }
    }
    break
  }
  return problems
}
