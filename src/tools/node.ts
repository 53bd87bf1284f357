// The node on a clone's host, as a tool: its call (src/node/CloneNode.ts) is the node's own, which
// the clone's supervisor makes too when it starts.

import * as Schema from "effect/Schema"
import { runCloneNode } from "../node/CloneNode.js"
import { recording } from "../operations/Operations.js"
import { defineTool } from "./Tool.js"

const text = (description: string) => Schema.String.annotations({ description })

export const NodeInput = Schema.Struct({
  server_url: text("the server's URL, as the clone remembers it (https://SERVER/REPO)"),
  passwords_file: text("the node user's passwords file: {\"user\": LOGIN, \"password\": TEXT}, readable by this account alone"),
  check: Schema.optionalWith(
    Schema.Boolean.annotations({ description: "the node starting: act on every open run for the node user (lost, stopped, handed on)" }),
    { exact: true }
  ),
  root: Schema.optionalWith(text("the release root (by default the root this program was released into)"), { exact: true })
})
export type NodeInput = typeof NodeInput.Type

export const NodeOutput = Schema.Struct({
  repository: Schema.String,
  server: Schema.String,
  user: Schema.String.annotations({ description: "the node user" }),
  root: Schema.String,
  check: Schema.Boolean.annotations({ description: "whether every open run was decided (the node starting)" }),
  why: Schema.String.annotations({ description: "why this call checked every open run, or read what the pull brought" }),
  runs: Schema.Array(Schema.Struct({ run: Schema.String, action: Schema.String }))
})
export type NodeOutput = typeof NodeOutput.Type


export const node = defineTool({
  name: "node",
  summary: "Be a node on another host",
  description:
    "ocx2 --repository CLONE node SERVER-URL PASSWORDS-FILE [--check]: the node of a clone on its own host, run from a " +
    "timer as often as the node should learn of new runs. PASSWORDS-FILE is {\"user\": LOGIN, \"password\": TEXT}, the node " +
    "user's password on the server, a regular file owned by this account and readable by it alone (chmod 600), outside " +
    "every path a run binds; CLONE is a clone made as that user with fossil clone --save-http-password. Each call signs " +
    "in to the server as the node user, pulls, asks the server who sent each run and stop the pull brought (the clone's " +
    "own receipts name only its pulls), and acts on them in the server's order as the server's hook does: refusals and " +
    "stops answered, each run it can start handed to a watcher that pushes every report to the server as the node user " +
    "and launches only once the server has received its started. --check (also taken on the first call, and after the " +
    "host restarted) acts on every open run for the node user: lost when its watcher is gone, a missed stop sent on, " +
    "one never started handed on. --root ROOT defaults to the root this program was released into.",
  input: NodeInput,
  positional: ["server_url", "passwords_file"],
  output: NodeOutput,
  // the passwords file, readable by this host account alone, is what lets a call act as the node
  allow: (caller) => (caller.sandboxed ? "node runs on its own host, never inside a run's sandbox" : undefined),
  offeredBy: ["cli"],
  notOfferedBecause: "it runs on its own host",
  handle: (input, context) => runCloneNode(input, context, recording(context.dryRun), process.argv[1])
})
