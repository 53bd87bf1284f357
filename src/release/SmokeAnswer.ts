// The smoke test of a staged copy: its ocx2 must answer `--json list` as the tools answer.

/** The arguments the staged ocx2 is smoked with. */
export const smokeArguments = ["--json", "list"] as const

/** undefined when the output is a completed answer of the list tool; otherwise what is wrong. */
export const checkSmokeAnswer = (stdout: string): string | undefined => {
  let answer: unknown
  try {
    answer = JSON.parse(stdout)
  } catch {
    const shown = stdout.trim().slice(0, 200)
    return shown.length === 0 ? "it printed nothing" : `it printed no JSON answer: ${shown}`
  }
  if (typeof answer !== "object" || answer === null) return "its answer is not a JSON object"
  const { tool, stopped, output } = answer as { tool?: unknown; stopped?: { reason?: unknown }; output?: { tools?: unknown } }
  if (tool !== "list") return `its answer names the tool ${JSON.stringify(tool)}, not "list"`
  if (stopped?.reason !== "completed") return `its answer stopped ${JSON.stringify(stopped?.reason)}, not "completed"`
  if (!Array.isArray(output?.tools)) return "its answer lists no tools"
  return undefined
}
