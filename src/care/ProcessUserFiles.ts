// ROOT/care/~USER.lock and ~USER.waiting (one run per process user in a node's care, 2.13). "~"
// begins no run's name, and the login is written as encodeURIComponent writes it, so every login
// names files of its own and the login is read back from the name.

import * as Fs from "node:fs"
import * as Path from "node:path"
import type { WaitingRun } from "../../services/CareDirectory.js"

// the queue's line is the CareDirectory service's contract
export type { WaitingRun }

export const processUserFileName = (user: string, ext: "lock" | "waiting"): string => `~${encodeURIComponent(user)}.${ext}`

/** The runs waiting for each process user whose run is in care, as ROOT/care holds them now. */
export const waitingRuns = (careDir: string): ReadonlyArray<{ readonly user: string; readonly runs: ReadonlyArray<string> }> => {
  let names: Array<string>
  try {
    names = Fs.readdirSync(careDir).filter((n) => n.startsWith("~") && n.endsWith(".waiting")).sort()
  } catch {
    return []
  }
  return names.flatMap((name) => {
    let user: string
    let text: string
    try {
      user = decodeURIComponent(name.slice(1, -".waiting".length))
      text = Fs.readFileSync(Path.join(careDir, name), "utf8")
    } catch {
      return [] // taken meanwhile, or not ours
    }
    const runs = inServerOrder(text.split("\n").flatMap((line) => parseWaitingLine(line) ?? [])).map((w) => w.run)
    return runs.length > 0 ? [{ user, runs }] : []
  })
}

// ---------- the queue of runs waiting for their process user (issue 13) ----------
//
// A run whose process user has another run in care is written down in ~USER.waiting with its place
// in the server's order; when that run is over, ONE waiting run is handed to a watcher: the first in
// the server's order. ~USER.handed says that a run was just handed to a watcher that has not taken
// the user's lock yet, so that a round deciding the next arrival writes it down instead of starting a
// second watcher that would only find the user busy. The record stays the truth: a line lost here
// leaves an open run, which the node's next start decides again.


const userPath = (careDir: string, user: string, ext: "lock" | "waiting") => Path.join(careDir, processUserFileName(user, ext))
const handedPath = (careDir: string, user: string) => Path.join(careDir, `~${encodeURIComponent(user)}.handed`)

export const waitingLine = (w: WaitingRun): string =>
  JSON.stringify({ run: w.run, ...(w.personStart === true ? { personStart: true } : {}), ...(w.at !== undefined ? { at: w.at } : {}) })

/** A waiting line read back; undefined when it is damaged (it is dropped: the record keeps the run). */
export const parseWaitingLine = (line: string): WaitingRun | undefined => {
  try {
    const w = JSON.parse(line) as { run?: unknown; personStart?: unknown; at?: unknown }
    if (typeof w?.run !== "string") return undefined
    const at = Array.isArray(w.at) && w.at.length === 2 && w.at.every((n) => typeof n === "number") ? [w.at[0] as number, w.at[1] as number] as const : undefined
    return { run: w.run, ...(w.personStart === true ? { personStart: true } : {}), ...(at !== undefined ? { at } : {}) }
  } catch {
    return undefined
  }
}

const readLines = (file: string): Array<string> => {
  try {
    return Fs.readFileSync(file, "utf8").split("\n").filter((l) => l !== "")
  } catch {
    return []
  }
}

/** The runs waiting for the user, first in the server's order (a line without a place keeps its turn in the file, after those with one). */
export const inServerOrder = (runs: ReadonlyArray<WaitingRun>): Array<WaitingRun> => {
  const seen = new Set<string>()
  const unique = runs.filter((w) => (seen.has(w.run) ? false : (seen.add(w.run), true)))
  return unique
    .map((w, i) => ({ w, i }))
    .sort((a, b) => {
      const x = a.w.at, y = b.w.at
      if (x !== undefined && y !== undefined) return x[0] - y[0] || x[1] - y[1] || a.i - b.i
      if (x !== undefined) return -1
      if (y !== undefined) return 1
      return a.i - b.i
    })
    .map(({ w }) => w)
}

/** The runs written down as waiting for the user now, first in the server's order. */
export const readWaiting = (careDir: string, user: string): Array<WaitingRun> =>
  inServerOrder(readLines(userPath(careDir, user, "waiting")).flatMap((l) => parseWaitingLine(l) ?? []))

