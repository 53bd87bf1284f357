/**
 * A launch on a pseudo-terminal (2.10, "With a terminal"): the gated wrapper, then bwrap, run
 * with the terminal on 0, 1 and 2 (node-pty's forkpty), and the wrapper moves STDERR to a pipe
 * of its own, a FIFO in a private directory, before anything else runs. The go of a gated launch
 * comes through a second FIFO, never through the terminal, so it is neither echoed nor seen by
 * the process. The object looks to the launcher as a child process does: pid, stdin (typing),
 * stdout (what the terminal prints), stderr (the pipe), and the events spawn, exit and error.
 */
import type * as NodePty from "@lydell/node-pty"
import * as ChildProcess from "node:child_process"
import { EventEmitter } from "node:events"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { PassThrough, Writable } from "node:stream"
import type { TerminalAccess, TerminalSize } from "../../services/SandboxLauncher.js"
import { ByteTail } from "./ByteTail.js"
import { openStatusFile } from "./StatusFile.js"

/** a tty in canonical mode holds at most this many bytes of one line, its end included */
export const canonicalLineMax = 4095
/** a longer line is typed in pieces of at most this many bytes, each handed on with VEOF (^D) */
const pieceMax = 4000
/** what a person joining is shown first: the last bytes the terminal showed */
export const screenKeep = 16 * 1024

// $1 gated, $2 the private directory (stderr and go FIFOs), $3 how many created files, $4 the
// status file or "", then the created files' paths, then each cgroup's procs file, "--", and the
// command. It closes every descriptor but the terminal's, moves STDERR to its pipe, opens the
// created files on 3, 4, ... and the status file after them (as the pipe launch passes them),
// joins the cgroups, waits for its go when gated, and becomes the rest.
const wrapperScript = [
  'gated=$1; dir=$2; n=$3; status=$4; shift 4',
  'for f in /proc/$$/fd/*; do k=${f##*/}; if [ "$k" -gt 2 ]; then eval "exec $k>&-" 2>/dev/null; fi; done',
  'exec 2>"$dir/stderr" || exit 125',
  'fd=3; while [ "$n" -gt 0 ]; do eval "exec $fd<\\"\\$1\\"" || exit 125; fd=$((fd + 1)); n=$((n - 1)); shift; done',
  'if [ -n "$status" ]; then eval "exec $fd>>\\"\\$status\\"" || exit 125; fi',
  'while [ "$1" != "--" ]; do echo "$$" > "$1" || exit 125; shift; done; shift',
  'if [ "$gated" = 1 ]; then IFS= read -r go <"$dir/go" || exit 125; [ "$go" = go ] || exit 125; fi',
  'exec "$@"'
].join("\n")

export interface TerminalChildOptions {
  readonly bash: string
  readonly stty: string
  readonly mkfifo: string
  /** the wrapper's environment (bwrap clears it for the process) */
  readonly env: Readonly<Record<string, string>>
  readonly size: TerminalSize
  readonly gated: boolean
  /** host files whose text bwrap reads on descriptors 3, 4, ... */
  readonly createdFiles: ReadonlyArray<string>
  /** the cgroups' procs files the wrapper joins */
  readonly procsFiles: ReadonlyArray<string>
  /** the launch's status file (StatusFile.ts), opened after the created files for bwrap to report to */
  readonly statusFile?: string | undefined
  /** prlimit, setpriv, bwrap and its arguments */
  readonly command: ReadonlyArray<string>
}

let ptyModule: typeof NodePty | undefined

/** node-pty is a native addon: loaded on the first terminal launch only, from the program's place as Sqlite.ts does */
const loadPty = (): typeof NodePty => {
  if (ptyModule !== undefined) return ptyModule
  const bases = [
    ...(process.argv[1] !== undefined ? [Path.resolve(process.argv[1])] : []),
    Path.join(process.cwd(), "index.js")
  ]
  let lastError: unknown
  for (const base of bases) {
    try {
      return (ptyModule = createRequire(base)("@lydell/node-pty") as typeof NodePty)
    } catch (e) {
      lastError = e
    }
  }
  try {
    // in a CommonJS bundle import.meta is empty: there the program's place above is the answer
    return (ptyModule = createRequire(String(import.meta.url))("@lydell/node-pty") as typeof NodePty)
  } catch {
    throw lastError
  }
}

