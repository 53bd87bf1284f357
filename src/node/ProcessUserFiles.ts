import * as Fs from "node:fs"
import * as Path from "node:path"

// ROOT/care/~USER.lock and ~USER.waiting (one run per process user in a node's care, 2.13). "~"
// begins no run's name, and the login is written as encodeURIComponent writes it, so every login
// names files of its own and the login is read back from the name.

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
    const runs = [...new Set(text.split("\n").flatMap((line) => {
      try {
        const run = (JSON.parse(line) as { run?: unknown }).run
        return typeof run === "string" ? [run] : []
      } catch {
        return []
      }
    }))]
    return runs.length > 0 ? [{ user, runs }] : []
  })
}
