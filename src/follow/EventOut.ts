// A run's event as it is given out: in watch's answer (src/tools/watch.ts), by the node's stream
// server to the run page (StreamServer.ts), and as read back from the server's run page by a
// clone's watch (AskServer.ts). Here, beside the follower, so that none of them reaches up into
// the tools for it.
import * as Schema from "effect/Schema"
import { stateWordsOf } from "../runs/RunWords.js"
import type { WatchEvent } from "./Follow.js"

const optional = <A, I>(schema: Schema.Schema<A, I>, description: string) =>
  Schema.optionalWith(schema.annotations({ description }), { exact: true })

export const WatchEventOut = Schema.Struct({
  type: Schema.Literal("state", "output", "delivery", "missed", "end"),
  at: Schema.String.annotations({ description: "when (ISO 8601, UTC)" }),
  state: optional(Schema.String, "state and end: the state in words"),
  stream: optional(Schema.Literal("stdout", "stderr"), "output: which stream printed it"),
  text: optional(Schema.String, "output: what it printed; missed: what was missed"),
  hash: optional(Schema.String, "delivery: the artifact given to the session"),
  line: optional(Schema.String, "delivery: the line given on its standard input")
})
export type WatchEventOut = typeof WatchEventOut.Type

const iso = (ms: number): string => new Date(ms).toISOString().replace(/\.(\d{3})Z$/, ".$1Z")

/** An event as the answer gives it. */
export const eventOut = (event: WatchEvent): WatchEventOut => {
  const at = iso(event.at)
  switch (event.type) {
    case "state":
    case "end":
      return { type: event.type, at, state: stateWordsOf(event.summary) }
    case "output":
      return { type: "output", at, stream: event.stream, text: event.text }
    case "delivery":
      return { type: "delivery", at, hash: event.hash, line: event.line }
    case "missed":
      return { type: "missed", at, text: event.what }
  }
}
