// flock(2) taken in this process, through the small addon built from flock.c (dist/ocx2-flock.node,
// beside the programs in a release). Node has no flock, and the util-linux `flock` child each lock
// otherwise costs is a fork of this whole process: about 10 ms of CPU on a loaded machine, seven
// times in a watcher's life. Only the try is taken here (a wait would block the event loop), so
// the callers try first and start `flock --wait` only when the lock is busy and they wait for it,
// or when the addon cannot be loaded (then everything goes as before, through the child).
//
// The addon is found as the SQLite addon is (src/fossil/Sqlite.ts): beside the real program, then
// beside this bundle, then, from source, in the checkout's dist/.

import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

interface Addon {
  readonly flock: (fd: number, exclusive: boolean, wait: boolean) => number
}

const addonName = "ocx2-flock.node"
let addon: Addon | null | undefined

const candidates = (): ReadonlyArray<string> => {
  const found: Array<string> = []
  const program = process.argv[1]
  if (program !== undefined) {
    try {
      found.push(Path.join(Path.dirname(Fs.realpathSync(program)), addonName))
    } catch {
      // a program that is gone: the other places
    }
  }
  // a CommonJS bundle (its loader passes the bundle's real path); absent in an ES module
  if (typeof __filename === "string") found.push(Path.join(Path.dirname(__filename), addonName))
  const url = (import.meta as { url?: string }).url
  if (typeof url === "string" && url.startsWith("file:")) {
    const here = Path.dirname(fileURLToPath(url))
    found.push(Path.join(here, addonName), Path.resolve(here, "..", "..", "dist", addonName))
  }
  return found
}

const load = (): Addon | null => {
  if (addon !== undefined) return addon
  addon = null
  for (const file of candidates()) {
    if (!Fs.existsSync(file)) continue
    try {
      const module = { exports: {} as Partial<Addon> }
      process.dlopen(module, file)
      if (typeof module.exports.flock === "function") {
        addon = module.exports as Addon
        break
      }
    } catch {
      // built for another machine, or not whole: the next place, else the flock child
    }
  }
  return addon
}

const wouldBlock = Os.constants.errno.EWOULDBLOCK

/**
 * An exclusive flock on `fd` tried now: "held", "busy" (another holds it), undefined when the
 * addon is not there (the caller uses the flock child), or what went wrong in words.
 */
export const tryFlock = (fd: number): "held" | "busy" | string | undefined => {
  const found = load()
  if (found === null) return undefined
  const errno = found.flock(fd, true, false)
  if (errno === 0) return "held"
  if (errno === wouldBlock) return "busy"
  const name = Object.entries(Os.constants.errno).find(([, n]) => n === errno)?.[0]
  return `flock(2) on descriptor ${fd}: ${name ?? `errno ${errno}`}`
}

/** Whether the addon is loaded (for the tests and the benchmark). */
export const nativeFlockLoaded = (): boolean => load() !== null
