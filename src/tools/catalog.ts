// list and help describe the tools that exist; they take the registry lazily because they are in it.
// Each shows only what the entry point it is called through offers (every tool when none is named).

import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { fieldsOf, optionName, usage } from "./Fields.js"
import { defineTool, notOfferedMessage, offeredBy, type ToolContext, type Tool } from "./Tool.js"

const shown = (tools: ReadonlyArray<Tool>, context: ToolContext): ReadonlyArray<Tool> =>
  context.entryPoint === undefined ? tools : offeredBy(context.entryPoint, tools)

const ToolSummary = Schema.Struct({ name: Schema.String, summary: Schema.String, usage: Schema.String })

export const makeList = (tools: () => ReadonlyArray<Tool>) =>
  defineTool({
    name: "list",
    summary: "List the tools",
    description: "Lists every tool this entry point offers, with its usage line.",
    input: Schema.Struct({}),
    positional: [],
    output: Schema.Struct({ tools: Schema.Array(ToolSummary) }),
    allow: () => undefined,
    readOnly: true,
    handle: (_input, context) =>
      Effect.succeed({
        operations: [],
        output: { tools: shown(tools(), context).map((tool) => ({ name: tool.name, summary: tool.summary, usage: usage(tool) })) }
      })
  })

const FieldHelp = Schema.Struct({
  name: Schema.String,
  option: Schema.String,
  kind: Schema.String,
  optional: Schema.Boolean,
  positional: Schema.Boolean,
  description: Schema.String
})

export const makeHelp = (tools: () => ReadonlyArray<Tool>) =>
  defineTool({
    name: "help",
    summary: "Give help on a tool",
    description: "Says what a tool does, who may use it, and its arguments.",
    input: Schema.Struct({ tool: Schema.String.annotations({ description: "the tool's name" }) }),
    positional: ["tool"],
    output: Schema.Struct({
      name: Schema.String,
      summary: Schema.String,
      description: Schema.String,
      usage: Schema.String,
      fields: Schema.Array(FieldHelp)
    }),
    allow: () => undefined,
    readOnly: true,
    handle: (input, context) => {
      const tool = tools().find((t) => t.name === input.tool)
      if (tool !== undefined && context.entryPoint !== undefined && !shown([tool], context).includes(tool)) {
        return Effect.succeed({
          operations: [],
          stopped: { reason: "refused" as const, message: notOfferedMessage(context.entryPoint, tool) }
        })
      }
      if (tool === undefined) {
        const names = shown(tools(), context).map((t) => t.name).join(", ")
        return Effect.succeed({
          operations: [],
          stopped: { reason: "refused" as const, message: `no tool named "${input.tool}"; the tools are ${names}` }
        })
      }
      return Effect.succeed({
        operations: [],
        output: {
          name: tool.name,
          summary: tool.summary,
          description: tool.description,
          usage: usage(tool),
          fields: fieldsOf(tool).map((field) => ({
            name: field.name,
            option: field.positional ? field.name.toUpperCase() : `--${optionName(field)}`,
            kind: field.kind === "choice" ? field.choices.join("|") : field.kind,
            optional: field.optional,
            positional: field.positional,
            description: field.description
          }))
        }
      })
    }
  })
