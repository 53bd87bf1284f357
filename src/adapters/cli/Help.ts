// Help for people, rendered from the tool definitions (not by @effect/cli, whose help is coloured
// whatever it is printed to and repeats its own words under every option): plain text wrapped to
// the width given, coloured only where the caller says it may be (a terminal, NO_COLOR unset).

import { type Field, fieldsOf, metavar, optionName, takesObject, usage } from "../../tools/Fields.js"
import type { Tool } from "../../tools/Tool.js"
import { builtInOptions, globalOptions } from "./Front.js"

export interface Look {
  /** the widest line, at most */
  readonly width: number
  /** whether headings may be bold */
  readonly colour: boolean
}

/** Plain text, 100 columns: for a pipe, a file, or a test. */
export const plainLook: Look = { width: 100, colour: false }

/** How help looks on this process's standard output: colour only on a terminal without NO_COLOR. */
export const lookOf = (stream: { readonly isTTY?: boolean; readonly columns?: number } = process.stdout, env: NodeJS.ProcessEnv = process.env): Look => {
  const tty = stream.isTTY === true
  const columns = tty && typeof stream.columns === "number" && stream.columns > 0 ? stream.columns : 100
  return { width: Math.max(40, Math.min(100, columns)), colour: tty && (env["NO_COLOR"] === undefined || env["NO_COLOR"] === "") }
}

const heading = (look: Look, text: string): string => (look.colour ? `\x1b[1m${text}\x1b[0m` : text)

/** Splits usage into the parts a line may break between: a bracketed or quoted part stays whole. */
const usageParts = (line: string): Array<string> => {
  const parts: Array<string> = []
  let current = ""
  let depth = 0
  let quoted = false
  for (const c of line) {
    if (c === "'") quoted = !quoted
    else if (!quoted && c === "[") depth++
    else if (!quoted && c === "]") depth--
    if (c === " " && depth === 0 && !quoted) {
      if (current !== "") parts.push(current)
      current = ""
    } else current += c
  }
  if (current !== "") parts.push(current)
  return parts
}

/** Words (or parts) filled into lines of at most WIDTH, the first starting with FIRST and the rest with INDENT. */
const fill = (words: ReadonlyArray<string>, width: number, first: string, indent: string): Array<string> => {
  const lines: Array<string> = []
  let line = first
  let empty = true
  for (const word of words) {
    if (!empty && line.length + 1 + word.length > width) {
      lines.push(line)
      line = indent + word
    } else {
      line = empty ? line + word : `${line} ${word}`
    }
    empty = false
  }
  lines.push(line)
  return lines.map((l) => l.trimEnd())
}

/** A paragraph wrapped to WIDTH, each line after the first indented by INDENT. */
export const wrap = (text: string, width: number, first = "", indent = first.replace(/./g, " ")): Array<string> =>
  fill(text.split(/\s+/).filter((w) => w.length > 0), width, first, indent)

/** A usage line wrapped to WIDTH, its continuation indented under the tool's arguments. */
export const wrapUsage = (line: string, width: number, first = ""): Array<string> => {
  const parts = usageParts(line)
  const lead = parts.slice(0, 2).join(" ") // ocx2 TOOL
  return fill(parts.slice(2), width, `${first}${lead} `, " ".repeat(first.length + lead.length + 1))
}

/** NAME, then its description in a column; on the next line when the name is wider than the column. */
const entry = (look: Look, name: string, description: string, column: number): Array<string> => {
  const lead = `  ${name}`
  const pad = " ".repeat(column)
  if (description === "") return [lead]
  if (lead.length + 2 <= column) return wrap(description, look.width, lead.padEnd(column), pad)
  return [lead, ...wrap(description, look.width, pad, pad)]
}

const cliNote = (tool: Tool, field: Field): string => {
  const parts: Array<string> = []
  if (field.kind === "json") {
    parts.push(`${takesObject(tool, field.name) ? "a JSON object" : "JSON"}; @FILE reads it from FILE, and - from standard input`)
  }
  if (field.kind === "list") parts.push("one argument, its words separated by spaces")
  if (!field.optional && !field.positional && field.kind !== "boolean") parts.push("required")
  return parts.length === 0 ? "" : ` (${parts.join("; ")})`
}

