import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { make } from "../../layers/BwrapSandbox.js"
import { TerminalChild, utf8Pieces } from "../../src/sandbox/TerminalChild.js"
import { decode, makeRoot, present, shellSpec } from "./support.js"

// 2.10 "With a terminal": STDIN and STDOUT are a pseudo-terminal the launcher holds, STDERR a
// pipe of its own whose bytes are kept as STDERR and also shown on the terminal; lines are typed.

const { root, ws, care } = makeRoot("terminal")
afterAll(() => Fs.rmSync(root, { recursive: true, force: true }))
const launcher = make()
const terminal = { rows: 24, cols: 80 }

const waitFor = (what: () => boolean, ms = 3000) =>
  Effect.gen(function*() {
    const until = Date.now() + ms
    while (!what()) {
      if (Date.now() > until) return yield* Effect.die(new Error("waited too long"))
      yield* Effect.sleep("20 millis")
    }
  })

describe("a launch on a terminal", () => {
  it.live("is a terminal inside; STDERR is a pipe kept apart and shown on the terminal; typed lines reach it", () =>
    Effect.gen(function*() {
      const dir = Path.join(ws, "one")
      Fs.mkdirSync(dir)
      Fs.chownSync(dir, 64123, 64124)
      const script = [
        "tty -s && echo in:tty",
        "[ -t 1 ] && echo out:tty",
        "[ -t 2 ] || echo 'err:pipe' >&2",
        "read -r first; echo \"first=$first\"",
        "read -r typed; echo \"typed=$typed\"",
        "echo to-stderr >&2"
      ].join("; ")
      const shown: Array<Uint8Array> = []
      const result = yield* Effect.scoped(
        Effect.gen(function*() {
          const h = yield* launcher.start({
            ...shellSpec(ws, care, script),
            terminal,
            gated: true,
            stdin: { lines: ['{"run":"r","objective":"o"}'], keepOpen: true },
            logDir: dir
          })
          expect(h.terminal).toBeDefined()
          h.terminal!.subscribe((b) => shown.push(b))
          yield* h.release
          yield* waitFor(() => decode(Buffer.concat(shown)).includes("first="))
          // what a person joined types: raw keys, Return included
          h.terminal!.type(new TextEncoder().encode("hello there\r"))
          return yield* h.result
        })
      )
      expect(result.ending).toEqual({ outcome: "exited", exit: 0 })
      const out = decode(result.stdout.tail)
      expect(out).toContain("in:tty\r\n")
      expect(out).toContain("out:tty\r\n")
      expect(out).toContain('first={"run":"r","objective":"o"}\r\n')
      expect(out).toContain("typed=hello there\r\n")
      // STDERR is its own: kept whole, never in the terminal's output
      expect(decode(result.stderr.tail)).toBe("err:pipe\nto-stderr\n")
      expect(out).not.toContain("to-stderr")
      // what a person sees holds both, STDERR's newlines returning the carriage
      const screen = decode(Buffer.concat(shown))
      expect(screen).toContain("err:pipe\r\n")
      expect(screen).toContain("to-stderr\r\n")
      expect(screen).toContain("typed=hello there")
      expect(Fs.readFileSync(Path.join(dir, "stdout.log"), "utf8")).toBe(out)
      expect(Fs.readFileSync(Path.join(dir, "stderr.log"), "utf8")).toBe("err:pipe\nto-stderr\n")
    }))

  it.live("types a line longer than a canonical tty holds whole, and a delivery line after it", () =>
    Effect.gen(function*() {
      const long = "x".repeat(9000) + "é".repeat(1000) + "end"
      const result = yield* Effect.scoped(
        Effect.gen(function*() {
          const h = yield* launcher.start({
            ...shellSpec(ws, care, "stty -echo; IFS= read -r a; IFS= read -r b; printf '%s %s\\n' \"${#a}\" \"$b\"", {
              env: { PATH: "/usr/bin:/bin", LANG: "C.UTF-8", LC_ALL: "C.UTF-8" }
            }),
            terminal,
            stdin: { lines: [], keepOpen: true }
          })
          yield* Effect.sleep("200 millis")
          yield* h.writeLine(long)
          yield* h.writeLine("second")
          return yield* h.result
        })
      )
      expect(result.ending).toEqual({ outcome: "exited", exit: 0 })
      expect(decode(result.stdout.tail)).toContain(`${Buffer.byteLength(long)} second\r\n`)
    }))

  it.live("with its input not kept open (a process of a session that starts one per delivery), it reads its lines, then the end of input", () =>
    Effect.gen(function*() {
      const result = yield* launcher.run({
        ...shellSpec(ws, care, "stty -echo; n=0; while IFS= read -r l; do n=$((n+1)); echo \"got=$l\"; done; echo \"lines=$n end\""),
        terminal,
        stdin: { lines: ['{"run":"r","objective":"o"}', '{"post":"p","from":"alice","text":"hi"}'], keepOpen: false },
        limits: { wallSeconds: 20 }
      })
      expect(result.ending).toEqual({ outcome: "exited", exit: 0 })
      const out = decode(result.stdout.tail)
      expect(out).toContain('got={"post":"p","from":"alice","text":"hi"}\r\n')
      expect(out).toContain("lines=2 end")
    }), 90_000)

  it.live("a terminal launch is held to its limits: wall ends it budget, and nothing is left", () =>
    Effect.gen(function*() {
      let pids: ReadonlyArray<number> = []
      const result = yield* Effect.scoped(
        Effect.gen(function*() {
          const h = yield* launcher.start({ ...shellSpec(ws, care, "sleep 30 & sleep 30; echo never"), terminal, limits: { wallSeconds: 1 } })
          yield* Effect.sleep("300 millis")
          pids = yield* h.processIds
          return yield* h.result
        })
      )
      expect(result.ending).toEqual({ outcome: "budget", limit: "wall", exit: expect.any(Number) })
      expect(decode(result.stdout.tail)).not.toContain("never")
      expect(present(pids)).toEqual([])
    }))

  it.live("its cgroups hold it as without a terminal: memory ends it budget, processes only refuses the fork", () =>
    Effect.gen(function*() {
      const [memory, processes] = yield* Effect.all([
        launcher.run({
          ...shellSpec(ws, care, "python3 -c 'b = b\"x\" * (256 << 20); print(len(b))'", { limits: { memoryBytes: 48 << 20, wallSeconds: 20 } }),
          terminal
        }),
        launcher.run({
          ...shellSpec(ws, care, "for i in $(seq 40); do sleep 30 & done; wait", { limits: { processes: 8, wallSeconds: 20 } }),
          terminal
        })
      ], { concurrency: "unbounded" })
      expect(memory.ending).toEqual({ outcome: "budget", limit: "memory", exit: 128 + 9 })
      expect(processes.ending).toEqual({ outcome: "exited", exit: 2 })
      expect(decode(processes.stderr.tail)).toMatch(/fork/i)
    }), 90_000)

  it.live("a stop ends it stopped", () =>
    Effect.gen(function*() {
      const result = yield* Effect.scoped(
        Effect.gen(function*() {
          const h = yield* launcher.start({ ...shellSpec(ws, care, "echo up; sleep 30"), terminal })
          const shown: Array<Uint8Array> = []
          h.terminal!.subscribe((b) => shown.push(b))
          // stopped once it printed (on a loaded machine a fixed pause stopped it before that)
          yield* waitFor(() => decode(Buffer.concat([h.terminal!.recent(), ...shown])).includes("up\r\n"), 60_000)
          yield* h.stop
          return yield* h.result
        })
      )
      expect(result.ending.outcome).toBe("stopped")
      expect(decode(result.stdout.tail)).toBe("up\r\n")
    }))

  it("cuts long text into pieces on character boundaries", () => {
    const pieces = utf8Pieces("aé".repeat(5), 4)
    expect(pieces.map((p) => p.length).every((n) => n <= 4)).toBe(true)
    expect(Buffer.concat(pieces).toString("utf8")).toBe("aé".repeat(5))
    expect(pieces.every((p) => (p[0]! & 0xc0) !== 0x80)).toBe(true)
  })
})

