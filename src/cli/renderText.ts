import { tools } from "../tools/registry.js"
import { stateWords } from "../adapters/outputPages.js"
import type { RunsOutput } from "../tools/runs.js"
import type { Answer, Tool } from "../tools/Tool.js"
import { type Look, plainLook, toolHelp, wrap, wrapUsage } from "./help.js"

// Text for people; --json prints the answer itself. Known outputs read as prose, others as key: value.

const renderValue = (value: unknown, indent = ""): string => {
  if (value === null || typeof value !== "object") return `${indent}${String(value)}`
  if (Array.isArray(value)) return value.map((v) => renderValue(v, indent)).join("\n")
  return Object.entries(value)
    .map(([key, v]) =>
      v !== null && typeof v === "object" ? `${indent}${key}:\n${renderValue(v, `${indent}  `)}` : `${indent}${key}: ${String(v)}`)
    .join("\n")
}

const renderOutput = (tool: Tool, output: any, look: Look): string => {
  if (tool.name === "list") {
    const width = Math.max(...output.tools.map((t: any) => t.name.length))
    const indent = " ".repeat(width + 2)
    return output.tools.map((t: any) =>
      [...wrap(t.summary, look.width, `${t.name.padEnd(width)}  `, indent), ...wrapUsage(t.usage, look.width, indent)].join("\n")).join("\n")
  }
  if (tool.name === "help") return toolHelp(output, tools.find((t) => t.name === output.name), look)
  if (tool.name === "runs") return runsTable(output)
  return renderValue(output)
}

/** One line a run, newest first, as a CI's list of builds reads: hash, state, node, sender, when, how long, what for. */
const runsTable = (output: RunsOutput): string => {
  const rows = output.runs.map((r) => [
    r.run.slice(0, 12), stateWords(r), r.node, r.sender ?? "?", r.posted.replace("T", " ").replace("Z", ""),
    r.seconds !== undefined ? `${r.seconds}s` : "", r.objective ?? ""
  ])
  const head = ["RUN", "STATE", "NODE", "SENDER", "POSTED (UTC)", "TOOK", "OBJECTIVE"]
  const widths = head.map((h, i) => Math.min(i === 1 ? 40 : 24, Math.max(h.length, ...rows.map((row) => row[i]!.length))))
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c.length > widths[i]! ? `${c.slice(0, widths[i]! - 1)}…` : c.padEnd(widths[i]!))).join("  ").trimEnd()
  const shown = `${output.runs.length} of ${output.total} run${output.total === 1 ? "" : "s"} (newest first)`
  return [line(head), ...rows.map(line), shown].join("\n")
}

export const renderText = (tool: Tool, answer: Answer<unknown>, look: Look = plainLook): string => {
  const lines: Array<string> = []
  for (const operation of answer.operations) lines.push(`${operation.done ? "did" : "would"}: ${operation.op} ${operation.detail}`)
  if (answer.output !== undefined) lines.push(renderOutput(tool, answer.output, look))
  if (answer.stopped.reason === "refused" || answer.stopped.reason === "failed") {
    lines.push(`${tool.name}: ${answer.stopped.reason}: ${answer.stopped.message ?? ""}`)
  }
  return lines.join("\n")
}
