// Which Fossil branch each imported commit lands on. git fast-export names a commit after one of
// the refs that reach it, and which one follows its walk, not the history: the first commit of
// an upstream is often named after a side branch. Fossil's importer then puts that commit on the
// side branch *and* on trunk, every later commit inherits trunk, and "trunk" resolves to
// whichever branch moved last. So the stream is relabelled before Fossil reads it: a commit
// belongs to the first branch whose first-parent line holds it, the upstream's own branch
// first, then the others by name, as a person reading `git log --first-parent` would say.
import * as Fs from "node:fs"

/** A file the sandbox wrote, read without following a link it may have put in its place. */
export const readNoFollow = (file: string): string => {
  const fd = Fs.openSync(file, Fs.constants.O_RDONLY | Fs.constants.O_NOFOLLOW)
  try {
    return Fs.readFileSync(fd, "utf8")
  } finally {
    Fs.closeSync(fd)
  }
}

/**
 * The branch of each commit, from `#BRANCH` lines each followed by that branch's
 * `git rev-list --first-parent` (the upstream's own branch first). A commit on several lines
 * keeps the first; the upstream's own branch is named `master`, as the export renamed it.
 */
export const firstParentBranches = (listing: string, mainBranch: string): ReadonlyMap<string, string> => {
  const labels = new Map<string, string>()
  let branch: string | undefined
  for (const line of listing.split("\n")) {
    if (line.startsWith("#")) {
      const name = line.slice(1)
      branch = name === mainBranch ? "master" : name
    } else if (line !== "" && branch !== undefined && !labels.has(line)) {
      labels.set(line, branch)
    }
  }
  return labels
}

const chunkSize = 1 << 16

/**
 * Copies a fast-export stream written with `--show-original-ids`, naming each commit's ref after
 * its branch in `labels` (a commit not there keeps the ref git gave it) and dropping the
 * `original-oid` lines Fossil's importer does not read. Data is copied by its declared length,
 * never looked into, so no byte of a file or a message can pass for a command. Streams the file:
 * an upstream's history need not fit in memory.
 */
export const relabelStream = (inputFile: string, outputFile: string, labels: ReadonlyMap<string, string>): void => {
  // the files are in a directory the sandbox wrote: a link there must not lead outside it
  const input = Fs.openSync(inputFile, Fs.constants.O_RDONLY | Fs.constants.O_NOFOLLOW)
  Fs.rmSync(outputFile, { force: true })
  let output: number
  try {
    output = Fs.openSync(outputFile, Fs.constants.O_WRONLY | Fs.constants.O_CREAT | Fs.constants.O_EXCL | Fs.constants.O_NOFOLLOW, 0o600)
  } catch (e) {
    Fs.closeSync(input)
    throw e
  }
  try {
    let buffer = Buffer.alloc(0)
    let ended = false
    const more = (): boolean => {
      if (ended) return false
      const chunk = Buffer.allocUnsafe(chunkSize)
      const n = Fs.readSync(input, chunk, 0, chunkSize, null)
      if (n === 0) {
        ended = true
        return false
      }
      buffer = buffer.length === 0 ? chunk.subarray(0, n) : Buffer.concat([buffer, chunk.subarray(0, n)])
      return true
    }
    // written in large pieces: a history is many short lines
    let pending: Array<Buffer> = []
    let pendingBytes = 0
    const flush = () => {
      if (pendingBytes > 0) Fs.writeSync(output, Buffer.concat(pending, pendingBytes))
      pending = []
      pendingBytes = 0
    }
    // lines are read and written as latin1, byte for byte: a path or a name need not be UTF-8
    const write = (bytes: Buffer | string) => {
      const piece = typeof bytes === "string" ? Buffer.from(bytes, "latin1") : Buffer.from(bytes)
      pending.push(piece)
      pendingBytes += piece.length
      if (pendingBytes >= chunkSize) flush()
    }
    /** the next line without its newline, or undefined at the end of the stream */
    const nextLine = (): string | undefined => {
      for (;;) {
        const at = buffer.indexOf(10)
        if (at >= 0) {
          const line = buffer.subarray(0, at).toString("latin1")
          buffer = buffer.subarray(at + 1)
          return line
        }
        if (!more()) {
          if (buffer.length === 0) return undefined
          const line = buffer.toString("latin1")
          buffer = Buffer.alloc(0)
          return line
        }
      }
    }
    const copyData = (length: number) => {
      let left = length
      while (left > 0) {
        if (buffer.length === 0 && !more()) throw new Error(`the fast-export stream ends inside a data block (${left} bytes missing)`)
        const take = Math.min(left, buffer.length)
        write(buffer.subarray(0, take))
        buffer = buffer.subarray(take)
        left -= take
      }
    }
    // a commit's ref line waits for its original-oid, which follows its mark
    let commit: { readonly ref: string; readonly held: Array<string> } | undefined
    const flushCommit = (oid: string | undefined) => {
      if (commit === undefined) return
      const branch = oid !== undefined ? labels.get(oid) : undefined
      write(branch !== undefined ? Buffer.from(`commit refs/heads/${branch}\n`, "utf8") : `commit ${commit.ref}\n`)
      for (const line of commit.held) write(`${line}\n`)
      commit = undefined
    }
    for (;;) {
      const line = nextLine()
      if (line === undefined) break
      if (commit !== undefined) {
        if (line.startsWith("mark ")) {
          commit.held.push(line)
          continue
        }
        if (line.startsWith("original-oid ")) {
          flushCommit(line.slice("original-oid ".length).trim())
          continue
        }
        flushCommit(undefined)
      }
      if (line.startsWith("commit ")) {
        commit = { ref: line.slice("commit ".length), held: [] }
      } else if (line.startsWith("original-oid ")) {
        // a blob's or a tag's: Fossil's importer does not read them
      } else if (line.startsWith("data ")) {
        const declared = line.slice("data ".length)
        if (!/^\d+$/.test(declared)) throw new Error(`the fast-export stream has a data command this reader does not take: ${line.slice(0, 40)}`)
        write(`${line}\n`)
        copyData(Number(declared))
      } else {
        write(`${line}\n`)
      }
    }
    flushCommit(undefined)
    flush()
  } finally {
    Fs.closeSync(input)
    Fs.closeSync(output)
  }
}
