// MCP offers each tool with JSON Schemas derived from its Effect Schemas; the one thing added
// is dry_run, the entry point's own argument, which every tool takes.

import * as JSONSchema from "effect/JSONSchema"
import { answerSchema, type Tool } from "../tools/Tool.js"

export type JsonObjectSchema = { readonly type: "object"; readonly properties: Record<string, object> } & Record<string, unknown>

export const dryRunProperty = {
  type: "boolean",
  description: "say what would be done, and do nothing"
} as const

/** A root that is an object schema: `$ref`s to `$defs` are inlined, `$schema`/`$id` dropped (MCP means 2020-12). */
const objectRoot = (made: Record<string, unknown>): Record<string, unknown> => {
  const { $schema: _schema, $id: _id, ...rest } = made
  const ref = rest.$ref
  if (typeof ref === "string" && ref.startsWith("#/$defs/")) {
    const defs = (rest.$defs ?? {}) as Record<string, Record<string, unknown>>
    const { $ref: _ref, ...others } = rest
    return { ...defs[decodeURIComponent(ref.slice("#/$defs/".length))], ...others }
  }
  return rest
}

const withObjectType = (schema: Record<string, unknown>): JsonObjectSchema => {
  const properties = (schema.properties ?? {}) as Record<string, object>
  return { ...schema, type: "object", properties } as JsonObjectSchema
}

/** The tool's input as MCP offers it: the derived schema plus a boolean `dry_run`. */
export const inputJsonSchema = (tool: Tool): JsonObjectSchema => {
  const schema = withObjectType(objectRoot(JSONSchema.make(tool.input, { target: "jsonSchema2020-12" }) as unknown as Record<string, unknown>))
  return { ...schema, properties: { ...schema.properties, dry_run: dryRunProperty } }
}

/** The answer's schema (operations, output, stopped), which MCP's structuredContent follows. */
export const answerJsonSchema = (tool: Tool): JsonObjectSchema =>
  withObjectType(objectRoot(JSONSchema.make(answerSchema(tool.output), { target: "jsonSchema2020-12" }) as unknown as Record<string, unknown>))
