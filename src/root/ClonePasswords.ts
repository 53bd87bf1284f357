// The passwords file of a node on a clone's host (2.15): {"user": LOGIN, "password": TEXT},
// the node user's password on the server and nothing else (version 2 keeps no process user's
// password). It is refused, and nothing is done, unless it is a regular file owned by the
// account OCX runs as and readable by that account alone: a file others may read or write
// would hand the node user's writes to them.

import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ClonePlace } from "../../services/Hosts.js"
import type { NodeConfig } from "./NodeConfig.js"

export interface Passwords {
  /** the file, its links followed */
  readonly file: string
  readonly user: string
  readonly password: string
}

export type PasswordsReading =
  | { readonly _tag: "Passwords"; readonly passwords: Passwords }
  | { readonly _tag: "Refused"; readonly why: string }

const refused = (why: string): PasswordsReading => ({ _tag: "Refused", why })

const loginPattern = /^[^\s\x00-\x1f"'\\*]{1,64}$/

/** Reads and checks the passwords file; `uid` is the running account's (process.getuid()). */
export const readPasswordsFile = (given: string, uid: number | undefined = process.getuid?.()): PasswordsReading => {
  const absolute = Path.resolve(given)
  let file: string
  try {
    file = Fs.realpathSync(absolute)
  } catch {
    return refused(`the passwords file ${absolute} does not exist`)
  }
  // opened once without following a link swapped in after realpath, then judged by that descriptor
  let fd: number
  try {
    fd = Fs.openSync(file, Fs.constants.O_RDONLY | Fs.constants.O_NOFOLLOW)
  } catch (e) {
    return refused(`the passwords file ${file} cannot be opened: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`)
  }
  let text: string
  try {
    const stat = Fs.fstatSync(fd)
    if (!stat.isFile()) return refused(`the passwords file ${file} is not a regular file`)
    if (uid !== undefined && stat.uid !== uid) {
      return refused(`the passwords file ${file} belongs to uid ${stat.uid}, not to this account (uid ${uid}): chown it to the account that runs ocx2 node`)
    }
    const mode = stat.mode & 0o777
    if ((mode & 0o077) !== 0) {
      return refused(`the passwords file ${file} has mode ${mode.toString(8).padStart(4, "0")}: others may read or write it; chmod 600 ${file}`)
    }
    text = Fs.readFileSync(fd, "utf8")
  } finally {
    Fs.closeSync(fd)
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    return refused(`the passwords file ${file} is not JSON: ${(e as Error).message}`)
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    return refused(`the passwords file ${file} is not a JSON object {"user": LOGIN, "password": TEXT}`)
  }
  const object = json as Record<string, unknown>
  const extra = Object.keys(object).filter((k) => k !== "user" && k !== "password")
  if (extra.includes("runs")) {
    return refused(`the passwords file ${file} has "runs": version 2 keeps no process user's password on a host (docs/protocol.md 2.15); remove it`)
  }
  if (extra.length > 0) return refused(`the passwords file ${file} has keys it does not define: ${extra.join(", ")}`)
  if (typeof object["user"] !== "string" || !loginPattern.test(object["user"])) {
    return refused(`the passwords file ${file} has no "user" that is a Fossil login`)
  }
  if (typeof object["password"] !== "string" || object["password"] === "") {
    return refused(`the passwords file ${file} has no "password" text`)
  }
  return { _tag: "Passwords", passwords: { file, user: object["user"], password: object["password"] } }
}

/** Where the node on a clone's host acts, for the Hosts service: its clone and ROOT, the server, the node user's password. */
export const clonePlaceOf = (config: NodeConfig, passwords: Passwords): ClonePlace => ({
  repository: config.repository,
  root: config.root,
  serverUrl: config.serverUrl ?? "",
  user: passwords.user,
  password: passwords.password
})
