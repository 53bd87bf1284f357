// The command line's front door: what a call's arguments ask for, read before @effect/cli parses
// them (seed 001). ocx2's own options (--json, --repository, --user, --mcp) go before the tool's
// name; after it, an option of the tool's own wins (create's --user is the run's process user),
// and one the tool does not have is still taken as ocx2's own: it is moved before the tool's name,
// with its value. So `ocx2 node --repository CLONE URL FILE --check` and `ocx2 status --json` work.
// A value of one of the tool's own options is never moved, and nothing after a bare `--` is an
// option. Help, unknown options, missing values and arguments are answered here, in plain words
// that name the option and the options there are; what passes is handed on in one normal form.
// Whether a value is one the tool takes is the tool's to say (its schema), the same from every
// entry point.

import { type Field, fieldsOf, metavar as metavarOf, optionName, usage } from "../../tools/Fields.js"
import type { Tool } from "../../tools/Tool.js"

export interface GlobalOption {
  readonly name: string
  /** the value's name, for an option that takes one; none for a flag */
  readonly metavar?: string
  readonly description: string
}

/** ocx2's own options, in the order help shows them. */
export const globalOptions: ReadonlyArray<GlobalOption> = [
  { name: "json", description: "print the answer as JSON, the same JSON the CGI and MCP return" },
  {
    name: "repository",
    metavar: "FILE",
    description: "the repository file to act on: the served repository, on its host, or a clone; a file that is missing or " +
      "cannot be read is an error naming it"
  },
  {
    name: "user",
    metavar: "USER",
    description: "the Fossil user to act as, on the served repository's host (one it does not have is an error); by default the " +
      "user the clone remembers, else $USER"
  },
  {
    name: "mcp",
    description: "serve the tools over MCP on standard input and output, as ocx2-mcp does, acting as --user (or the clone's " +
      "user) within its capabilities in --repository"
  }
]

/** The options every call understands besides ocx2's own. */
export const builtInOptions: ReadonlyArray<{ readonly names: string; readonly description: string }> = [
  { names: "--help, -h", description: "this help; after a tool's name, the tool's (as ocx2 help TOOL)" },
  { names: "--version", description: "the version of ocx2" }
]

export const globalNames = (): string =>
  [...globalOptions.map((g) => (g.metavar === undefined ? `--${g.name}` : `--${g.name} ${g.metavar}`)), "--help", "--version"].join(", ")

export type Front =
  /** hand these arguments (without node and the script) to @effect/cli; the tool they call, if any */
  | { readonly _tag: "Run"; readonly args: ReadonlyArray<string>; readonly tool: Tool | undefined }
  /** help: ocx2's own (tool undefined), or the tool's */
  | { readonly _tag: "Help"; readonly tool: string | undefined; readonly json: boolean }
  | { readonly _tag: "Version" }
  /** bad usage: the message, without the program's name */
  | { readonly _tag: "Usage"; readonly message: string }

const truthy = new Set(["true", "yes", "y", "on", "1"])
const falsy = new Set(["false", "no", "n", "off", "0"])

/** `--name=value` as [name, value]; `--name` as [name, undefined]. */
const splitOption = (token: string): readonly [string, string | undefined] => {
  const equals = token.indexOf("=")
  return equals < 0 ? [token.slice(2), undefined] : [token.slice(2, equals), token.slice(equals + 1)]
}

/** A token that is an option: --name or -x, but not "-", not "--", and not a negative number. */
const isOption = (token: string): boolean => token.startsWith("-") && token !== "-" && token !== "--" && !/^-\d/.test(token)

const distance = (a: string, b: string): number => {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0]!
    row[0] = i
    for (let j = 1; j <= b.length; j++) {
      const above = row[j]!
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1))
      diagonal = above
    }
  }
  return row[b.length]!
}

/** " (did you mean --json?)" when one of the names is close to the one given. */
const suggestion = (given: string, names: ReadonlyArray<string>): string => {
  const close = names
    .map((name) => ({ name, d: distance(given.toLowerCase(), name) }))
    .filter(({ d }) => d <= Math.max(1, Math.min(2, Math.floor(given.length / 3))))
    .sort((a, b) => a.d - b.d)[0]
  return close === undefined ? "" : ` (did you mean --${close.name}?)`
}

