// The CLI adapter: every subcommand is derived from a tool definition; it parses, calls runTool,
// and prints. It decides nothing: refusals come from the tool and read the same everywhere.
// The front door (Front.ts) reads the arguments first: help, usage errors, and ocx2's own options
// given after the tool's name; @effect/cli then parses what it hands on.

import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { fieldsOf, optionName, takesObject, type Field } from "../../tools/Fields.js"
import { tools } from "../../tools/Registry.js"
import { decodeInput, runTool } from "../../tools/RunTool.js"
import { type Answer, type Caller, offeredBy, type Tool } from "../../tools/Tool.js"
import { resolveCallerOrProblem } from "./Caller.js"
import { frontDoor, globalOptions as globalOptionTable } from "./Front.js"
import { lookOf, rootHelp } from "./Help.js"
import { readJsonArgument } from "./JsonArgument.js"
import { renderText } from "./RenderText.js"

export const version = "0.1.0"

const describedGlobal = (name: string): string => globalOptionTable.find((g) => g.name === name)!.description

const globalOptions = {
  json: Options.boolean("json").pipe(Options.withDescription(describedGlobal("json"))),
  repository: Options.text("repository").pipe(Options.withDescription(describedGlobal("repository")), Options.optional),
  user: Options.text("user").pipe(Options.withDescription(describedGlobal("user")), Options.optional),
  mcp: Options.boolean("mcp").pipe(Options.withDescription(describedGlobal("mcp")))
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
    : Options.text(name)
  const described = Options.withDescription(base, field.description)
  return field.optional && field.kind !== "boolean" ? (Options.optional(described) as Options.Options<unknown>) : described
}

// a choice is taken as text: whether it is one of the choices is the tool's schema's to say, as from every entry point

/** Turns what @effect/cli parsed into the tool's raw input; the tool's schema then decodes it. Left: why an argument cannot be read. */
const rawValue = (tool: Tool, field: Field, parsed: unknown): Effect.Effect<Either.Either<unknown, string>> => {
  const value = Option.isOption(parsed) ? Option.getOrUndefined(parsed) : parsed
  if (value === undefined) return Effect.succeed(Either.right(undefined))
  if (field.kind === "boolean") return Effect.succeed(Either.right(value === true ? true : field.optional ? undefined : false))
  if (field.kind === "list") return Effect.succeed(Either.right(String(value).split(/\s+/).filter((s) => s.length > 0)))
  if (field.kind === "json") {
    return readJsonArgument(String(value), { option: `--${optionName(field)}`, field: field.name, object: takesObject(tool, field.name) })
  }
  return Effect.succeed(Either.right(value))
}

/**
 * 2 is for bad usage alone (what the command line's words get wrong: options, arguments, values the
 * tool does not take), so a script can tell a call it wrote wrongly from one refused or failed (1).
 */
const exitCodeOf = (tool: Tool, answer: Answer<unknown>, usage: boolean) => {
  if (usage) {
    process.exitCode = 2
    return
  }
  if (answer.stopped.reason === "refused" || answer.stopped.reason === "failed") process.exitCode = 1
  // a tool's own status for what it answered (watch --exit-status: whether the run exited 0)
  const own = answer.stopped.reason === "completed" && answer.output !== undefined ? tool.exitStatus?.(answer.output) : undefined
  if (own !== undefined && own !== 0) process.exitCode = own
}

const printAnswer = (tool: Tool, answer: Answer<unknown>, json: boolean, usage = false) =>
  Effect.gen(function*() {
    if (json) yield* Console.log(JSON.stringify(answer))
    else if (tool.document !== undefined && answer.stopped.reason === "completed" && answer.output !== undefined) {
      // a document tool's text is its document, as its page answers it (metrics: Prometheus' text format)
      yield* Effect.sync(() => void process.stdout.write(tool.document!.body(answer.output)))
    } else {
      const text = renderText(tool, answer, lookOf())
      if (answer.stopped.reason === "refused" || answer.stopped.reason === "failed") yield* Console.error(text)
      else if (text.length > 0) yield* Console.log(text)
    }
    exitCodeOf(tool, answer, usage)
  })

const refusal = (tool: Tool, message: string): Answer<unknown> => ({ tool: tool.name, operations: [], stopped: { reason: "refused", message } })

type Global = { readonly user: Option.Option<string>; readonly repository: Option.Option<string> }

