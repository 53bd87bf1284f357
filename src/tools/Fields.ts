// How each entry point sees a tool's input: read off the input schema, so the CLI's options,
// the help text, the web form and MCP's arguments all follow the one definition.

import * as Option from "effect/Option"
import * as AST from "effect/SchemaAST"
import type { Tool } from "./Tool.js"

export type FieldKind = "text" | "boolean" | "integer" | "number" | "choice" | "list" | "json"

export interface Field {
  readonly name: string
  readonly kind: FieldKind
  readonly optional: boolean
  readonly positional: boolean
  readonly description: string
  readonly choices: ReadonlyArray<string>
}

const kindOf = (ast: AST.AST): { kind: FieldKind; choices: ReadonlyArray<string> } => {
  switch (ast._tag) {
    case "StringKeyword":
    case "TemplateLiteral":
      return { kind: "text", choices: [] }
    case "BooleanKeyword":
      return { kind: "boolean", choices: [] }
    case "NumberKeyword":
      return { kind: "number", choices: [] }
    case "Refinement":
      return integerRefinement(ast) ? { kind: "integer", choices: [] } : kindOf(ast.from)
    case "Transformation":
      return kindOf(ast.from)
    case "Literal":
      return typeof ast.literal === "string" ? { kind: "choice", choices: [ast.literal] } : { kind: "json", choices: [] }
    case "Union": {
      const literals = ast.types.flatMap((t) => (t._tag === "Literal" && typeof t.literal === "string" ? [t.literal] : []))
      return literals.length === ast.types.length ? { kind: "choice", choices: literals } : { kind: "json", choices: [] }
    }
    case "TupleType":
      return ast.rest.length === 1 && kindOf(ast.rest[0]!.type).kind === "text" && ast.elements.length === 0
        ? { kind: "list", choices: [] }
        : { kind: "json", choices: [] }
    default:
      return { kind: "json", choices: [] }
  }
}

const integerRefinement = (ast: AST.Refinement): boolean =>
  Option.getOrUndefined(AST.getIdentifierAnnotation(ast)) === "Int" ||
  Option.getOrUndefined(AST.getSchemaIdAnnotation(ast))?.toString().includes("Int") === true

const describe = (ast: AST.AST): string => {
  const own = Option.getOrUndefined(AST.getDescriptionAnnotation(ast))
  if (own !== undefined) return own
  return ast._tag === "Refinement" || ast._tag === "Transformation" ? describe(ast.from) : ""
}

export const fieldsOf = (tool: Tool): ReadonlyArray<Field> =>
  AST.getPropertySignatures(tool.input.ast).map((signature) => {
    const name = String(signature.name)
    const type = signature.type._tag === "Union" && signature.isOptional
      ? withoutUndefined(signature.type)
      : signature.type
    return {
      name,
      ...kindOf(type),
      optional: signature.isOptional,
      positional: tool.positional.includes(name),
      description: describe(type)
    }
  })

const withoutUndefined = (union: AST.Union): AST.AST => {
  const types = union.types.filter((t) => t._tag !== "UndefinedKeyword")
  return types.length === 1 ? types[0]! : AST.Union.make(types)
}

/** The option name of a field: snake_case and camelCase both become kebab-case. */
export const optionName = (field: Field): string =>
  field.name.replace(/_/g, "-").replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)

/** The name of a field's value in usage lines: its option name in capitals (SERVER-URL), its choices, or a quoted list. */
export const metavar = (field: Field): string => {
  const name = optionName(field).toUpperCase()
  return field.kind === "choice" ? field.choices.join("|") : field.kind === "list" ? `'${name} ...'` : name
}

/** `ocx2 echo WORD [--option OPTION] [--flag] [--dry-run]` */
export const usage = (tool: Tool): string => {
  const parts = [`ocx2 ${tool.name}`]
  const fields = fieldsOf(tool)
  for (const name of tool.positional) {
    const field = fields.find((f) => f.name === name)
    if (field) parts.push(field.optional ? `[${metavar(field)}]` : metavar(field))
  }
  for (const field of fields.filter((f) => !f.positional)) {
    const option = field.kind === "boolean" ? `--${optionName(field)}` : `--${optionName(field)} ${metavar(field)}`
    parts.push(field.optional ? `[${option}]` : option)
  }
  parts.push("[--dry-run]")
  return parts.join(" ")
}

/** Whether a tool's field takes a JSON object (a struct or a record) and nothing else, as create's fields does. */
export const takesObject = (tool: Tool, name: string): boolean => {
  const signature = AST.getPropertySignatures(tool.input.ast).find((s) => String(s.name) === name)
  if (signature === undefined) return false
  let type = signature.type._tag === "Union" && signature.isOptional ? withoutUndefined(signature.type) : signature.type
  while (type._tag === "Refinement" || type._tag === "Transformation") type = type.from
  return type._tag === "TypeLiteral"
}
