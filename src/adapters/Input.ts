// How an entry point turns what it received into a tool's raw input and the dry-run flag.
// It only encodes: the tool's schema, in runTool, decides whether the input is right.

import { fieldsOf, type Field } from "../tools/Fields.js"
import type { Tool } from "../tools/Tool.js"
import { parseJsonText } from "./JsonText.js"

/** Names the adapters take for themselves; every other name is the tool's. */
export const DRY_RUN = "dry_run"
export const FORMAT = "format"

export type Decoded =
  | { readonly _tag: "Input"; readonly raw: Record<string, unknown>; readonly dryRun: boolean }
  | { readonly _tag: "Problem"; readonly message: string }

const problem = (message: string): Decoded => ({ _tag: "Problem", message })

/** MCP's arguments and a JSON body: an object whose `dry_run`, when given, is a boolean. */
export const fromObject = (value: unknown): Decoded => {
  if (value === undefined || value === null) return { _tag: "Input", raw: {}, dryRun: false }
  if (typeof value !== "object" || Array.isArray(value)) return problem(`the arguments must be a JSON object, not ${JSON.stringify(value)}`)
  const { [DRY_RUN]: dryRun, ...raw } = value as Record<string, unknown>
  if (dryRun !== undefined && typeof dryRun !== "boolean") return problem(`${DRY_RUN}: expected a boolean, not ${JSON.stringify(dryRun)}`)
  return { _tag: "Input", raw, dryRun: dryRun === true }
}

const TRUE = new Set(["on", "true", "1", "yes"])
const FALSE = new Set(["off", "false", "0", "no", ""])

/** A form's JSON field that does not parse: said where, by fromForm, rather than handed to the schema as text. */
class NotJson {
  constructor(readonly problem: string) {}
}

const formValue = (field: Field, value: string): unknown => {
  switch (field.kind) {
    case "boolean":
      return TRUE.has(value.toLowerCase()) ? true : FALSE.has(value.toLowerCase()) ? false : value
    case "integer":
    case "number":
      return value.trim() !== "" && Number.isFinite(Number(value)) ? Number(value) : value
    case "list":
      return value.split(/\s+/).filter((s) => s.length > 0)
    case "json": {
      const parsed = parseJsonText(value)
      return "value" in parsed ? parsed.value : new NotJson(parsed.problem)
    }
    default:
      return value
  }
}

/**
 * A web form (or a query string): each field as its form control sends it. An empty control of
 * an optional field, and an unchecked optional box, mean "not given", as on the command line.
 */
export const fromForm = (tool: Tool, params: URLSearchParams): Decoded => {
  const raw: Record<string, unknown> = {}
  const fields = fieldsOf(tool)
  for (const field of fields) {
    const value = params.get(field.name)
    if (value === null) {
      if (field.kind === "boolean" && !field.optional) raw[field.name] = false
      continue
    }
    if (value === "" && field.optional && field.kind !== "boolean") continue
    const decoded = formValue(field, value)
    if (decoded instanceof NotJson) return problem(`bad argument: ${field.name}: ${decoded.problem}`)
    if (decoded === false && field.optional) continue
    raw[field.name] = decoded
  }
  // Names that are not fields go to the tool as they are, so its schema refuses them by name.
  for (const [name, value] of params) {
    if (name !== DRY_RUN && name !== FORMAT && !fields.some((f) => f.name === name) && !(name in raw)) raw[name] = value
  }
  const dryRun = params.get(DRY_RUN)
  if (dryRun !== null && !TRUE.has(dryRun.toLowerCase()) && !FALSE.has(dryRun.toLowerCase())) {
    return problem(`${DRY_RUN}: expected on, true, 1, off, false or 0, not ${JSON.stringify(dryRun)}`)
  }
  return { _tag: "Input", raw, dryRun: dryRun !== null && TRUE.has(dryRun.toLowerCase()) }
}