// node-pty ends a terminal 200 ms after its process exits, by destroying the socket that reads
// it: what the socket had not read by then was lost (once in CI: a run's last line, on a loaded
// machine). A terminal whose output nobody takes pauses once its stdout holds 31 KiB, and stays
// paused for as long as the test likes. The process writes 34 KiB a piece at a time, so that the
// kernel holds at most the last 3 KiB and a line while the terminal is paused; or 48 KiB, more
// than the 4 KiB a terminal's line discipline holds, the rest kept back in the kernel's buffers.
describe("a terminal's last output, when its process has exited", () => {
  const pieces = (letter: string, kib = 34) => `for i in $(seq ${kib}); do head -c 1024 /dev/zero | tr '\\0' ${letter}; sleep 0.01; done; sleep 0.3; echo; echo last-line`
  const untaken = async (script: string) => {
    const child = new TerminalChild({
      bash: "/bin/bash", stty: "/usr/bin/stty", mkfifo: "/usr/bin/mkfifo", env: { PATH: "/usr/bin:/bin" },
      size: terminal, gated: false, createdFiles: [], procsFiles: [], command: ["/bin/sh", "-c", script]
    })
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
    child.stderr.resume()
    await exited
    const chunks: Array<Buffer> = []
    for await (const chunk of child.stdout) chunks.push(chunk as Buffer)
    return Buffer.concat(chunks).toString("utf8")
  }

  // Its last line is what a terminal paused at its end lost (all past the pause, 3 KiB and the
  // line); the bytes before are counted loosely: under a heavy load one byte of the 34 KiB went
  // missing once in 16 runs, which node-pty's ending does not explain (the last line still came).
  it("is kept to its last line though nobody took it while the process ran", async () => {
    const out = await untaken(pieces("x"))
    expect(out.endsWith("\r\nlast-line\r\n")).toBe(true)
    expect(out.replace(/[^x]/g, "").length).toBeGreaterThan(34 * 1024 - 16)
  })

  // With 17 KiB waiting, the read after the pause met an end of file early every time and the
  // terminal ended 12 KiB short (taken for the kernel's loss until reads after it found the rest).
  it("is kept whole with more waiting in the kernel than the terminal's line discipline holds", async () => {
    const out = await untaken(pieces("z", 48))
    expect(out.endsWith("\r\nlast-line\r\n")).toBe(true)
    expect(out.replace(/[^z]/g, "").length).toBeGreaterThan(48 * 1024 - 16)
  })

  it("is read without waiting for a process that still holds the terminal", async () => {
    const pidFile = Path.join(root, "holder.pid")
    const out = await untaken(`sleep 120 & echo $! > ${pidFile}; ${pieces("y")}`)
    const holder = Number(Fs.readFileSync(pidFile, "utf8"))
    try {
      // the end came while the holder lives: nothing waited on it
      expect(present([holder])).toEqual([holder])
      expect(out.endsWith("\r\nlast-line\r\n")).toBe(true)
      expect(out.replace(/[^y]/g, "").length).toBeGreaterThan(34 * 1024 - 16)
    } finally {
      process.kill(holder, "SIGKILL")
    }
  })

  // Linux may answer the terminal's read with 0 while the session's hangup is under way and still
  // have output to hand on (a loaded machine: 5 runs in 45 lost 1 to 5 KiB with their last line).
  // That end of file comes here as libuv takes one: its reading stopped, then the stream's end.
  it("goes on past an end of file the terminal gives before its end", async () => {
    const child = new TerminalChild({
      bash: "/bin/bash", stty: "/usr/bin/stty", mkfifo: "/usr/bin/mkfifo", env: { PATH: "/usr/bin:/bin" },
      size: terminal, gated: false, createdFiles: [], procsFiles: [], command: ["/bin/sh", "-c", "echo first-line; sleep 0.5; echo last-line"]
    })
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
    child.stderr.resume()
    let out = ""
    child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString("utf8")))
    const ended = new Promise<void>((resolve) => child.stdout.once("end", () => resolve()))
    await Effect.runPromise(waitFor(() => out.includes("first-line\r\n"), 10_000))
    const socket = (child as unknown as { pty: { _socket: { _handle: { readStop(): void }; push(chunk: null): void } } }).pty._socket
    socket._handle.readStop()
    socket.push(null)
    await exited
    await ended
    expect(out).toBe("first-line\r\nlast-line\r\n")
  })
})
