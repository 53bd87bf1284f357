import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { fieldsOf, optionName, type Field } from "../tools/fields.js"
import { tools } from "../tools/registry.js"
import { runTool } from "../tools/runTool.js"
import { type Answer, offeredBy, type Tool } from "../tools/Tool.js"
import { resolveCaller } from "./caller.js"
import { renderText } from "./renderText.js"

// The CLI adapter: every subcommand is derived from a tool definition; it parses, calls runTool,
// and prints. It decides nothing: refusals come from the tool and read the same everywhere.

const globalOptions = {
  json: Options.boolean("json").pipe(Options.withDescription("print the answer as JSON, as the CGI and MCP return it")),
  repository: Options.text("repository").pipe(
    Options.withDescription("the repository file to act on (on the served repository's host, or a clone)"),
    Options.optional
  ),
  user: Options.text("user").pipe(Options.withDescription("the Fossil user to act as, on the served repository's host; by default the user a clone remembers, else $USER"), Options.optional),
  mcp: Options.boolean("mcp").pipe(
    Options.withDescription("serve the tools over MCP on stdin/stdout, as ocx2-mcp does, acting as --user (or the clone's user) within its capabilities in --repository")
  )
}

/** The tools the command line offers. */
const cliTools = offeredBy("cli", tools)

const root = Command.make("ocx2", globalOptions)

const argOf = (field: Field): Args.Args<unknown> => {
  const base: Args.Args<unknown> = field.kind === "integer" ? Args.integer({ name: field.name }) : Args.text({ name: field.name })
  const described = Args.withDescription(base, field.description) as Args.Args<unknown>
  return field.optional ? (Args.optional(described) as Args.Args<unknown>) : described
}

const optionOf = (field: Field): Options.Options<unknown> => {
  const name = optionName(field)
  const base: Options.Options<unknown> =
    field.kind === "boolean" ? Options.boolean(name)
    : field.kind === "integer" ? Options.integer(name)
    : field.kind === "number" ? Options.float(name)
    : field.kind === "choice" ? Options.choice(name, field.choices)
    : Options.text(name)
  const described = Options.withDescription(base, field.description)
  return field.optional && field.kind !== "boolean" ? (Options.optional(described) as Options.Options<unknown>) : described
}

/** Turns what @effect/cli parsed into the tool's raw input; the tool's schema then decodes it. */
const rawValue = (field: Field, parsed: unknown): unknown => {
  const value = Option.isOption(parsed) ? Option.getOrUndefined(parsed) : parsed
  if (value === undefined) return undefined
  if (field.kind === "boolean") return value === true ? true : field.optional ? undefined : false
  if (field.kind === "list") return String(value).split(/\s+/).filter((s) => s.length > 0)
  if (field.kind === "json") {
    try {
      return JSON.parse(String(value))
    } catch {
      return value // the schema names the field and says what it expected
    }
  }
  return value
}

const printAnswer = (tool: Tool, answer: Answer<unknown>, json: boolean) =>
  Effect.gen(function*() {
    if (json) yield* Console.log(JSON.stringify(answer))
    else {
      const text = renderText(tool, answer)
      if (answer.stopped.reason === "refused" || answer.stopped.reason === "failed") yield* Console.error(text)
      else if (text.length > 0) yield* Console.log(text)
    }
    if (answer.stopped.reason === "refused") process.exitCode = 2
    if (answer.stopped.reason === "failed") process.exitCode = 1
  })

type Global = { readonly user: Option.Option<string>; readonly repository: Option.Option<string> }

const cliCaller = (global: Global) =>
  resolveCaller({ user: Option.getOrUndefined(global.user), repository: Option.getOrUndefined(global.repository) })

const commandOf = (tool: Tool) => {
  const fields = fieldsOf(tool)
  const positional = tool.positional.flatMap((name) => fields.filter((f) => f.name === name))
  const config = {
    args: Object.fromEntries(positional.map((f) => [f.name, argOf(f)])),
    options: Object.fromEntries(fields.filter((f) => !f.positional).map((f) => [f.name, optionOf(f)])),
    dryRun: Options.boolean("dry-run").pipe(Options.withDescription("say what would be done, and do nothing"))
  }
  return Command.make(tool.name, config, (parsed) =>
    Effect.gen(function*() {
      const global = yield* root
      if (global.mcp) {
        yield* Console.error(`ocx2 --mcp serves MCP and takes no tool: run ocx2 [--repository REPO] [--user USER] --mcp, not --mcp ${tool.name}`)
        process.exitCode = 2
        return
      }
      const raw: Record<string, unknown> = {}
      for (const field of fields) {
        const value = rawValue(field, field.positional ? parsed.args[field.name] : parsed.options[field.name])
        if (value !== undefined) raw[field.name] = value
      }
      const answer = yield* runTool(tool, raw, {
        caller: yield* cliCaller(global),
        dryRun: parsed.dryRun,
        repository: Option.getOrUndefined(global.repository),
        entryPoint: "cli"
      })
      yield* printAnswer(tool, answer, global.json)
    })).pipe(Command.withDescription(`${tool.summary}. ${tool.description}`))
}

const listTool = cliTools.find((t) => t.name === "list")!

/** `ocx2 --mcp`: MCP on stdin/stdout until the client closes it; the MCP SDK is loaded only then. */
const serveMcp = (global: Global) =>
  Effect.promise(() =>
    import("./mcpFlag.js").then(({ serveMcpFromCli }) =>
      serveMcpFromCli({ repository: Option.getOrUndefined(global.repository), user: Option.getOrUndefined(global.user) })))

/** `ocx2` alone lists the tools, as `ocx2 list` does; `ocx2 --mcp` serves them over MCP. */
export const command = root.pipe(
  Command.withHandler((global) =>
    Effect.gen(function*() {
      if (global.mcp) return yield* serveMcp(global)
      const answer = yield* runTool(listTool, {}, { caller: yield* cliCaller(global), dryRun: false, repository: undefined, entryPoint: "cli" })
      yield* printAnswer(listTool, answer, global.json)
    })),
  Command.withSubcommands(cliTools.map(commandOf) as [ReturnType<typeof commandOf>])
)

export const cli = Command.run(command, { name: "ocx2", version: "0.1.0" })
