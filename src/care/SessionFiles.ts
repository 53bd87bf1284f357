// ROOT/care/RUN.session: a session in this host's care, as the node's rounds need it to decide
// what each arrival is given to (2.11). Its watcher writes it before it writes started (so no
// arrival after started can find the session missing) and again with started's place in the
// server's order once the server has it; it removes it when the run is over. Plain node only:
// the hook's fast path asks whether any exists on every receipt.

import * as Fs from "node:fs"
import * as Path from "node:path"
import type { SessionFile } from "../../services/CareDirectory.js"
import { releasePaths } from "../release/ReleasePaths.js"

// the file's form is the CareDirectory service's contract
export type { SessionFile }

const suffix = ".session"

export const sessionFileOf = (root: string, run: string): string => Path.join(releasePaths(root).care, `${run}${suffix}`)

export const writeSessionFile = (root: string, session: SessionFile): void => {
  const file = sessionFileOf(root, session.run)
  const temporary = `${file}.${process.pid}.tmp`
  Fs.writeFileSync(temporary, JSON.stringify(session), { mode: 0o600 })
  Fs.renameSync(temporary, file)
}

export const removeSessionFile = (root: string, run: string): void => {
  Fs.rmSync(sessionFileOf(root, run), { force: true })
}

/** Whether any session is in care: the hook then reads every arrival, not only messages. */
export const anySession = (root: string): boolean => {
  try {
    return Fs.readdirSync(releasePaths(root).care).some((name) => name.endsWith(suffix))
  } catch {
    return false
  }
}

/** Every session file in care, sorted by run; an unreadable one is left out. */
export const readSessionFiles = (root: string): ReadonlyArray<SessionFile> => {
  let names: Array<string>
  try {
    names = Fs.readdirSync(releasePaths(root).care).filter((name) => name.endsWith(suffix)).sort()
  } catch {
    return []
  }
  const sessions: Array<SessionFile> = []
  for (const name of names) {
    try {
      const parsed = JSON.parse(Fs.readFileSync(Path.join(releasePaths(root).care, name), "utf8")) as SessionFile
      if (typeof parsed.run === "string" && typeof parsed.processUser === "string") sessions.push(parsed)
    } catch {
      // being replaced, or damaged: its watcher writes it again
    }
  }
  return sessions
}
