import { tools } from "../tools/registry.js"
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
  return renderValue(output)
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