/** Writes the run down as waiting for the user, once: a run already written down is not written again. */
export const appendWaitingOnce = (careDir: string, user: string, w: WaitingRun): void => {
  if (readWaiting(careDir, user).some((x) => x.run === w.run)) return
  Fs.appendFileSync(userPath(careDir, user, "waiting"), `${waitingLine(w)}\n`, { mode: 0o600 })
}

/**
 * Takes the first run waiting for the user (in the server's order) and leaves the others waiting.
 * The file is renamed first, so a line appended meanwhile lands in a new file; the others are
 * appended back to it. Two takers never take one line.
 */
export const takeNextWaiting = (careDir: string, user: string): { readonly next: WaitingRun | undefined; readonly dropped: number } => {
  const file = userPath(careDir, user, "waiting")
  const taken = `${file}.${process.pid}.${Date.now()}.taken`
  try {
    Fs.renameSync(file, taken)
  } catch {
    return { next: undefined, dropped: 0 }
  }
  const lines = readLines(taken)
  const parsed = lines.map(parseWaitingLine)
  const ordered = inServerOrder(parsed.flatMap((w) => w ?? []))
  const [next, ...rest] = ordered
  if (rest.length > 0) Fs.appendFileSync(file, rest.map((w) => `${waitingLine(w)}\n`).join(""), { mode: 0o600 })
  Fs.rmSync(taken, { force: true })
  return { next, dropped: parsed.filter((w) => w === undefined).length }
}

/**
 * Takes `run` out of the user's waiting runs (a watcher that wrote its run down and then took the
 * lock after all): left there, the run would be handed on again once it is over. Called holding
 * the user's turn (src/care/UserTurn.ts), as every writer of the file is.
 */
export const removeWaiting = (careDir: string, user: string, run: string): void => {
  const file = userPath(careDir, user, "waiting")
  const lines = readLines(file)
  const kept = lines.filter((l) => parseWaitingLine(l)?.run !== run)
  if (kept.length === lines.length) return
  const temporary = `${file}.${process.pid}.part`
  Fs.writeFileSync(temporary, kept.map((l) => `${l}\n`).join(""), { mode: 0o600 })
  Fs.renameSync(temporary, file)
}

/** How long a hand-off counts as on its way to the user's lock (a watcher starts in well under this). */
export const handedForMillis = 10_000

/** Says that `run` was just handed to a watcher for the user (it has not taken the user's lock yet). */
export const markHanded = (careDir: string, user: string, run: string): void => {
  try {
    Fs.writeFileSync(handedPath(careDir, user), `${run}\n`, { mode: 0o600 })
  } catch {
    // a care directory gone: nothing waits in it
  }
}

/** The run handed lately to a watcher for the user, if one is still on its way to the user's lock. */
export const handedLately = (careDir: string, user: string, now = Date.now()): string | undefined => {
  try {
    const file = handedPath(careDir, user)
    if (now - Fs.statSync(file).mtimeMs > handedForMillis) return undefined
    return Fs.readFileSync(file, "utf8").trim() || undefined
  } catch {
    return undefined
  }
}

/** The notes of hand-offs on their way (~USER.handed), as paths. */
export const handedNotes = (careDir: string): ReadonlyArray<string> => {
  try {
    return Fs.readdirSync(careDir).filter((name) => name.startsWith("~") && name.endsWith(".handed")).map((name) => Path.join(careDir, name))
  } catch {
    return []
  }
}

/**
 * Forgets every hand-off on its way (the node's start, which decides every open run again): a hook
 * killed between noting a hand-off and making it leaves a note that would keep that run, and every
 * run of its user after it, waiting for a watcher that never comes. Handing a run twice is safe,
 * since only the holder of its lock watches it.
 */
export const clearAllHanded = (careDir: string): void => {
  for (const note of handedNotes(careDir)) Fs.rmSync(note, { force: true })
}

/** The hand-off has arrived (its watcher took the user's lock) or come to nothing (its watcher ends). */
export const clearHanded = (careDir: string, user: string, run?: string): void => {
  try {
    const file = handedPath(careDir, user)
    if (run !== undefined && Fs.readFileSync(file, "utf8").trim() !== run) return
    Fs.rmSync(file, { force: true })
  } catch {
    // none
  }
}
