import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { Deployment } from "../../services/Deployer.js"
import { isIdentity } from "./ContainerNames.js"

/**
 * A container program's standard output and error (docs/containers.md section 11, "A program's
 * output"): kept per identity and container id under `ROOT/output/IDENTITY/ID/`, each stream a
 * file of at most `outputBound` bytes holding its last part, and read back by the identity that
 * ran it with `containers::output`.
 */

/** the most of each stream a container's directory keeps: its last part */
export const outputBound = 256 * 1024

export type OutputStream = "stdout" | "stderr"

/** the program's two streams, where a deployer gives them (the bubblewrap deployer does) */
export interface ProgramOutput {
  readonly stdout: NodeJS.ReadableStream
  readonly stderr: NodeJS.ReadableStream
}

/** what a deployment gives beside the Deployer service's Deployment, which does not name it (yet) */
export interface WithProgramOutput {
  readonly output?: ProgramOutput
}

export const programOutputOf = (deployment: Deployment): ProgramOutput | undefined => (deployment as Deployment & WithProgramOutput).output

export const outputTop = (root: string): string => Path.join(root, "output")

/** a container id as the server mints it: 32 random bytes, base64url */
export const isContainerId = (s: string): boolean => /^[A-Za-z0-9_-]{43}$/.test(s)

/**
 * A file that never passes BOUND bytes: when a write would pass it, the file keeps its last half
 * of the bound (the end of the stream, as BoundedLog of layers/BwrapSandbox.ts keeps a run's
 * log) and grows again from there, so each rewrite is paid for by half a bound of new bytes.
 */
export class BoundedFile {
  private size = 0
  constructor(
    readonly fd: number,
    readonly bound: number
  ) {}

  write(chunk: Uint8Array): void {
    if (this.size + chunk.length <= this.bound) return this.append(chunk)
    const keep = Math.floor(this.bound / 2)
    const fromChunk = Math.min(chunk.length, keep)
    const fromFile = Math.min(this.size, keep - fromChunk)
    // at most half a bound, read before anything is written over it
    const kept = Buffer.alloc(fromFile)
    if (fromFile > 0) Fs.readSync(this.fd, kept, 0, fromFile, this.size - fromFile)
    this.size = 0
    Fs.ftruncateSync(this.fd, 0)
    this.append(kept)
    this.append(chunk.subarray(chunk.length - fromChunk))
  }

  private append(bytes: Uint8Array): void {
    for (let off = 0; off < bytes.length;) off += Fs.writeSync(this.fd, bytes, off, bytes.length - off, this.size + off)
    this.size += bytes.length
  }
}

/** opens FILE, new, for reading and writing, never through a link */
const openNew = (file: string): number => {
  const c = Fs.constants
  return Fs.openSync(file, c.O_RDWR | c.O_CREAT | c.O_EXCL | c.O_NOFOLLOW, 0o600)
}

/** How many containers' output each identity keeps: the newest; with each stream bounded, about 50 MiB an identity at most. */
export const outputsKept = 100
/** A run's output not yet named by an id (`.run-…`) that is this old was left by a server that died. */
const unnamedKeptMs = 24 * 60 * 60 * 1000

/**
 * Keeps the newest `keep` containers' output of one identity (by when each was made or named) and
 * removes the rest, and what a dead server left unnamed: without it ROOT/output grew with every run.
 */
export const pruneOutputs = (top: string, keep = outputsKept, now = Date.now()): number => {
  let entries: Array<{ readonly path: string; readonly named: boolean; readonly mtime: number }>
  try {
    entries = Fs.readdirSync(top).flatMap((name) => {
      const path = Path.join(top, name)
      try {
        return [{ path, named: isContainerId(name), mtime: Fs.lstatSync(path).mtimeMs }]
      } catch {
        return []
      }
    })
  } catch {
    return 0
  }
  const named = entries.filter((e) => e.named).sort((a, b) => b.mtime - a.mtime)
  const gone = [...named.slice(keep), ...entries.filter((e) => !e.named && now - e.mtime > unnamedKeptMs)]
  for (const e of gone) Fs.rmSync(e.path, { recursive: true, force: true })
  return gone.length
}

/**
 * The output of one run, kept from the deploy on: written first under a name of its own
 * (`.run-RANDOM`, since the id is minted only after the proxy's Begun, and a program may print
 * before that), named by the id once it is minted, removed when the run ends without one.
 */
export class KeptOutput {
  private dir: string
  private open = 2
  private markEnded!: () => void
  /** resolves once both streams reached their end (every writer of them gone) and are written */
  readonly ended = new Promise<void>((resolve) => (this.markEnded = resolve))

  private constructor(
    private readonly top: string,
    output: ProgramOutput
  ) {
    Fs.mkdirSync(top, { recursive: true, mode: 0o700 })
    // room for this one among the identity's newest (one fewer kept, since this one joins them)
    pruneOutputs(top, outputsKept - 1)
    this.dir = Path.join(top, `.run-${Crypto.randomBytes(8).toString("hex")}`)
    Fs.mkdirSync(this.dir, { mode: 0o700 })
    this.keep(output.stdout, "stdout")
    this.keep(output.stderr, "stderr")
  }

  /** the output of DEPLOYMENT kept for IDENTITY under ROOT; undefined when its deployer gives none */
  static of(root: string, identity: string, deployment: Deployment): KeptOutput | undefined {
    const output = programOutputOf(deployment)
    return output === undefined ? undefined : new KeptOutput(Path.join(outputTop(root), identity), output)
  }

  private keep(stream: NodeJS.ReadableStream, name: OutputStream): void {
    const fd = openNew(Path.join(this.dir, name))
    const file = new BoundedFile(fd, outputBound)
    let closed = false
    let skipping = false
    const close = () => {
      if (closed) return
      closed = true
      Fs.closeSync(fd)
      if (--this.open === 0) this.markEnded()
    }
    stream.on("data", (chunk: Buffer) => {
      if (closed || skipping) return
      try {
        file.write(chunk)
      } catch {
        // the server's disk refused it (full, say): the rest of this stream is read and not kept,
        // rather than the program blocked on its pipe or the server ended by a throw
        skipping = true
      }
    })
    stream.once("end", close)
    stream.once("close", close)
    stream.once("error", close)
  }

  /** the id minted: the output is the container's from now on */
  named(id: string): void {
    const to = Path.join(this.top, id)
    Fs.renameSync(this.dir, to)
    this.dir = to
  }

  /** the run ended with no id sent: nobody can ask for its output */
  forget(): void {
    Fs.rmSync(this.dir, { recursive: true, force: true })
  }
}

/** what IDENTITY's container ID wrote on STREAM (its last `outputBound` bytes at most), or undefined: no such container of this identity */
export const readOutput = (root: string, identity: string, id: string, stream: OutputStream): Buffer | undefined => {
  if (!isIdentity(identity) || !isContainerId(id)) return undefined
  try {
    const fd = Fs.openSync(Path.join(outputTop(root), identity, id, stream), Fs.constants.O_RDONLY | Fs.constants.O_NOFOLLOW)
    try {
      return Fs.readFileSync(fd)
    } finally {
      Fs.closeSync(fd)
    }
  } catch {
    return undefined
  }
}
