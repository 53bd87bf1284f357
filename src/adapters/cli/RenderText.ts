// Text for people; --json prints the answer itself. Known outputs read as prose, others as key: value.

import { tools } from "../../tools/Registry.js"
import { stateWords } from "../OutputPages.js"
import type { DoctorOutput } from "../../tools/doctor.js"
import type { ReadOutput } from "../../tools/read.js"
import type { RunsOutput } from "../../tools/runs.js"
import type { WatchOutput } from "../../tools/watch.js"
import type { Answer, Tool } from "../../tools/Tool.js"
import { type Look, plainLook, toolHelp, wrap, wrapUsage } from "./Help.js"

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
  if (tool.name === "read") return recordText(output)
  if (tool.name === "watch") return watchText(output)
  if (tool.name === "doctor") return doctorText(output)
  return renderValue(output)
}

/** One line a finding: "ok: ..." or "FAIL: ... — fix: ...", then whether all hold. */
const doctorText = (output: DoctorOutput): string =>
  [
    ...output.findings.map((f) => f.ok ? `ok: ${f.check}: ${f.words}` : `FAIL: ${f.check}: ${f.words}${f.fix !== undefined ? ` — fix: ${f.fix}` : ""}`),
    ...(output.findings.length > 0 ? [output.ok ? "every check holds" : `${output.findings.filter((f) => !f.ok).length} of ${output.findings.length} checks FAIL`] : [])
  ].join("\n")

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

const postsText = (posts: ReadOutput["posts"]): Array<string> =>
  (posts ?? []).flatMap((p) => [
    `--- ${p.hash.slice(0, 12)} ${p.kind} by ${p.sender ?? p.user} at ${p.time.replace("T", " ").replace("Z", " UTC")}${p.title !== undefined ? `: ${p.title}` : ""}`,
    p.text.replace(/\n$/, ""),
    ""
  ])

/** A record as a person reads it at a terminal: a file's text as it is (as fossil cat prints it), posts one after another. */
const recordText = (output: ReadOutput): string => {
  if (output.file !== undefined) {
    const f = output.file
    if (f.binary) return `${f.path} at ${f.checkin}: a binary file of ${f.size} bytes, ${f.hash}`
    return `${f.text ?? ""}${f.cut === true ? `\n[cut: the first 1 MiB of ${f.size} bytes]` : ""}`.replace(/\n$/, "")
  }
  if (output.checkin !== undefined) {
    const c = output.checkin
    return [
      `check-in ${c.hash}${c.branch !== undefined ? ` on ${c.branch}` : ""} by ${c.user}${c.sender !== undefined && c.sender !== c.user ? ` (received from ${c.sender})` : ""} at ${c.time}`,
      c.comment, "", ...c.files.map((f) => `${f.hash.slice(0, 12)}  ${f.path}`)
    ].join("\n")
  }
  const lines: Array<string> = []
  if (output.run !== undefined) {
    const r = output.run.summary
    lines.push(`run ${r.run} for ${r.node}: ${stateWords(r)}${r.seconds !== undefined ? `, ${r.seconds}s` : ""}; posted ${r.posted}${r.started !== undefined ? `, started ${r.started}` : ""}${r.ended !== undefined ? `, ended ${r.ended}` : ""}`)
    for (const v of output.run.verdicts) lines.push(`verdict on ${v.checkin.slice(0, 12)}: ${v.value}`)
    for (const p of output.run.published) lines.push(`published ${p.as}: ${p.hash ?? "not in the repository"}`)
    lines.push("")
  }
  if (output.ticket !== undefined) {
    lines.push(`ticket ${output.ticket.id}`, ...Object.entries(output.ticket.fields).filter(([k]) => ["title", "status", "type"].includes(k)).map(([k, v]) => `${k}: ${v}`), "")
    lines.push(...postsText(output.ticket.changes))
  }
  lines.push(...postsText(output.posts))
  return lines.join("\n").trimEnd()
}

/** The end of a watch: the run's state, once its output was printed as it came. */
const watchText = (output: WatchOutput): string => {
  const r = output.summary
  const took = r.seconds !== undefined ? ` after ${r.seconds} s` : ""
  const held = output.held !== undefined ? `\n${output.held}` : ""
  return (output.over
    ? `run ${r.run}: ${stateWords(r)}${took}`
    : `run ${r.run}: ${stateWords(r)}${took}; still going (ocx2 watch ${r.run.slice(0, 12)} --offset ${output.offset} goes on)`) + held
}

export const renderText = (tool: Tool, answer: Answer<unknown>, look: Look = plainLook): string => {
  const lines: Array<string> = []
  // a record or a list printed as such is its own account of what was read (a file prints as it is, for a pipe)
  const plain = (tool.name === "read" || tool.name === "runs" || tool.name === "watch") && answer.output !== undefined
  if (!plain) for (const operation of answer.operations) lines.push(`${operation.done ? "did" : "would"}: ${operation.op} ${operation.detail}`)
  if (answer.output !== undefined) lines.push(renderOutput(tool, answer.output, look))
  if (answer.stopped.reason === "refused" || answer.stopped.reason === "failed") {
    lines.push(`${tool.name}: ${answer.stopped.reason}: ${answer.stopped.message ?? ""}`)
  }
  return lines.join("\n")
}
