import * as ChildProcess from "node:child_process"

/** runs a host program to its end; rejects with its name, arguments and what it printed */
export const exec = (program: string, args: ReadonlyArray<string>): Promise<string> =>
  new Promise((resolve, reject) => {
    ChildProcess.execFile(program, args, { encoding: "utf8", env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" } }, (error, stdout, stderr) => {
      if (error === null) return resolve(stdout)
      reject(new Error(`${program} ${args.join(" ")}: ${(stderr || error.message).trim()}`))
    })
  })

/** exits SIGKILLed or otherwise; resolves once Node has reaped it */
export const exited = (child: ChildProcess.ChildProcess): Promise<void> =>
  child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((resolve) => child.once("exit", () => resolve()))

export const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