const signalName = (n: number): NodeJS.Signals | null =>
  (Object.entries(Os.constants.signals).find(([, v]) => v === n)?.[0] as NodeJS.Signals | undefined) ?? null

const clampSize = (size: TerminalSize): TerminalSize => ({
  rows: Math.min(1000, Math.max(1, Math.floor(size.rows) || 24)),
  cols: Math.min(1000, Math.max(1, Math.floor(size.cols) || 80))
})

/** pieces of at most `max` bytes, never cutting a UTF-8 character */
export const utf8Pieces = (text: string, max: number): ReadonlyArray<Buffer> => {
  const bytes = Buffer.from(text, "utf8")
  const pieces: Array<Buffer> = []
  let at = 0
  while (at < bytes.length) {
    let end = Math.min(bytes.length, at + max)
    // back off continuation bytes (10xxxxxx) so the piece ends on a character's boundary
    while (end < bytes.length && end > at && (bytes[end]! & 0xc0) === 0x80) end--
    pieces.push(bytes.subarray(at, end))
    at = end
  }
  return pieces
}

/** STDERR's bytes as the terminal would have shown them: each bare newline also returns the carriage */
const crlf = (chunk: Buffer, previous: number | undefined): Buffer => {
  const out: Array<number> = []
  let last = previous
  for (const b of chunk) {
    if (b === 0x0a && last !== 0x0d) out.push(0x0d)
    out.push(b)
    last = b
  }
  return Buffer.from(out)
}

/** how long a terminal is read after its process exited when another process still holds it open */
const heldTerminalLimitMs = 2000

/**
 * node-pty ends a terminal 200 ms after its process exits, by destroying the socket that reads it,
 * whether or not the socket has read what the process printed last: a terminal paused (its output
 * not taken as fast as it came) or this process not scheduled for those 200 ms (a loaded machine)
 * lost the run's last lines. That destroy, and the socket's own after an end of file (the only ones
 * called with no error), are put off: the terminal is read on, never paused again (`ending`), until
 * it ends by itself (EIO: every writer closed and all read), or for at most `heldTerminalLimitMs`
 * while another process holds it.
 *
 * Nor is an end of file the terminal's end. While the session's hangup is under way (its leader,
 * bwrap, exited), Linux may answer a read of the terminal with 0 and still have output to hand on:
 * on a loaded machine 5 terminal runs in 45 lost 1 to 5 KiB, their last line among them, and
 * reads after that 0 returned what was left (up to 3,162 bytes in the 2 runs traced), then EIO.
 * libuv stops reading at an end of file, so the terminal is then read here, every 10 ms, to EIO
 * or the same limit.
 */
