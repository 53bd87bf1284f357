// A JSON argument on the command line (create's --fields): the JSON itself, or, as curl and
// kubectl take it, @FILE to read it from FILE and - to read it from standard input. Only the
// command line reads files: the CGI and MCP take the JSON itself. A file that cannot be read, or
// does not hold what the option takes, is an error naming the file.

import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { parseJsonText } from "../JsonText.js"

const readStandardInput = (stdin: NodeJS.ReadableStream): Effect.Effect<string, string> =>
  Effect.async<string, string>((resume) => {
    const chunks: Array<Buffer> = []
    const onData = (chunk: Buffer | string) => {
      chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk)
    }
    const onEnd = () => {
      cleanup()
      resume(Effect.succeed(Buffer.concat(chunks).toString("utf8")))
    }
    const onError = (e: Error) => {
      cleanup()
      resume(Effect.fail(e.message))
    }
    const cleanup = () => {
      stdin.off("data", onData)
      stdin.off("end", onEnd)
      stdin.off("error", onError)
    }
    stdin.on("data", onData)
    stdin.once("end", onEnd)
    stdin.once("error", onError)
    stdin.resume()
    return Effect.sync(cleanup)
  })

const kindOfValue = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "an array" : typeof value === "object" ? "an object" : `a ${typeof value}`

export interface JsonArgumentOptions {
  /** the option's name, for messages: --fields */
  readonly option: string
  /** the tool's field it gives, for messages: fields */
  readonly field: string
  /** whether the option takes a JSON object (and nothing else) */
  readonly object: boolean
  readonly stdin?: NodeJS.ReadableStream
}

/**
 * The value of a JSON argument: Right the value; Left the reason, naming the option and the file
 * (or standard input) it could not read, or where its JSON stops parsing.
 */
export const readJsonArgument = (text: string, options: JsonArgumentOptions): Effect.Effect<Either.Either<unknown, string>> => {
  const fromSource = (source: string, content: string): Either.Either<unknown, string> => {
    const parsed = parseJsonText(content)
    if ("problem" in parsed) return Either.left(`${options.option} ${source === "standard input" ? "-" : `@${source}`}: ${source} is ${parsed.problem}`)
    const value = parsed.value
    if (options.object && (value === null || typeof value !== "object" || Array.isArray(value))) {
      return Either.left(`${options.option} ${source === "standard input" ? "-" : `@${source}`}: ${source} holds ${kindOfValue(value)}, not a JSON object`)
    }
    return Either.right(value)
  }
  if (text === "-") {
    return readStandardInput(options.stdin ?? process.stdin).pipe(
      Effect.map((content) => fromSource("standard input", content)),
      Effect.catchAll((message) => Effect.succeed(Either.left(`${options.option} -: standard input cannot be read: ${message}`)))
    )
  }
  if (text.startsWith("@")) {
    return Effect.sync(() => {
      const given = text.slice(1)
      if (given === "") return Either.left(`${options.option} @FILE names no file: write @ and the file's path, such as @fields.json`)
      const file = Path.resolve(given)
      let content: string
      try {
        content = Fs.readFileSync(file, "utf8")
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code
        return Either.left(code === "ENOENT"
          ? `${options.option} @${given}: no file ${file}`
          : `${options.option} @${given}: ${file} cannot be read (${code ?? (e as Error).message})`)
      }
      return fromSource(file, content)
    })
  }
  // said as every entry point says a field's JSON that does not parse, naming where
  return Effect.sync(() => {
    const parsed = parseJsonText(text)
    return "value" in parsed ? Either.right(parsed.value) : Either.left(`bad argument: ${options.field}: ${parsed.problem}`)
  })
}
