/**
 * Running the `fossil` program. Fossil picks its user from -U, then the repository's
 * default-user, then $USER, so every call names the user with -U and sets USER too
 * (without USER, some commands fail "cannot determine user").
 */
import * as ChildProcess from "node:child_process"

export interface FossilResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

export const fossilBinary = process.env["OCX2_FOSSIL"] ?? "fossil"

export const runFossil = (
  args: ReadonlyArray<string>,
  options: {
    readonly user: string
    readonly cwd?: string
    readonly timeoutMs?: number
    readonly input?: string
    /** descriptors the child inherits (as fds 3, 4, ...): a lock passed this way is held until it ends */
    readonly holdFds?: ReadonlyArray<number>
    /**
     * A lock file: fossil runs under util-linux `flock` on it (waiting up to `waitSeconds`, default
     * 60), so the writes of every process that names the same file run one at a time.
     */
    readonly oneAtATime?: { readonly lockFile: string; readonly waitSeconds?: number }
    /** variables set for this call only, over the caller's environment */
    readonly env?: Readonly<Record<string, string>>
  }
): Promise<FossilResult> =>
  new Promise((resolve, reject) => {
    const [program, argv] = options.oneAtATime === undefined
      ? [fossilBinary, [...args]]
      : ["flock", ["--exclusive", "--wait", String(options.oneAtATime.waitSeconds ?? 60), options.oneAtATime.lockFile, fossilBinary, ...args]]
    // spawn, not execFile: execFile ignores `stdio`, and held descriptors must reach the child
    const child = ChildProcess.spawn(program, argv, {
      cwd: options.cwd,
      env: { ...process.env, ...options.env, USER: options.user },
      stdio: ["pipe", "pipe", "pipe", ...(options.holdFds ?? [])]
    })
    const out: Array<Buffer> = []
    const err: Array<Buffer> = []
    let size = 0
    const limit = 64 * 1024 * 1024
    const collect = (into: Array<Buffer>) => (chunk: Buffer) => {
      size += chunk.length
      if (size <= limit) into.push(chunk)
    }
    child.stdout!.on("data", collect(out))
    child.stderr!.on("data", collect(err))
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 60_000)
    child.once("error", (error) => {
      clearTimeout(timer)
      reject(error) // ENOENT and the like
    })
    child.once("close", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout: Buffer.concat(out).toString("utf8"), stderr: Buffer.concat(err).toString("utf8") })
    })
    child.stdin!.on("error", () => {}) // a child that exits without reading its input
    child.stdin!.end(options.input ?? "")
  })

/** Fossil's sync commands exit 0 on server errors: their `Error:` lines are the failure. */
export const errorLines = (output: string): ReadonlyArray<string> =>
  output.split(/\r?\n|\r/).map((l) => l.trim()).filter((l) => /^(?:Error|server says):/i.test(l) || /^error /i.test(l))