const readToTheEnd = (pty: NodePty.IPty, take: (chunk: Buffer) => void, ending: () => void): void => {
  type Socket = {
    destroyed?: boolean
    resume(): void
    once(event: "close" | "end", f: () => void): void
    destroy(...args: Array<unknown>): unknown
  }
  const socket = (pty as unknown as { _socket?: Socket })._socket
  // a node-pty that keeps its socket elsewhere ends as it does
  if (socket === undefined || typeof socket.destroy !== "function") return
  const fd = (pty as unknown as { _fd?: number })._fd
  const destroy = socket.destroy
  let finished = false
  let limit: NodeJS.Timeout | undefined
  let poll: NodeJS.Timeout | undefined
  const finish = () => {
    if (finished) return
    finished = true
    clearTimeout(limit)
    clearInterval(poll)
    destroy.apply(socket, [])
  }
  const readOn = () => {
    if (limit !== undefined) return
    ending()
    limit = setTimeout(finish, heldTerminalLimitMs)
  }
  socket.destroy = (...args: Array<unknown>) => {
    if (finished || args.length > 0 || socket.destroyed === true) return destroy.apply(socket, args)
    readOn()
    if (poll === undefined) socket.resume()
    return socket
  }
  socket.once("close", () => {
    finished = true
    clearTimeout(limit)
    clearInterval(poll)
  })
  if (fd === undefined) return
  socket.once("end", () => {
    readOn()
    const buffer = Buffer.alloc(64 * 1024)
    poll = setInterval(() => {
      for (;;) {
        let n: number
        try {
          n = Fs.readSync(fd, buffer, 0, buffer.length, null)
        } catch (e) {
          // EAGAIN: nothing yet (the terminal is non-blocking); EIO: its end
          if ((e as NodeJS.ErrnoException).code !== "EAGAIN") finish()
          return
        }
        if (n === 0) return
        take(Buffer.from(buffer.subarray(0, n)))
      }
    }, 10)
  })
}

export class TerminalChild extends EventEmitter {
  readonly pid: number
  readonly stdin: Writable
  readonly stdout = new PassThrough()
  readonly stderr: Net.Socket
  readonly access: TerminalAccess
  private readonly pty: NodePty.IPty
  private readonly dir: string
  private goFd: number | undefined
  private holdFd: number | undefined
  private ended = false

