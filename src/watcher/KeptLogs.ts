// 2.10 "Kept logs": a plain post (or ticket change) holding no OCX message, with each kept
// stream's end in a fenced block headed stderr or stdout, and the exit.

import type { LaunchResult } from "../../services/SandboxLauncher.js"
import type { EndedContent } from "../protocol/Outcomes.js"
import type { Keep } from "../protocol/Run.js"

/** A fence longer than any run of backticks in the text, so nothing the process printed can close it. */
export const fenceFor = (text: string): string => {
  let longest = 0
  for (const run of text.match(/`+/g) ?? []) longest = Math.max(longest, run.length)
  return "`".repeat(Math.max(3, longest + 1))
}

const decode = (bytes: Uint8Array): string => new TextDecoder("utf-8", { fatal: false }).decode(bytes)

/** How the process ended, in words: `exited 0`, `budget: wall`, `stopped`, `exited 137 (signal 9)`. */
export const endingWords = (ended: EndedContent): string => {
  if (ended.outcome === "exited") {
    const exit = ended.exit ?? 0
    return exit > 128 && exit < 160 ? `exited ${exit} (signal ${exit - 128})` : `exited ${exit}`
  }
  return ended.note === undefined ? ended.outcome : `${ended.outcome}: ${ended.note}`
}

/** Failure for 2.10: an exit but 0, or a signal; a limit or a stop is not a clean exit either. */
export const failed = (ended: EndedContent): boolean => !(ended.outcome === "exited" && ended.exit === 0)

const block = (name: string, tail: { readonly tail: Uint8Array; readonly totalBytes: number }): string => {
  const text = decode(tail.tail)
  const fence = fenceFor(text)
  const cut = tail.totalBytes > tail.tail.length ? ` (the last ${tail.tail.length} of ${tail.totalBytes} bytes)` : ""
  return `${name}${cut}:\n\n${fence}${name}\n${text}${text.endsWith("\n") || text.length === 0 ? "" : "\n"}${fence}\n`
}

/** The kept-log text, or undefined when no kept stream printed a byte (nothing to post). */
export const keptLogText = (result: LaunchResult, ended: EndedContent, keep: Keep): string | undefined => {
  const parts: Array<string> = [`The process ${endingWords(ended)}.`, ""]
  let any = false
  if (result.stderr.totalBytes > 0) {
    parts.push(block("stderr", result.stderr))
    any = true
  }
  if (result.stdout.totalBytes > 0 && (keep.stdout_when === "always" || failed(ended))) {
    parts.push(block("stdout", result.stdout))
    any = true
  }
  return any ? parts.join("\n") : undefined
}
