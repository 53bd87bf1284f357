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
  options: { readonly user: string; readonly cwd?: string; readonly timeoutMs?: number; readonly input?: string }
): Promise<FossilResult> =>
  new Promise((resolve, reject) => {
    const child = ChildProcess.execFile(
      fossilBinary,
      [...args],
      {
        cwd: options.cwd,
        env: { ...process.env, USER: options.user },
        timeout: options.timeoutMs ?? 60_000,
        maxBuffer: 64 * 1024 * 1024,
        encoding: "utf8"
      },
      (error, stdout, stderr) => {
        if (error !== null && typeof error.code === "string") return reject(error) // ENOENT and the like
        resolve({ code: error === null ? 0 : (typeof error.code === "number" ? error.code : null), stdout, stderr })
      }
    )
    if (options.input !== undefined) child.stdin?.end(options.input)
  })

/** Fossil's sync commands exit 0 on server errors: their `Error:` lines are the failure. */
export const errorLines = (output: string): ReadonlyArray<string> =>
  output.split(/\r?\n|\r/).map((l) => l.trim()).filter((l) => /^(?:Error|server says):/i.test(l) || /^error /i.test(l))
