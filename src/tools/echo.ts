import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { defineTool } from "./Tool.js"

const EchoInput = Schema.Struct({
  word: Schema.String.annotations({ description: "the word to echo" }),
  option: Schema.optionalWith(Schema.String.annotations({ description: "an optional value, echoed back" }), { exact: true }),
  flag: Schema.optionalWith(Schema.Boolean.annotations({ description: "a flag, echoed back" }), { exact: true })
})

const EchoOutput = Schema.Struct({
  word: Schema.String,
  option: Schema.optionalWith(Schema.String, { exact: true }),
  flag: Schema.Boolean
})

export const echo = defineTool({
  name: "echo",
  summary: "Echo the input",
  description: "Answers with its input: a way to see how an entry point passes arguments, and who it says is calling.",
  input: EchoInput,
  positional: ["word"],
  output: EchoOutput,
  allow: () => undefined,
  handle: (input) =>
    Effect.succeed({
      operations: [],
      output: { word: input.word, ...(input.option !== undefined ? { option: input.option } : {}), flag: input.flag ?? false }
    })
})
