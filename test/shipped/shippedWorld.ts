/**
 * The release as a user installs it: a served repository whose `fossil server` and backoffice
 * poller run as a service manager runs them (from `/`, a bare environment), the OCX pages linked
 * into its extension root as docs/operations.md says, and this checkout staged and accepted into
 * a fresh ROOT and the hook installed exactly as the README says, through the checkout's own
 * `bin/ocx2`. Everything after that goes through the programs in ROOT/current.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Readline from "node:readline"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import { readMessage } from "../../src/protocol/Envelope.js"
import { stopSpare } from "../../src/pickup/SpareClient.js"
import { makeNodeWorld, type NodeWorld, users } from "../support/nodeWorld.js"
import { answerWithin } from "../support/world.js"

export const project = Path.resolve(import.meta.dirname, "../..")

/** What a person's shell gives a program: no variable of the test's own. */
export const shellEnvironment = (): NodeJS.ProcessEnv => ({
  PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  HOME: process.env.HOME ?? "/root",
  LANG: "C.UTF-8",
  USER: "root"
})

export interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs PROGRAM ARGS as a person at a terminal would (from `cwd`, their shell's environment), standard input closed or given. */
export const runProgram = (program: string, args: ReadonlyArray<string>, options: { readonly cwd: string; readonly input?: string; readonly env?: NodeJS.ProcessEnv }): Promise<Ran> =>
  new Promise((resolve, reject) => {
    const child = ChildProcess.spawn(program, [...args], {
      cwd: options.cwd,
      env: options.env ?? shellEnvironment(),
      stdio: [options.input === undefined ? "ignore" : "pipe", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout!.on("data", (c: Buffer) => (stdout += c.toString()))
    child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()))
    if (options.input !== undefined) child.stdin!.end(options.input)
    child.once("error", reject)
    child.once("close", (code) => resolve({ code, stdout, stderr }))
  })

export interface ShippedWorld {
  readonly node: NodeWorld
  readonly root: string
  /** the extension root the server serves, linking to ROOT/current/ocx2-cgi (and ROOT/next/ocx2-cgi) */
  readonly pagesUrl: string
  /** ROOT/current/PROGRAM, as a user names it */
  readonly program: (name: string) => string
  /** what stage, accept and hook printed */
  readonly install: ReadonlyArray<Ran>
  /** the messages naming the run in its thread: kind, sender, content */
  readonly replies: (run: string) => Promise<ReadonlyArray<{ readonly kind: string; readonly sender: string | undefined; readonly content: any }>>
  /** until the run's ended is in the record and its watcher is done; the replies */
  readonly waitEnded: (run: string, ms?: number) => Promise<ReadonlyArray<{ readonly kind: string; readonly sender: string | undefined; readonly content: any }>>
  readonly waitStarted: (run: string, ms?: number) => Promise<boolean>
  readonly close: () => Promise<void>
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

export const waitFor = async <A>(probe: () => Promise<A | undefined>, ms: number, every = 150): Promise<A | undefined> => {
  for (const deadline = Date.now() + ms; ;) {
    const value = await probe()
    if (value !== undefined || Date.now() > deadline) return value
    await sleep(every)
  }
}

/**
 * Whether a process holds FILE's flock exclusively (a watcher holds RUN.lock for its run's whole
 * life), read from the kernel's table of locks: a wait polls it without starting a program.
 */
const heldExclusively = (file: string): boolean => {
  let stat: Fs.Stats
  try {
    stat = Fs.statSync(file)
  } catch {
    return false
  }
  const hex = (n: number) => n.toString(16).padStart(2, "0")
  // /proc/locks names a file MAJOR:MINOR:INODE, its device in hex as the kernel splits dev_t
  const id = `${hex((stat.dev >> 8) & 0xfff)}:${hex((stat.dev & 0xff) | ((stat.dev >> 12) & 0xfff00))}:${stat.ino}`
  // a holder's line: "N: FLOCK ADVISORY WRITE PID ID 0 EOF" (a waiter's has "->" after N:)
  return Fs.readFileSync("/proc/locks", "utf8").split("\n").some((line) => {
    const fields = line.trim().split(/\s+/)
    return fields[1] === "FLOCK" && fields[3] === "WRITE" && fields[5] === id
  })
}

export const makeShippedWorld = async (): Promise<ShippedWorld> => {
  const node = await makeNodeWorld({ fastHooks: true, pages: true })
  try {
    const root = node.root
    // the README's "Installing a node", word for word, from the checkout
    const ocx2 = Path.join(project, "bin", "ocx2")
    const admin = ["--repository", node.repository, "--user", users.admin.login]
    const install: Array<Ran> = []
    for (const args of [
      [...admin, "stage", ".", "--root", root],
      [...admin, "accept", "--root", root],
      [...admin, "hook", "--node", users.node.login, "--root", root, "--fast"]
    ]) {
      const ran = await runProgram(ocx2, args, { cwd: project })
      install.push(ran)
      if (ran.code !== 0) throw new Error(`ocx2 ${args.join(" ")} exited ${String(ran.code)}:\n${ran.stdout}\n${ran.stderr}`)
    }
    const replies: ShippedWorld["replies"] = async (run) =>
      (await node.thread(run)).flatMap((post) => {
        const reading = readMessage(post.text)
        return reading._tag === "Message" && reading.re === run ? [{ kind: reading.kind, sender: post.sender, content: reading.content as any }] : []
      })
    const lock = (run: string) => Path.join(root, "care", `${run}.lock`)
    const watcherDone = (run: string) => !heldExclusively(lock(run))
    return {
      node,
      root,
      pagesUrl: `${node.server.url}ext/ocx2-cgi`,
      program: (name) => Path.join(root, "current", name),
      install,
      replies,
      // when the run is not answered in time: what the node saw (test/support/explain.ts), the test's failure
      waitEnded: async (run, ms = answerWithin) => {
        const done = await waitFor(async () => ((await replies(run)).some((m) => m.kind === "ended") && watcherDone(run) ? true : undefined), ms)
        if (done === undefined) {
          throw new Error(`the run ${run} was not answered ended, its watcher gone, within ${ms / 1000} s (its replies: ${(await replies(run)).map((m) => m.kind).join(", ") || "none"})\n${node.explain(run)}`)
        }
        return replies(run)
      },
      waitStarted: async (run, ms = answerWithin) =>
        (await waitFor(async () => ((await replies(run)).some((m) => m.kind === "started") ? true : undefined), ms)) === true,
      close: async () => {
        stopSpare(root)
        await node.close()
      }
    }
  } catch (e) {
    await node.close()
    throw e
  }
}

/**
 * An MCP client transport over a program's stdin and stdout that reads every line of stdout
 * itself: a line that is not a JSON-RPC message is recorded in `notProtocol` (the SDK's own
 * transport would only report it as an error and go on).
 */
export class LineCheckingTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (message: JSONRPCMessage) => void
  readonly notProtocol: Array<string> = []
  readonly lines: Array<string> = []
  stderr = ""
  private child: ChildProcess.ChildProcess | undefined

  constructor(private readonly program: string, private readonly args: ReadonlyArray<string>, private readonly env: NodeJS.ProcessEnv, private readonly cwd: string) {}

  start(): Promise<void> {
    const child = ChildProcess.spawn(this.program, [...this.args], { cwd: this.cwd, env: this.env, stdio: ["pipe", "pipe", "pipe"] })
    this.child = child
    child.stderr!.on("data", (c: Buffer) => (this.stderr += c.toString()))
    Readline.createInterface({ input: child.stdout! }).on("line", (line) => {
      this.lines.push(line)
      let message: unknown
      try {
        message = JSON.parse(line)
      } catch {
        this.notProtocol.push(line)
        return
      }
      if (typeof message !== "object" || message === null || (message as { jsonrpc?: unknown }).jsonrpc !== "2.0") {
        this.notProtocol.push(line)
        return
      }
      this.onmessage?.(message as JSONRPCMessage)
    })
    child.once("error", (e) => this.onerror?.(e))
    child.once("close", () => this.onclose?.())
    return Promise.resolve()
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve, reject) => this.child!.stdin!.write(`${JSON.stringify(message)}\n`, (e) => (e ? reject(e) : resolve())))
  }

  async close(): Promise<void> {
    const child = this.child
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return
    const closed = new Promise<void>((r) => child.once("close", () => r()))
    child.stdin!.end()
    const ended = await Promise.race([closed.then(() => true), sleep(5000).then(() => false)])
    if (!ended) {
      child.kill("SIGKILL")
      await closed
    }
  }
}
