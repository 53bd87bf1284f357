import * as Fs from "node:fs"
import * as Path from "node:path"
import { maxMappedId } from "../proxy/Launch.js"

/**
 * An image config's `User` resolved in the image's own rootfs, as the OCI image spec reads it:
 * `user`, `uid`, `user:group`, `uid:gid`, `user:gid` or `uid:group`; a name is looked up in the
 * rootfs's /etc/passwd (or /etc/group); a user without a group takes its passwd entry's group, or
 * 0 when it has none. The files are the image's: one reached through a symbolic link is not read
 * (it could name a file of the host), nor one that is not a regular file.
 */
export interface ImageUser {
  readonly uid: number
  readonly gid: number
}

/** the lines of ROOTFS/etc/NAME split at ":", or a reason it cannot be read */
const table = (rootfs: string, name: "passwd" | "group"): ReadonlyArray<ReadonlyArray<string>> | string => {
  let at = rootfs
  for (const part of ["etc", name]) {
    at = Path.join(at, part)
    let stat: Fs.Stats
    try {
      stat = Fs.lstatSync(at)
    } catch {
      return `the image has no /etc/${name}`
    }
    if (stat.isSymbolicLink()) return `the image's /${Path.relative(rootfs, at)} is a symbolic link, which is not followed`
    if (part === "etc" ? !stat.isDirectory() : !stat.isFile()) return `the image's /${Path.relative(rootfs, at)} is not a ${part === "etc" ? "directory" : "file"}`
  }
  return Fs.readFileSync(at, "utf8").split("\n").filter((l) => l !== "" && !l.startsWith("#")).map((l) => l.split(":"))
}

const numeric = (text: string): number | undefined => (/^\d+$/.test(text) ? Number(text) : undefined)

/** undefined for an image that names no User (root); else the ids, or what is wrong */
export const resolveImageUser = (rootfs: string, user: string): ImageUser | undefined | string => {
  if (user === "") return undefined
  const colon = user.indexOf(":")
  const userPart = colon < 0 ? user : user.slice(0, colon)
  const groupPart = colon < 0 ? undefined : user.slice(colon + 1)
  if (userPart === "" || groupPart === "") return `the image's User ${JSON.stringify(user)} is not user[:group]`
  let uid = numeric(userPart)
  let primary: number | undefined
  const passwd = table(rootfs, "passwd")
  const entry = typeof passwd === "string" ? undefined : passwd.find((f) => (uid === undefined ? f[0] === userPart : numeric(f[2] ?? "") === uid))
  if (uid === undefined) {
    if (typeof passwd === "string") return `the image's User ${JSON.stringify(user)} names a user, and ${passwd}`
    if (entry === undefined) return `the image's User ${JSON.stringify(user)} names a user its /etc/passwd does not have`
    uid = numeric(entry[2] ?? "")
    if (uid === undefined) return `the image's /etc/passwd gives ${userPart} no numeric uid`
  }
  if (entry !== undefined) primary = numeric(entry[3] ?? "")
  let gid: number | undefined
  if (groupPart === undefined) gid = primary ?? 0
  else {
    gid = numeric(groupPart)
    if (gid === undefined) {
      const groups = table(rootfs, "group")
      if (typeof groups === "string") return `the image's User ${JSON.stringify(user)} names a group, and ${groups}`
      const g = groups.find((f) => f[0] === groupPart)
      gid = g === undefined ? undefined : numeric(g[2] ?? "")
      if (gid === undefined) return `the image's User ${JSON.stringify(user)} names a group its /etc/group does not have`
    }
  }
  if (uid > maxMappedId || gid > maxMappedId) return `the image's User ${JSON.stringify(user)} is uid ${uid} gid ${gid}: a container maps ids 0 to ${maxMappedId} only`
  return { uid, gid }
}