  /** throws when the terminal or its pipes cannot be made, having left nothing behind */
  constructor(private readonly o: TerminalChildOptions) {
    super()
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "ocx2-terminal-"))
    this.dir = dir
    let readFd: number | undefined
    try {
      const fifos = [Path.join(dir, "stderr"), ...(o.gated ? [Path.join(dir, "go")] : [])]
      ChildProcess.execFileSync(o.mkfifo, ["-m", "600", ...fifos], { stdio: ["ignore", "ignore", "pipe"], env: { PATH: "/usr/bin:/bin" } })
      const c = Fs.constants
      // the reader first (a FIFO's writer cannot open before it), then a writer of our own, held
      // until the process ended: the pipe reads no end before the wrapper opened it
      readFd = Fs.openSync(fifos[0]!, c.O_RDONLY | c.O_NONBLOCK)
      this.holdFd = Fs.openSync(fifos[0]!, c.O_WRONLY)
      // read and write: the wrapper's open for reading does not wait, and our write never fails
      if (o.gated) this.goFd = Fs.openSync(fifos[1]!, c.O_RDWR)
      // made anew here, appended to by the wrapper's bwrap
      if (o.statusFile !== undefined) Fs.closeSync(openStatusFile(o.statusFile))
      const size = clampSize(o.size)
      this.pty = loadPty().spawn(
        o.bash,
        ["--norc", "--noprofile", "-c", wrapperScript, "ocx2-launch", o.gated ? "1" : "0", dir, String(o.createdFiles.length),
          o.statusFile ?? "", ...o.createdFiles, ...o.procsFiles, "--", ...o.command],
        { cols: size.cols, rows: size.rows, cwd: "/", env: { ...o.env }, encoding: null, name: "xterm-256color" }
      )
    } catch (e) {
      if (readFd !== undefined) Fs.closeSync(readFd)
      this.dispose()
      throw e
    }
    this.pid = this.pty.pid
    this.stderr = new Net.Socket({ fd: readFd, readable: true, writable: false })

    const screen = new ByteTail(screenKeep)
    const listeners = new Set<(bytes: Uint8Array) => void>()
    const show = (bytes: Uint8Array) => {
      screen.push(bytes)
      for (const l of listeners) l(bytes)
    }
    let size = clampSize(o.size)
    this.access = {
      recent: () => screen.bytes(),
      subscribe: (listener) => {
        listeners.add(listener)
        return () => void listeners.delete(listener)
      },
      type: (bytes) => {
        if (!this.ended) this.pty.write(Buffer.from(bytes) as unknown as string)
      },
      resize: (next) => {
        size = clampSize(next)
        if (!this.ended) this.pty.resize(size.cols, size.rows)
      },
      size: () => size
    }

    let ending = false
    const take = (chunk: Buffer) => {
      show(chunk)
      if (!this.stdout.write(chunk) && !ending) {
        this.pty.pause()
        this.stdout.once("drain", () => this.pty.resume())
      }
    }
    this.pty.onData((data: string | Buffer) => take(typeof data === "string" ? Buffer.from(data, "utf8") : data))
    readToTheEnd(this.pty, take, () => (ending = true))
    let lastErrByte: number | undefined
    this.stderr.on("data", (chunk: Buffer) => {
      show(crlf(chunk, lastErrByte))
      lastErrByte = chunk[chunk.length - 1]
    })
    this.stderr.on("error", () => {})
    // node-pty reports the exit once the terminal's last output was read (readToTheEnd)
    this.pty.onExit(({ exitCode, signal }) => {
      this.ended = true
      this.stdout.end()
      this.dispose()
      this.emit("exit", signal ? null : exitCode, signal ? signalName(signal) : null)
    })

    this.stdin = new Writable({
      decodeStrings: false,
      write: (chunk: string | Buffer, _encoding, done) => {
        this.typeText(typeof chunk === "string" ? chunk : chunk.toString("utf8")).then(() => done(), (e: Error) => done(e))
      },
      // closing a terminal's input is typing its end of file at the start of a line
      final: (done) => {
        if (!this.ended) this.pty.write("\x04")
        done()
      }
    })
    process.nextTick(() => this.emit("spawn"))
  }

  /**
   * Lets a gated wrapper exec bwrap. Our descriptor stays open until the end: a FIFO's bytes are
   * dropped once nobody holds it, and the wrapper may not have opened it yet.
   */
  go(): void {
    if (this.goFd !== undefined) Fs.writeSync(this.goFd, "go\n")
  }

  /** our own ends of the pipes closed (the stderr pipe then ends once the process's writers are gone) and the directory removed */
  dispose(): void {
    for (const fd of [this.goFd, this.holdFd]) if (fd !== undefined) Fs.closeSync(fd)
    this.goFd = undefined
    this.holdFd = undefined
    Fs.rmSync(this.dir, { recursive: true, force: true })
  }

  /** text of whole lines ("\n" each) typed in, each line ended by Return; a trailing part typed as it is */
  private async typeText(text: string): Promise<void> {
    const lines = text.split("\n")
    const rest = lines.pop()!
    for (const line of lines) await this.typeLine(line)
    if (rest.length > 0 && !this.ended) this.pty.write(rest)
  }

  /**
   * One line and Return. A canonical tty keeps at most 4095 bytes of a line and drops the rest, so
   * a longer line, while the terminal is canonical, is handed on in pieces, each ended with VEOF,
   * which makes what was typed readable without ending the line; a program reading lines gets the
   * whole line. A terminal the program made raw takes the line as it is.
   */
  private async typeLine(line: string): Promise<void> {
    if (this.ended) return
    if (Buffer.byteLength(line, "utf8") < canonicalLineMax || !(await this.canonical())) {
      this.pty.write(`${line}\r`)
      return
    }
    for (const piece of utf8Pieces(line, pieceMax)) {
      if (this.ended) return
      this.pty.write(Buffer.concat([piece, Buffer.from("\x04")]) as unknown as string)
    }
    if (!this.ended) this.pty.write("\r")
  }

  private canonical(): Promise<boolean> {
    const name = (this.pty as unknown as { ptsName?: string }).ptsName
    if (name === undefined) return Promise.resolve(true)
    return new Promise((resolve) => {
      ChildProcess.execFile(this.o.stty, ["-F", name, "-a"], { timeout: 5000 }, (error, stdout) => {
        resolve(error !== null || !/(^|\s)-icanon(\s|;|$)/.test(stdout))
      })
    })
  }
}