/** The caller, or why the repository named cannot be acted on (naming the file). */
const cliCaller = (global: Global): Effect.Effect<Either.Either<Caller, string>> =>
  Effect.map(
    resolveCallerOrProblem({ user: Option.getOrUndefined(global.user), repository: Option.getOrUndefined(global.repository) }),
    (found) => (found.problem !== undefined ? Either.left(found.problem) : Either.right(found.caller))
  )

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
      // the words first: a call written wrongly is bad usage whatever the repository holds
      const raw: Record<string, unknown> = {}
      for (const field of fields) {
        const value = yield* rawValue(tool, field, field.positional ? parsed.args[field.name] : parsed.options[field.name])
        if (Either.isLeft(value)) return yield* printAnswer(tool, refusal(tool, value.left), global.json, true)
        if (value.right !== undefined) raw[field.name] = value.right
      }
      const decoded = decodeInput(tool, raw)
      if (Either.isLeft(decoded)) return yield* printAnswer(tool, refusal(tool, decoded.left), global.json, true)
      const caller = yield* cliCaller(global)
      if (Either.isLeft(caller)) return yield* printAnswer(tool, refusal(tool, caller.left), global.json)
      const answer = yield* runTool(tool, raw, {
        caller: caller.right,
        dryRun: parsed.dryRun,
        repository: Option.getOrUndefined(global.repository),
        entryPoint: "cli",
        // as text, what a tool follows is printed as it happens; --json prints the answer alone
        ...(global.json ? {} : { progress: (stream: "stdout" | "stderr", text: string) => void process[stream].write(text) }),
        // a long tool's steps as it takes them (stage), on standard error, with --json too
        steps: (text: string) => void process.stderr.write(text)
      })
      yield* printAnswer(tool, answer, global.json)
    })).pipe(Command.withDescription(`${tool.summary}. ${tool.description}`))
}

const listTool = cliTools.find((t) => t.name === "list")!
const helpTool = cliTools.find((t) => t.name === "help")!

/** `ocx2 --mcp`: MCP on stdin/stdout until the client closes it; the MCP SDK is loaded only then. */
const serveMcp = (global: Global) =>
  Effect.promise(() =>
    import("./McpFlag.js").then(({ serveMcpFromCli }) =>
      serveMcpFromCli({ repository: Option.getOrUndefined(global.repository), user: Option.getOrUndefined(global.user) })))

/** `ocx2` alone lists the tools, as `ocx2 list` does; `ocx2 --mcp` serves them over MCP. */
const rootCommand = root.pipe(
  Command.withHandler((global) =>
    Effect.gen(function*() {
      const caller = yield* cliCaller(global)
      if (global.mcp) {
        if (Either.isLeft(caller)) {
          yield* Console.error(`ocx2 --mcp: ${caller.left}`)
          process.exitCode = 1
          return
        }
        return yield* serveMcp(global)
      }
      if (Either.isLeft(caller)) return yield* printAnswer(listTool, refusal(listTool, caller.left), global.json)
      const answer = yield* runTool(listTool, {}, { caller: caller.right, dryRun: false, repository: undefined, entryPoint: "cli" })
      yield* printAnswer(listTool, answer, global.json)
    }))
)

/**
 * @effect/cli's program for a call of TOOL (the front door has found it and checked its
 * arguments): the command of that tool alone is made, since making all of them costs start-up time
 * at every call.
 */
const cliFor = (tool: Tool | undefined) =>
  tool === undefined
    ? Command.run(rootCommand, { name: "ocx2", version })
    : Command.run(rootCommand.pipe(Command.withSubcommands([commandOf(tool)])), { name: "ocx2", version })

/**
 * The program: `argv` as process.argv gives it. Help, the version and bad usage are answered
 * here (bad usage on standard error, with exit status 2); the rest goes to @effect/cli.
 */
export const main = (argv: ReadonlyArray<string>) =>
  Effect.suspend(() => {
    const front = frontDoor(argv.slice(2), cliTools)
    switch (front._tag) {
      case "Usage":
        return Effect.sync(() => {
          process.exitCode = 2
        }).pipe(Effect.zipRight(Console.error(`ocx2: ${front.message}`)))
      case "Version":
        return Console.log(`ocx2 ${version}`)
      case "Help":
        if (front.tool === undefined) {
          return front.json
            ? Effect.flatMap(runTool(listTool, {}, { caller: { user: undefined, capabilities: "", sandboxed: false }, dryRun: false, repository: undefined, entryPoint: "cli" }),
              (answer) => printAnswer(listTool, answer, true))
            : Console.log(rootHelp(cliTools, version, lookOf()))
        }
        return Effect.flatMap(
          runTool(helpTool, { tool: front.tool }, { caller: { user: undefined, capabilities: "", sandboxed: false }, dryRun: false, repository: undefined, entryPoint: "cli" }),
          (answer) => printAnswer(helpTool, answer, front.json)
        )
      case "Run":
        return cliFor(front.tool)([argv[0] ?? "node", argv[1] ?? "ocx2", ...front.args])
    }
  })
