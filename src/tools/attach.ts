// 2.10: a run with process.terminal true runs on a terminal its watcher holds, "which a person
// may join with OCX's attach". The person is at this host's terminal as its OCX account: the
// socket is in ROOT/care, which that account alone may enter, so the host decides who joins.

import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { CareDirectory } from "../../services/CareDirectory.js"
import { Hosts } from "../../services/Hosts.js"
import { rootToActOn } from "../release/Served.js"
import { connectTerminal, joinTerminal } from "./support/AttachTerminal.js"
import { finish, recording, refuse } from "../operations/Operations.js"
import { defineTool } from "./Tool.js"

export const AttachInput = Schema.Struct({
  run: Schema.String.annotations({ description: "the run to join: its hash, or a prefix of it, as in ROOT/care" }),
  root: Schema.optionalWith(
    Schema.String.annotations({ description: "the release root whose node holds the run (by default the root this program was released into)" }),
    { exact: true }
  )
})

export const AttachOutput = Schema.Struct({
  run: Schema.String.annotations({ description: "the run's full hash" }),
  left: Schema.Literal("detached", "ended", "lost").annotations({
    description: "detached: you left and the run goes on; ended: its process ended; lost: the watcher's end closed"
  }),
  words: Schema.optionalWith(Schema.String.annotations({ description: "how the process ended" }), { exact: true })
})
export type AttachOutput = typeof AttachOutput.Type

/** the runs in care a name or prefix names */
const runsNamed = (care: string, name: string): ReadonlyArray<string> => {
  // round.lock and the process users' ~USER.lock are no runs
  const runs = Fs.readdirSync(care).filter((f) => f.endsWith(".lock") && f !== "round.lock" && !f.startsWith("~")).map((f) => f.slice(0, -".lock".length))
  return runs.includes(name) ? [name] : runs.filter((r) => r.startsWith(name))
}

export const attach = defineTool({
  name: "attach",
  summary: "Join a run's terminal",
  description:
    "ocx2 attach RUN joins the terminal of a run whose process.terminal is true, in this host's care: you see what it " +
    "shows (its output, with STDERR copied to it), starting with the last screenful, and what you type is typed into it. " +
    "Ctrl-] leaves, and the run goes on; several people may join at once. It is for a person at this host's terminal as " +
    "its OCX account, which alone may enter ROOT/care; never inside a run's sandbox. Refused: no such run in care, a run " +
    "with no terminal (or not launched yet), a run that has ended. --root ROOT defaults to the root this program was " +
    "released into. It writes nothing in Fossil.",
  input: AttachInput,
  positional: ["run"],
  output: AttachOutput,
  allow: (caller) => (caller.sandboxed ? "attach is for a person at the host's terminal, never inside a run's sandbox" : undefined),
  offeredBy: ["cli"],
  notOfferedBecause: "it joins a terminal on the node's host, for a person at that host's own terminal",
  handle: (input, context) => {
    const act = recording(context.dryRun)
    return finish(
      act,
      Effect.gen(function*() {
        const root = yield* rootToActOn("attach", input.root, process.argv[1])
        const careDir = Path.join(root, "care")
        if (!Fs.existsSync(careDir)) return yield* refuse(`no run is in this host's care: ${careDir} is not there`)
        const named = runsNamed(careDir, input.run)
        if (named.length === 0) return yield* refuse(`no run ${input.run} in this host's care (${careDir})`)
        if (named.length > 1) return yield* refuse(`${input.run} names ${named.length} runs in care: ${named.join(", ")}`)
        const run = named[0]!
        const care = yield* CareDirectory.pipe(Effect.provide((yield* Hosts).care(root)))
        const held = yield* care.probe(run)
        if (held !== "alive") return yield* refuse(`the run ${run} has ended: no watcher holds it`)
        const connected = yield* Effect.promise(() => connectTerminal(careDir, run))
        switch (connected._tag) {
          case "NoTerminal":
            return yield* refuse(`the run ${run} has no terminal to join: its process.terminal is false, or its process is not launched yet`)
          case "NotServed":
            return yield* refuse(`the run ${run} has ended: its terminal is no longer served`)
          case "Failed":
            return yield* refuse(`cannot reach the terminal of ${run}: ${connected.reason}`)
        }
        act.note("attach", `the terminal of ${run} (Ctrl-] leaves it, and the run goes on)`)
        if (context.dryRun) {
          connected.socket.destroy()
          yield* act("join", `your terminal to the run's`, Effect.void)
          return { run, left: "detached" } satisfies AttachOutput
        }
        const left = yield* Effect.promise(() => joinTerminal(connected.socket, { input: process.stdin, output: process.stdout }))
        return {
          run,
          left: left._tag === "Detached" ? "detached" : left._tag === "Ended" ? "ended" : "lost",
          ...(left._tag === "Ended" ? { words: left.words } : {})
        } satisfies AttachOutput
      })
    )
  }
})
