// Who answers a run with no valid `to` (DECISIONS 16): the served repository's own node, which
// refuses it (refusal 2, naming `to`) once; no clone node could ever answer it. Several nodes may
// work on one served file (a release root each, each with its hook), so one rule names one of
// them, read from the served repository alone, so that every node and every reader on the
// server's host agrees: the node of the first ocx2 hook in the order Fossil runs the
// repository's hooks (its `seq`, then its place in the list), whose release root has a node on
// the repository. Nothing here writes; a repository or root that cannot be read names no one.

import * as Fs from "node:fs"
import * as Path from "node:path"
import { openDatabase } from "../fossil/Sqlite.js"
import { rootOfProgram } from "../release/ReleasePaths.js"
import { canonicalRepository, nodeOf } from "./HookFiles.js"

interface HookEntry {
  readonly cmd?: unknown
  readonly type?: unknown
  readonly seq?: unknown
}

/** The words of a hook command as /bin/sh reads plain words and single or double quotes; enough for what `hook` installs. */
export const shellWords = (command: string): ReadonlyArray<string> => {
  const words: Array<string> = []
  let word: string | undefined
  for (let i = 0; i < command.length; i++) {
    const c = command[i]!
    if (c === "'" || c === "\"") {
      const end = command.indexOf(c, i + 1)
      word = (word ?? "") + command.slice(i + 1, end < 0 ? command.length : end)
      i = end < 0 ? command.length : end
    } else if (c === "\\" && i + 1 < command.length) {
      word = (word ?? "") + command[++i]
    } else if (/\s/.test(c)) {
      if (word !== undefined) words.push(word)
      word = undefined
    } else word = (word ?? "") + c
  }
  if (word !== undefined) words.push(word)
  return words
}

/**
 * The release root an ocx2 hook command acts for, found as that hook finds its own (HookFast's
 * hookRoot, not imported: the hook's entry is no part of what reads a run's record): its
 * `--root`, or the release root its program lies in, or the root of its `--log ROOT/node/hook.log`.
 */
export const rootOfHookCommand = (command: string): string | undefined => {
  const words = shellWords(command)
  const program = words.findIndex((w) => /^ocx2-hook(\.mjs)?$/.test(Path.basename(w)))
  if (program < 0) return undefined
  const rest = words.slice(program + 1)
  const option = (name: string) => {
    const at = rest.indexOf(name)
    return at >= 0 && at + 1 < rest.length ? Path.resolve(rest[at + 1]!) : undefined
  }
  const given = option("--root")
  if (given !== undefined) return given
  try {
    const released = rootOfProgram(Fs.realpathSync(words[program]!))
    if (released !== undefined) return released
  } catch {
    // no such program: the log's place says
  }
  const log = option("--log")
  return log !== undefined && Path.basename(Path.dirname(log)) === "node" ? Path.dirname(Path.dirname(log)) : undefined
}

/** The hooks of the repository in the order Fossil runs them: after-receive ones, by `seq`, then by place. */
const hooksInOrder = (repository: string): ReadonlyArray<string> => {
  const db = openDatabase(repository, { readonly: true, fileMustExist: true })
  let text: unknown
  try {
    text = db.prepare<[], { value: unknown }>("SELECT value FROM config WHERE name = 'hooks'").get()?.value
  } finally {
    db.close()
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(String(text ?? "[]"))
  } catch {
    return []
  }
  if (!Array.isArray(parsed)) return []
  return (parsed as ReadonlyArray<HookEntry>)
    .map((h, index) => ({ command: String(h?.cmd ?? ""), type: String(h?.type ?? ""), seq: Number(h?.seq ?? 10), index }))
    .filter((h) => h.type === "after-receive")
    .sort((a, b) => (a.seq - b.seq) || (a.index - b.index))
    .map((h) => h.command)
}

/** The node user who answers the served repository's runs with no valid `to`, or undefined when none is installed. */
export const tolessAnswerer = (repository: string): string | undefined => {
  try {
    const served = canonicalRepository(repository)
    for (const command of hooksInOrder(served)) {
      const root = rootOfHookCommand(command)
      const node = root === undefined ? undefined : nodeOf(root, served)
      if (node !== undefined) return node.user
    }
  } catch {
    // a repository that cannot be read names no one: the run waits for a round that can read it
  }
  return undefined
}
