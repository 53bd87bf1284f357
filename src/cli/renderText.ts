import type { Answer, Tool } from "../tools/Tool.js"

// Text for people; --json prints the answer itself. Known outputs read as prose, others as key: value.

const renderValue = (value: unknown, indent = ""): string => {
  if (value === null || typeof value !== "object") return `${indent}${String(value)}`
  if (Array.isArray(value)) return value.map((v) => renderValue(v, indent)).join("\n")
  return Object.entries(value)
    .map(([key, v]) =>
      v !== null && typeof v === "object" ? `${indent}${key}:\n${renderValue(v, `${indent}  `)}` : `${indent}${key}: ${String(v)}`)
    .join("\n")
}

const renderOutput = (tool: Tool, output: any): string => {
  if (tool.name === "list") {
    const width = Math.max(...output.tools.map((t: any) => t.name.length))
    return output.tools.map((t: any) => `${t.name.padEnd(width)}  ${t.summary}\n${" ".repeat(width + 2)}${t.usage}`).join("\n")
  }
  if (tool.name === "help") {
    const fields = output.fields.map((f: any) =>
      `  ${f.option}${f.optional ? " (optional)" : ""}  ${f.kind}${f.description ? `: ${f.description}` : ""}`)
    return [`${output.usage}`, "", `${output.summary}. ${output.description}`, "", ...fields, "  --dry-run  say what would be done, and do nothing"].join("\n")
  }
  return renderValue(output)
}

export const renderText = (tool: Tool, answer: Answer<unknown>): string => {
  const lines: Array<string> = []
  for (const operation of answer.operations) lines.push(`${operation.done ? "did" : "would"}: ${operation.op} ${operation.detail}`)
  if (answer.output !== undefined) lines.push(renderOutput(tool, answer.output))
  if (answer.stopped.reason === "refused" || answer.stopped.reason === "failed") {
    lines.push(`${tool.name}: ${answer.stopped.reason}: ${answer.stopped.message ?? ""}`)
  }
  return lines.join("\n")
}