const optionUsage = (field: Field): string =>
  field.kind === "boolean" ? `--${optionName(field)}` : `--${optionName(field)} ${metavarOf(field)}`

interface Globals {
  readonly tokens: Array<string>
  readonly given: Map<string, string | true>
}

/**
 * Reads the call's arguments (process.argv without node and the script) against the tools the
 * command line offers, and says what they ask for.
 */
export const frontDoor = (args: ReadonlyArray<string>, tools: ReadonlyArray<Tool>): Front => {
  const globals: Globals = { tokens: [], given: new Map() }
  let help = false
  let version = false
  let error: string | undefined
  const fail = (message: string) => {
    error ??= message
  }

  /** Takes ocx2's own option NAME (its value read from INLINE or the next token); returns how many tokens it used. */
  const takeGlobal = (option: GlobalOption, inline: string | undefined, next: string | undefined, where: string): number => {
    let value: string | true
    let used = 1
    if (option.metavar !== undefined) {
      const given = inline ?? next
      if (given === undefined) {
        fail(`--${option.name} needs a value: --${option.name} ${option.metavar}${where}`)
        return 1
      }
      value = given
      if (inline === undefined) used = 2
    } else {
      if (inline !== undefined && !truthy.has(inline.toLowerCase()) && !falsy.has(inline.toLowerCase())) {
        fail(`--${option.name} takes no value (or =true, =false), not '${inline}'`)
        return 1
      }
      if (inline !== undefined && falsy.has(inline.toLowerCase())) return 1
      value = true
    }
    const before = globals.given.get(option.name)
    if (before !== undefined) {
      if (before !== value) fail(`--${option.name} is given twice, as '${String(before)}' and as '${String(value)}'`)
      return used
    }
    globals.given.set(option.name, value)
    globals.tokens.push(`--${option.name}`)
    if (value !== true) globals.tokens.push(value)
    return used
  }
  const globalNamed = (name: string) => globalOptions.find((g) => g.name === name)

  // ocx2's own options, before the tool's name
  let i = 0
  for (; i < args.length; i++) {
    const token = args[i]!
    if (token === "--") {
      i++
      break
    }
    if (!isOption(token)) break
    if (token === "-h" || token === "--help") {
      help = true
      continue
    }
    if (token === "--version") {
      version = true
      continue
    }
    const [name, inline] = token.startsWith("--") ? splitOption(token) : [token, undefined]
    const option = token.startsWith("--") ? globalNamed(name) : undefined
    if (option === undefined) {
      const owners = tools.filter((t) => fieldsOf(t).some((f) => !f.positional && optionName(f) === name)).map((t) => t.name)
      const whose = owners.length > 0 ? `; --${name} is an option of ${owners.join(", ")}, and goes after the tool's name` : ""
      fail(`unknown option ${token.startsWith("--") ? `--${name}` : token}${suggestion(name, [...globalOptions.map((g) => g.name), "help", "version"])}: ` +
        `ocx2's own options are ${globalNames()}${whose}`)
      continue
    }
    i += takeGlobal(option, inline, args[i + 1], "") - 1
  }

  const name = args[i]
  if (name === undefined) {
    if (help) return { _tag: "Help", tool: undefined, json: globals.given.has("json") }
    if (error !== undefined) return { _tag: "Usage", message: error }
    if (version) return { _tag: "Version" }
    return { _tag: "Run", args: globals.tokens, tool: undefined }
  }
  const tool = tools.find((t) => t.name === name)
  if (tool === undefined) {
    return { _tag: "Usage", message: error ?? `no tool named "${name}"; the tools are ${tools.map((t) => t.name).join(", ")} (ocx2 --help)` }
  }

  // the tool's own arguments, and ocx2's own options given after its name
  const fields = fieldsOf(tool)
  const options = new Map(fields.filter((f) => !f.positional).map((f) => [optionName(f), f]))
  const dryRun: Field = { name: "dry-run", kind: "boolean", optional: true, positional: false, description: "", choices: [] }
  options.set("dry-run", dryRun)
  const positional = tool.positional.flatMap((n) => fields.filter((f) => f.name === n))
  const ownTokens: Array<string> = []
  const positionals: Array<string> = []
  const seen = new Set<string>()
  let rest = false
  const optionList = (): string =>
    [...[...options.values()].map(optionUsage), "--help"].join(", ")
  for (let j = i + 1; j < args.length; j++) {
    const token = args[j]!
    if (rest || !isOption(token)) {
      if (token === "--" && !rest) {
        rest = true
        continue
      }
      positionals.push(token)
      continue
    }
    if (token === "-h" || token === "--help") {
      help = true
      continue
    }
    const [optionName_, inline] = token.startsWith("--") ? splitOption(token) : [token, undefined]
    const own = token.startsWith("--") ? options.get(optionName_) : undefined
    if (own !== undefined) {
      if (seen.has(optionName_)) fail(`${tool.name}: --${optionName_} is given twice`)
      seen.add(optionName_)
      if (own.kind === "boolean") {
        if (inline !== undefined && !truthy.has(inline.toLowerCase()) && !falsy.has(inline.toLowerCase())) {
          fail(`${tool.name}: --${optionName_} takes no value (or =true, =false), not '${inline}'`)
        }
        ownTokens.push(`--${optionName_}=${inline !== undefined && falsy.has(inline.toLowerCase()) ? "false" : "true"}`)
        continue
      }
      const value = inline ?? args[j + 1]
      if (value === undefined) {
        fail(`${tool.name}: --${optionName_} needs a value: ${optionUsage(own)}`)
        continue
      }
      if (inline === undefined) j++
      ownTokens.push(`--${optionName_}`, value)
      continue
    }
    const global = token.startsWith("--") ? globalNamed(optionName_) : undefined
    if (global !== undefined) {
      j += takeGlobal(global, inline, args[j + 1], ` (ocx2's own option, taken after the tool's name since ${tool.name} has none of that name)`) - 1
      continue
    }
    const shown = token.startsWith("--") ? `--${optionName_}` : token
    fail(`${tool.name}: unknown option ${shown}${suggestion(optionName_, [...options.keys(), ...globalOptions.map((g) => g.name), "help"])}: ` +
      `${tool.name}'s options are ${optionList()}; ocx2's own are ${globalOptions.map((g) => `--${g.name}`).join(", ")}`)
  }

  if (help) return { _tag: "Help", tool: tool.name, json: globals.given.has("json") }
  if (error !== undefined) return { _tag: "Usage", message: error }
  // `ocx2 help` alone: ocx2's own help
  if (tool.name === "help" && positionals.length === 0) return { _tag: "Help", tool: undefined, json: globals.given.has("json") }
  // a tool's name that is none is a word of the call written wrongly, as an unknown tool is
  if (tool.name === "help" && positionals.length === 1 && !tools.some((t) => t.name === positionals[0])) {
    return { _tag: "Usage", message: `no tool named "${positionals[0]}"; the tools are ${tools.map((t) => t.name).join(", ")} (ocx2 --help)` }
  }

  const usageLine = `usage: ${usage(tool)}`
  const required = positional.filter((f) => !f.optional)
  if (positionals.length < required.length) {
    const missing = required.slice(positionals.length).map((f) => `${metavarOf(f)}${f.description !== "" ? ` (${f.description})` : ""}`)
    return { _tag: "Usage", message: `${tool.name} needs ${missing.join(" and ")}; ${usageLine}` }
  }
  if (positionals.length > positional.length) {
    const extra = positionals.slice(positional.length).map((p) => `'${p}'`).join(", ")
    const takes = positional.length === 0 ? "takes no arguments" : `takes ${positional.length === 1 ? "one argument" : `${positional.length} arguments`} (${positional.map(metavarOf).join(" ")})`
    return { _tag: "Usage", message: `${tool.name} ${takes}, and was also given ${extra}; ${usageLine}` }
  }
  // an argument that looks like an option (it came after `--`) stays an argument for @effect/cli too
  const tail = positionals.some(isOption) || positionals.includes("--") ? ["--", ...positionals] : positionals
  return { _tag: "Run", args: [...globals.tokens, tool.name, ...ownTokens, ...tail], tool }
}
