/** Removing a directory that processes started from it may still write into (src/demo's and the tests' worlds). */
import * as Fs from "node:fs"

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const within = (path: string, dir: string) => path === dir || path.startsWith(`${dir}/`)

/**
 * Every process (not this one) working in `dir`: its command line names it, its working directory
 * is in it, or it holds a file of it open (a process in a sandbox may name neither).
 */
const pidsUnder = (dir: string): ReadonlyArray<number> =>
  Fs.readdirSync("/proc").filter((e) => /^\d+$/.test(e) && Number(e) !== process.pid).flatMap((e) => {
    try {
      if (Fs.readFileSync(`/proc/${e}/cmdline`, "utf8").includes(dir) || within(Fs.readlinkSync(`/proc/${e}/cwd`), dir)) return [Number(e)]
      return Fs.readdirSync(`/proc/${e}/fd`).some((fd) => within(Fs.readlinkSync(`/proc/${e}/fd/${fd}`), dir)) ? [Number(e)] : []
    } catch {
      return []
    }
  })

/**
 * Removes a directory of the demo's or a test's: ends every process still working in it, then
 * removes it, and again while something started meanwhile writes into it (a hook a fossil ran as
 * the server stopped made its log again). Node's rmSync retries only the last rmdir, never what
 * was written meanwhile.
 * When that never stops, the error names what was left and who holds it.
 */
export const removeTree = async (dir: string): Promise<void> => {
  let last: unknown
  for (let round = 0; round < 10; round++) {
    for (const pid of pidsUnder(dir)) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // already gone
      }
    }
    try {
      Fs.rmSync(dir, { recursive: true, force: true, maxRetries: 2, retryDelay: 50 })
      return
    } catch (e) {
      last = e
      await sleep(200)
    }
  }
  const left = Fs.existsSync(dir) ? Fs.readdirSync(dir, { recursive: true }).slice(0, 20).join(", ") : "nothing"
  const by = pidsUnder(dir).map((pid) => {
    try {
      return `${pid} ${Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim()}`
    } catch {
      return `${pid}`
    }
  })
  throw new Error(`${dir} could not be removed (${String(last)}); left: ${left}; processes in it: ${by.join("; ") || "none"}`)
}