const exitCodes = (look: Look): Array<string> => [
  heading(look, "Exit status:"),
  ...entry(look, "0", "done (a dry run too)", 6),
  ...entry(look, "1", "refused or failed (a repository file that cannot be read, a --user it does not have, a capability " +
    "missing; watch --exit-status: the run did not exit 0; doctor: a check FAILs)", 6),
  ...entry(look, "2", "bad usage: an unknown option or tool, a missing or extra argument, a value the tool does not take, " +
    "a JSON argument that does not parse", 6)
]

/** `ocx2 --help`: what ocx2 is, how a call is written, its own options, the tools, and the exit status. */
export const rootHelp = (tools: ReadonlyArray<Tool>, version: string, look: Look): string => {
  const column = 24
  const names = Math.max(...tools.map((t) => t.name.length))
  const lines = [
    `ocx2 ${version}: a Fossil repository as the control plane for sandboxed runs`,
    "",
    heading(look, "Usage:"),
    ...wrapUsage("ocx2 [--json] [--repository FILE] [--user USER] TOOL [ARGUMENTS] [OPTIONS]", look.width, "  "),
    ...entry(look, "ocx2 help TOOL", "what a tool does, and its arguments and options (also ocx2 TOOL --help)", column),
    ...entry(look, "ocx2 list", "the tools, each with its usage (ocx2 alone does the same)", column),
    ...wrapUsage("ocx2 [--repository FILE] [--user USER] --mcp", look.width, "  "),
    "",
    heading(look, "Options of ocx2's own:"),
    ...wrap(
      "They go before the tool's name. After it, an option of the tool's own wins (create's --user is the run's " +
        "process user); one the tool does not have is still taken as ocx2's own, so `ocx2 status --json` works.",
      look.width,
      "  "
    ),
    ...globalOptions.flatMap((g) => entry(look, g.metavar === undefined ? `--${g.name}` : `--${g.name} ${g.metavar}`, g.description, column)),
    ...builtInOptions.flatMap((b) => entry(look, b.names, b.description, column)),
    "",
    heading(look, "Tools:"),
    ...tools.flatMap((t) => wrap(t.summary, look.width, `  - ${t.name.padEnd(names)}  `, " ".repeat(names + 6))),
    "",
    ...wrap("Every tool takes --dry-run: it says exactly what it would do, and does nothing.", look.width),
    "",
    ...exitCodes(look)
  ]
  return lines.join("\n")
}

/** What the help tool answers, as its output holds it. */
export interface HelpOutput {
  readonly name: string
  readonly summary: string
  readonly description: string
  readonly usage: string
}

/** `ocx2 help TOOL`, `ocx2 TOOL --help`: its usage, what it does, its arguments and options, each with its description. */
export const toolHelp = (output: HelpOutput, tool: Tool | undefined, look: Look): string => {
  const column = 26
  const fields = tool === undefined ? [] : fieldsOf(tool)
  const positional = tool === undefined ? [] : tool.positional.flatMap((n) => fields.filter((f) => f.name === n))
  const options = fields.filter((f) => !f.positional)
  const lines = [
    ...wrapUsage(tool === undefined ? output.usage : usage(tool), look.width, "usage: "),
    "",
    ...wrap(`${output.summary}. ${output.description}`, look.width)
  ]
  if (positional.length > 0) {
    lines.push("", heading(look, "Arguments:"))
    for (const f of positional) lines.push(...entry(look, f.optional ? `[${metavar(f)}]` : metavar(f), `${f.description}${cliNote(tool!, f)}`, column))
  }
  lines.push("", heading(look, "Options:"))
  for (const f of options) {
    const name = f.kind === "boolean" ? `--${optionName(f)}` : `--${optionName(f)} ${metavar(f)}`
    lines.push(...entry(look, name, `${f.description}${cliNote(tool!, f)}`, column))
  }
  lines.push(
    ...entry(look, "--dry-run", "say exactly what would be done, and do nothing", column),
    ...entry(look, "--help, -h", "this help", column),
    "",
    ...wrap(
      `ocx2's own options (${globalOptions.map((g) => (g.metavar === undefined ? `--${g.name}` : `--${g.name} ${g.metavar}`)).join(", ")}) ` +
        "go before the tool's name, or after it where the tool has no option of " +
        "that name (ocx2 --help).",
      look.width
    ),
    ...wrap("Exit status: 0 done (a dry run too), 1 failed, 2 refused or bad usage.", look.width)
  )
  return lines.join("\n")
}
